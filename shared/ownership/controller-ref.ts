// ControllerRef: an ownerReference with controller: true. An object has at most one (the apiserver rejects a
// second), and ownership is decided by uid alone: names are reused, uids never are.
import type { KubeObject, OwnerReference } from '../kube/resource.ts';

export interface ParentIdentity {
  apiVersion?: string | undefined;
  kind?: string | undefined;
  metadata: { name?: string; namespace?: string; uid?: string; deletionTimestamp?: string };
}

export function controllerOf(obj: Pick<KubeObject, 'metadata'>): OwnerReference | undefined {
  return obj.metadata.ownerReferences?.find((r) => r.controller === true);
}

export function isControlledBy(obj: Pick<KubeObject, 'metadata'>, owner: Pick<ParentIdentity, 'metadata'>): boolean {
  const ref = controllerOf(obj);
  return ref !== undefined && owner.metadata.uid !== undefined && ref.uid === owner.metadata.uid;
}

/** The ControllerRef a parent puts on what it creates or adopts. */
export function newControllerRef(parent: ParentIdentity): OwnerReference {
  const { name, uid } = parent.metadata;
  const { apiVersion, kind } = parent;
  if (!name || !uid || !apiVersion || !kind) {
    throw new Error(
      `a ControllerRef needs the parent's apiVersion, kind, name and uid (got ${apiVersion ?? '?'} ${kind ?? '?'} ${name ?? '?'} / ${uid ?? '?'})`,
    );
  }
  return { apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true };
}

/**
 * An ownerReference to the parent that is not a ControllerRef: the garbage collector deletes the object with the
 * parent all the same, but no controller that claims by ControllerRef (adopting orphans its selector matches,
 * releasing what it controls and no longer matches) counts the object as its own or releases it.
 */
export function newOwnerRef(parent: ParentIdentity): OwnerReference {
  return { ...newControllerRef(parent), controller: false };
}

/** Owned by `owner`: it is the object's controller, or the object has no controller and an ownerReference to it. */
export function isOwnedBy(obj: Pick<KubeObject, 'metadata'>, owner: Pick<ParentIdentity, 'metadata'>): boolean {
  const uid = owner.metadata.uid;
  if (uid === undefined) return false;
  const ref = controllerOf(obj);
  return ref ? ref.uid === uid : (obj.metadata.ownerReferences ?? []).some((r) => r.uid === uid);
}

export function isBeingDeleted(obj: { metadata: { deletionTimestamp?: string | undefined } }): boolean {
  return Boolean(obj.metadata.deletionTimestamp);
}
