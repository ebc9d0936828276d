// JSON exactly as Go's encoding/json writes it. The apiserver keeps a ControllerRevision's `data` as the bytes it
// was sent (a RawExtension) and holds them immutable by comparing bytes. Whenever it applies a strategic merge
// patch to a revision (the garbage collector's orphaning, an adoption or release by a controller written in Go)
// it re-encodes `data` with encoding/json; bytes written any other way (JavaScript's key order, `&` unescaped)
// then differ, and the apiserver refuses the patch as a change to data. Written this way, they round-trip.

/** Go's encoding/json output for a JSON value: keys sorted by their UTF-8 bytes, no spaces, HTML-safe escapes. */
export function goJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return goString(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`goJson: ${value} is not a JSON number`);
      // Both print the shortest decimal that reads back as the same float, switching to exponents at the same
      // bounds (below 1e-6, from 1e21) and with the same exponent format.
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : goJson(v))).join(',')}]`;
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).filter((k) => record[k] !== undefined);
      keys.sort(byUtf8);
      return `{${keys.map((k) => `${goString(k)}:${goJson(record[k])}`).join(',')}}`;
    }
    default:
      throw new TypeError(`goJson: a ${typeof value} is not JSON`);
  }
}

// encoding/json escapes these beyond what JSON.stringify does, so that JSON can sit inside HTML and JavaScript.
const GO_ESCAPES = /[<>&\u2028\u2029]/g;

function goString(s: string): string {
  return JSON.stringify(s).replace(GO_ESCAPES, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Go compares strings by their UTF-8 bytes; JavaScript's sort, by UTF-16 units (they differ above U+E000). */
function byUtf8(a: string, b: string): number {
  if (/^[\x00-\x7f]*$/.test(a + b)) return a < b ? -1 : a > b ? 1 : 0;
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** A JSON value, as JSON.parse gives it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };
