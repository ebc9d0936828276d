// JSON values as Outrigger compares, hashes and writes them: semantic equality and a short name-safe hash (below),
// and JSON exactly as Go's encoding/json writes it. The apiserver keeps a ControllerRevision's `data` as the bytes it
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

// Semantic equality of JSON values (docs/design/history-sync.md#equivalence-is-semantic): both sides are normalised so that what does not
// change meaning (key order, a null against an absent field, the `$patch` directive, and, given a kind's defaults, a
// field set to its default against an absent one) cannot make two equal values differ. An empty map or list is a
// value, not an absent field: `namespaceSelector: {}` selects every namespace, and a custom resource's `tracing: {}`
// may switch tracing on.

/** A structural-schema subset: where defaults are, and what they are. Mirrors the object's shape. */
export interface DefaultsSchema {
  /** The value the field takes when it is absent from its (present) enclosing object. */
  readonly default?: Json;
  /** A default that depends on the enclosing object (the image pull policy depends on the image's tag). */
  readonly derive?: (enclosing: JsonObject) => Json | undefined;
  readonly properties?: Readonly<Record<string, DefaultsSchema>>;
  /** The schema of each item of a list. */
  readonly items?: DefaultsSchema;
  /** The schema of each value of a map (keys not in `properties`). */
  readonly additionalProperties?: DefaultsSchema;
}

/**
 * Removes what carries no meaning, recursively; returns undefined for "nothing": null, or an object whose every
 * field is absent (a null: what a target state holds for a path absent under an absent parent) or, with `defaults`
 * (the kind's, rooted where `value` is), its default. A field whose value is its default is removed, as if it were
 * absent. An empty map or list, as written, stays: it is a value. `legacyEmpty` also removes every empty map and
 * list, as revision names were first hashed (shortHash keeps them stable).
 */
export function normalize(value: Json | undefined, defaults?: DefaultsSchema, legacyEmpty = false): Json | undefined {
  if (value === null || value === undefined) return undefined;
  if (Array.isArray(value)) {
    const items = value.map((v) => normalize(v, defaults?.items, legacyEmpty) ?? null);
    return legacyEmpty && items.length === 0 ? undefined : items;
  }
  if (typeof value === 'object') {
    const out: JsonObject = {};
    let nulled = false;
    let defaulted = false;
    for (const key of Object.keys(value).sort()) {
      if (key === '$patch') continue;
      // Own keys only: a field named like an Object.prototype member is not in the schema.
      const field = defaults?.properties && Object.hasOwn(defaults.properties, key) ? defaults.properties[key] : undefined;
      const v = normalize(value[key], field ?? defaults?.additionalProperties, legacyEmpty);
      if (v === undefined) nulled = true;
      else if (field && isDefault(v, value, field)) defaulted = true;
      else out[key] = v;
    }
    return Object.keys(out).length === 0 && (legacyEmpty || nulled || defaulted) ? undefined : out;
  }
  return value;
}

/** Whether the normalised `v` is the default of `field` in `enclosing`, compared in normal form on both sides. */
function isDefault(v: Json, enclosing: JsonObject, field: DefaultsSchema): boolean {
  const d = field.derive ? field.derive(enclosing) : field.default;
  if (d === undefined) return false;
  const normal = normalize(d, field);
  return normal !== undefined && JSON.stringify(v) === JSON.stringify(normal);
}

/** Deterministic JSON of the normalised value: keys sorted, meaningless fields gone. */
export function canonicalJson(value: Json | undefined, defaults?: DefaultsSchema): string {
  return JSON.stringify(normalize(value, defaults) ?? null);
}

export function semanticallyEqual(a: Json | undefined, b: Json | undefined, defaults?: DefaultsSchema): boolean {
  return canonicalJson(a, defaults) === canonicalJson(b, defaults);
}

// 32-bit FNV-1a.
function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

// Vowel-free, so no name spells a word; the same alphabet apimachinery uses for generated names.
const ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

/**
 * A short, name-safe hash of a JSON value's canonical form (no defaults) and a salt: FNV-1a, written in the
 * vowel-free alphabet. Revision names, MapController's applied-state annotation and storage migration names use it.
 */
export function shortHash(data: Json, salt: number): string {
  // Empty maps and lists left out, as when names were first hashed: a name made before `{}` became a value is the
  // name the same data gets now (two data that differ only there move on to the next salt, as any collision does).
  const decimal = String(fnv1a32(`${JSON.stringify(normalize(data, undefined, true) ?? null)}\n${salt}`));
  let out = '';
  for (const ch of decimal) out += ALPHABET[ch.charCodeAt(0) % ALPHABET.length];
  return out;
}
