// What the forwarder sends whole and what as metadata only (docs/operations/forwarder.md). The router needs, of an
// object that is not a parent, only its labels, ownerReferences and deletion state; the handlers read parents and
// children from the apiserver themselves. So only parents and definitions are watched whole: a pod's spec and
// status, and a Secret's data, never leave the cluster.
import { gvr, gvrString, type GVR, type KubeObject, type SourceEvent } from '../shared/kube/index.ts';
import { isDeepStrictEqual } from 'node:util';
import { fieldAt } from '../shared/history/data.ts';
import { routedDigest } from './skeleton.ts';

const SECRETS = gvrString(gvr('', 'v1', 'secrets'));

/** Whether `resource` is watched as metadata only, given the resources whose events must carry whole objects. */
export function watchedAsMetadata(resource: GVR, whole: ReadonlySet<string> | undefined): boolean {
  // A Secret's data stays in the cluster even when a controller names Secrets as its parents.
  if (gvrString(resource) === SECRETS) return true;
  return whole !== undefined && !whole.has(gvrString(resource));
}

/**
 * Whether a modification seen as metadata only changed nothing routing could read: the same metadata apart from
 * the resourceVersion and managed fields, and the same generation, so the change was to status alone (a pod's
 * readiness). An object with no generation (a ConfigMap) cannot tell a status change from a data change: its
 * modifications are all sent.
 */
export function statusOnly(old: KubeObject | undefined, next: KubeObject): boolean {
  // Compared by digest: what the forwarder keeps of the old object is its skeleton (forwarder/skeleton.ts).
  const before = old && routedDigest(old);
  return before !== undefined && before === routedDigest(next);
}

/**
 * Whether a parent's modification changed its status alone (statusOnly: the same metadata and generation) and, of
 * its status, none of the fields its controllers read (`paths`, dotted). Such a change would only wake a sync
 * with nothing to do: a history parent's status steps through a rollout, its current and update revision moving
 * once (docs/operations/cost.md#parents-status-steps).
 */
export function unreadStatusChange(old: KubeObject | undefined, next: KubeObject, paths: readonly string[]): boolean {
  if (!old || !statusOnly(old, next)) return false;
  return paths.every((p) => isDeepStrictEqual(fieldAt(old, p), fieldAt(next, p)));
}

/**
 * What is sent of an object watched as metadata only: no annotations and no managed fields. Routing reads labels,
 * ownerReferences, deletion state and generation; annotations may hold anything, a Secret's whole data among
 * them (kubectl's last-applied-configuration), and managed fields name its keys
 * (docs/operations/security.md#secrets-stay-in-the-cluster).
 */
export function routingOnly(e: SourceEvent): SourceEvent {
  const strip = (o: KubeObject): KubeObject => {
    const { annotations: _annotations, managedFields: _managedFields, ...metadata } = o.metadata;
    return { ...o, metadata };
  };
  return { ...e, object: strip(e.object), ...(e.oldObject ? { oldObject: strip(e.oldObject) } : {}) };
}
