// What the forwarder keeps of a watched object between its events (docs/operations/forwarder.md#memory): a routing
// skeleton (the fields the router reads of an old or deleted object, and the resourceVersion) and a digest of
// the metadata a status-only change leaves alone, so that memory follows the number of objects, not their size.
// A parent small enough is kept whole: the router compares its old and new target state (ControllerKind.targetChanged).
import { createHash } from 'node:crypto';
import { canonicalText } from '../shared/envelope/signature.ts';
import type { KubeObject } from '../shared/kube/index.ts';

/** A parent up to this size (as JSON) is kept whole; a larger one, as a skeleton (its target comparison then says "changed"). */
export const MAX_KEPT_WHOLE_BYTES = 16 * 1024;

/** Each skeleton's digest of the object it was made from (see `routedDigest`). */
const digests = new WeakMap<KubeObject, string>();

/** What routing reads of an old or deleted object, and its version: what the forwarder keeps and checkpoints. */
export function skeletonOf(o: KubeObject): KubeObject {
  const m = o.metadata;
  return {
    apiVersion: o.apiVersion,
    kind: o.kind,
    metadata: {
      name: m.name,
      ...(m.namespace ? { namespace: m.namespace } : {}),
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      ...(m.labels ? { labels: m.labels } : {}),
      ...(m.ownerReferences ? { ownerReferences: m.ownerReferences } : {}),
    },
  };
}

/** What the watch keeps of an object: a parent (`whole`) up to MAX_KEPT_WHOLE_BYTES as it is, anything else as its skeleton. */
export function kept(o: KubeObject, whole: boolean): KubeObject {
  if (whole && Buffer.byteLength(JSON.stringify(o)) <= MAX_KEPT_WHOLE_BYTES) return o;
  const skeleton = skeletonOf(o);
  const digest = routedDigest(o);
  if (digest !== undefined) digests.set(skeleton, digest);
  return skeleton;
}

/**
 * A digest of the metadata apart from the resourceVersion and managed fields, generation included; undefined
 * for an object without a generation (whose status changes cannot be told from others). For a skeleton, the
 * digest of the object it was made from (`kept`).
 */
export function routedDigest(o: KubeObject): string | undefined {
  const known = digests.get(o);
  if (known !== undefined || o.metadata.generation === undefined) return known;
  const routed = { ...o.metadata, resourceVersion: undefined, managedFields: undefined };
  return createHash('sha256').update(canonicalText(routed)).digest('hex');
}
