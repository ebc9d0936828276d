// The forwarder's envelope signatures (docs/operations/security.md#events-are-triggers-not-state). Each cluster's
// forwarder signs the envelopes it sends with a key of its own cluster, derived from the deployment's secret, and
// the router trusts an envelope's object as the parent's state only when that signature verifies with the key of
// the cluster whose queue it came from. An envelope without a signature, or with one that does not verify, is a
// trigger only: the handler reads the parent. Pure: node:crypto only.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { derivedKey } from '../hooks/signature.ts';
import { SIGNATURE_ATTRIBUTE, SIGNATURE_PATTERN, type Envelope } from './index.ts';

const VERSION = 'v1';
const HKDF_SALT = 'outrigger forwarder signing v1';

/** One cluster's forwarder key (hex): HKDF-SHA256 of the deployment's secret, with `forwarder/<cluster>` as info. */
export function forwarderKey(secret: string, cluster: string): string {
  if (!cluster) throw new Error('a forwarder key needs the cluster id');
  return derivedKey(secret, HKDF_SALT, `forwarder/${cluster}`);
}

/**
 * JSON with every object's keys sorted, nothing dropped: two parses of the same envelope give the same text
 * whatever order their keys came in, and any change of a value, a key or an array gives another.
 */
export function canonicalText(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalText).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonicalText((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/**
 * What is signed, one a line: the version, the cluster, the event type, the object's apiVersion, kind, namespace,
 * name, uid and resourceVersion, and the SHA-256 of the canonical text of `data` (the object and the old object).
 */
export function signedEnvelopeText(envelope: Pick<Envelope, 'cluster' | 'type' | 'data'>): string {
  const o = envelope.data.object;
  const m = o.metadata;
  return [
    VERSION,
    envelope.cluster,
    envelope.type,
    o.apiVersion ?? '',
    o.kind ?? '',
    m.namespace ?? '',
    m.name ?? '',
    m.uid ?? '',
    m.resourceVersion ?? '',
    createHash('sha256').update(canonicalText(envelope.data)).digest('hex'),
  ].join('\n');
}

/** The signature attribute's value for an envelope, under a cluster's forwarder key. */
export function envelopeSignature(key: string, envelope: Pick<Envelope, 'cluster' | 'type' | 'data'>): string {
  return `${VERSION}=${createHmac('sha256', key).update(signedEnvelopeText(envelope)).digest('hex')}`;
}

/** The envelope with its signature attribute (any earlier one replaced). */
export function signEnvelope<E extends Pick<Envelope, 'cluster' | 'type' | 'data'>>(key: string, envelope: E): E {
  return { ...envelope, [SIGNATURE_ATTRIBUTE]: envelopeSignature(key, envelope) };
}

/**
 * Whether the envelope carries a signature that verifies under `cluster`'s forwarder key (one of `keys`, two
 * during a rotation of the deployment's secret). `cluster` is the cluster whose queue the envelope came from, not
 * the envelope's own field: the signed text names it, so a signature made for another cluster fails.
 */
export function verifyEnvelope(keys: readonly string[], cluster: string, envelope: Envelope): boolean {
  const given = envelope[SIGNATURE_ATTRIBUTE];
  if (typeof given !== 'string' || !SIGNATURE_PATTERN.test(given)) return false;
  const offered = Buffer.from(given);
  return keys.some((key) => {
    const expected = Buffer.from(envelopeSignature(key, { ...envelope, cluster }));
    return expected.length === offered.length && timingSafeEqual(expected, offered);
  });
}
