// Webhook request signatures (docs/reference/hooks.md#signatures). Each MapController signs with a key of its own,
// derived from the deployment's signing secret over `<cluster>/<MapController uid>`, so a receiver holds only its
// own controller's key and can forge nothing for another. The signature covers the method, the URL, the time, a
// request id and the body, so a request cannot be sent again to another URL, nor replayed once its window is past
// (or, within it, to a receiver that remembers ids: createVerifier does). This module imports node:crypto only, so
// a receiver may copy it as it is.
import { createHash, createHmac, hkdfSync, randomUUID, timingSafeEqual } from 'node:crypto';

/** `v1=<hex>`: HMAC-SHA256, keyed by the controller's key, of signedText. */
export const SIGNATURE_HEADER = 'x-outrigger-signature';
/** When the request was signed, in Unix seconds. */
export const TIMESTAMP_HEADER = 'x-outrigger-timestamp';
/** A new random id per request (each retry has its own): a receiver refuses one it has seen. */
export const REQUEST_ID_HEADER = 'x-outrigger-request-id';
/** How far a request's timestamp may be from the receiver's clock, either way. */
export const REPLAY_WINDOW_SECONDS = 300;

const VERSION = 'v1';
const HKDF_SALT = 'outrigger webhook signing v1';

/** One MapController's signing key (hex): HKDF-SHA256 of the deployment's secret, with `<cluster>/<uid>` as info. */
export function controllerKey(secret: string, cluster: string, controllerUid: string): string {
  if (!cluster || !controllerUid) throw new Error('a controller key needs the cluster id and the MapController uid');
  return derivedKey(secret, HKDF_SALT, `${cluster}/${controllerUid}`);
}

/**
 * A key (hex) derived from the deployment's secret: HKDF-SHA256 with `salt` naming what the key is for (each use
 * its own, so no key of one use is a key of another) and `info` naming whose it is.
 */
export function derivedKey(secret: string, salt: string, info: string): string {
  if (!secret) throw new Error('the signing secret is empty');
  return Buffer.from(hkdfSync('sha256', secret, salt, info, 32)).toString('hex');
}

export interface SignedFields {
  method: string;
  url: string;
  /** Unix seconds, as a decimal string. */
  timestamp: string;
  requestId: string;
  body: string;
}

/** What is signed: the version, method, URL (as `new URL` writes it), timestamp, request id and body's SHA-256, one a line. */
export function signedText(f: SignedFields): string {
  return [
    VERSION,
    f.method.toUpperCase(),
    new URL(f.url).href,
    f.timestamp,
    f.requestId,
    createHash('sha256').update(f.body).digest('hex'),
  ].join('\n');
}

/** The value of SIGNATURE_HEADER. */
export function signature(key: string, f: SignedFields): string {
  return `${VERSION}=${createHmac('sha256', key).update(signedText(f)).digest('hex')}`;
}

/** The headers a request carries: the timestamp and id always, the signature when there is a key. */
export function signedHeaders(
  key: string | undefined,
  request: { method: string; url: string; body: string },
  nowMs: number,
  requestId: string = randomUUID(),
): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000));
  const headers: Record<string, string> = { [TIMESTAMP_HEADER]: timestamp, [REQUEST_ID_HEADER]: requestId };
  if (key !== undefined) headers[SIGNATURE_HEADER] = signature(key, { ...request, timestamp, requestId });
  return headers;
}

/** A request's headers: Node's `req.headers` (lower-case names), or anything with `get` (fetch's Headers). */
export type HeaderSource = Record<string, string | string[] | undefined> | { get(name: string): string | null };

export type Verdict = { ok: true } | { ok: false; reason: string };

export interface VerifierOptions {
  /** The controller's key (`outrigger hook-key`); two during a rotation of the deployment's secret. */
  keys: string | readonly string[];
  /** The URL this receiver is called at, exactly as the MapController's hook names it (proxies change what a server sees). */
  url: string;
  /** Default POST. */
  method?: string;
  /** Default REPLAY_WINDOW_SECONDS. */
  toleranceSeconds?: number;
  now?: () => number;
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof headers.get === 'function') return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  const value = (headers as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * A receiver's check of each request, over the raw body: the signature under one of its keys, for its own URL,
 * a timestamp within the window, and a request id not seen within it (ids are remembered for the window, in
 * memory: several replicas of a receiver each remember their own).
 */
export function createVerifier(opts: VerifierOptions): (request: { headers: HeaderSource; body: string }) => Verdict {
  const keys = typeof opts.keys === 'string' ? [opts.keys] : [...opts.keys];
  if (!keys.length || keys.some((k) => !k)) throw new Error('a verifier needs the controller key');
  const url = new URL(opts.url).href;
  const method = opts.method ?? 'POST';
  const window = opts.toleranceSeconds ?? REPLAY_WINDOW_SECONDS;
  const now = opts.now ?? Date.now;
  const seen = new Map<string, number>();
  return ({ headers, body }) => {
    const nowS = now() / 1000;
    for (const [id, until] of seen) if (until < nowS) seen.delete(id);
    const timestamp = header(headers, TIMESTAMP_HEADER);
    const requestId = header(headers, REQUEST_ID_HEADER);
    const given = header(headers, SIGNATURE_HEADER);
    if (!timestamp || !requestId || !given) return { ok: false, reason: 'the request is not signed' };
    if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowS - Number(timestamp)) > window)
      return { ok: false, reason: `the request's timestamp is more than ${window} s from now` };
    const fields = { method, url, timestamp, requestId, body };
    const offered = given.split(',').map((s) => Buffer.from(s.trim()));
    const good = keys.some((key) => {
      const expected = Buffer.from(signature(key, fields));
      return offered.some((o) => o.length === expected.length && timingSafeEqual(o, expected));
    });
    if (!good) return { ok: false, reason: 'the signature does not match (another key, URL, time, id or body)' };
    if (seen.has(requestId)) return { ok: false, reason: 'the request id was seen before (a replay)' };
    seen.set(requestId, Number(timestamp) + window);
    return { ok: true };
  };
}
