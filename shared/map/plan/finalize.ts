// A parent being deleted: the controller's finalizer, and the outputs its finalize hook keeps.
import type { KubeObject } from '../../kube/resource.ts';
import { APPLIED_ANNOTATION, MAP_KEY_LABEL, PARENT_LABEL } from '../api.ts';

/** A finalize hook that answers `finalized: false` without resyncAfterSeconds is called again after this long. */
export const FINALIZE_AGAIN_SECONDS = 10;

/**
 * A kept output released from a parent that goes (the finalize hook kept it): a merge patch, conditional on the
 * resourceVersion read, that removes the parent's ControllerRef and Outrigger's labels and annotation, so the
 * garbage collector leaves it when the parent is gone and no later pass takes it for an output.
 */
export function releasePatch(o: KubeObject, parentUid: string): Record<string, unknown> {
  const refs = (o.metadata.ownerReferences ?? []).filter((r) => r.uid !== parentUid);
  return {
    metadata: {
      resourceVersion: o.metadata.resourceVersion,
      ownerReferences: refs.length ? refs : null,
      labels: { [MAP_KEY_LABEL]: null, [PARENT_LABEL]: null },
      annotations: { [APPLIED_ANNOTATION]: null },
    },
  };
}
