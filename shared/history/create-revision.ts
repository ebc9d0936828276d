// Creating a ControllerRevision of a parent's state, through the collision loop: the one way history and a
// CompositeController's rolling updates write a revision (docs/design/history-sync.md#labels). An adapter: it
// writes through the KubeApi it is given.
import type { KubeApi, ResolvedResource } from '../kube/index.ts';
import { Resources, type KubeObject } from '../kube/resource.ts';
import { isKubeError } from '../kube/errors.ts';
import { goJson, semanticallyEqual } from '../json.ts';
import { isOwnedBy, newControllerRef, newOwnerRef } from '../ownership/controller-ref.ts';
import { fieldAt, labelSelectorString, parentLabels, revisionHash, revisionName, type Json, type JsonObject } from './data.ts';
import { HASH_LABEL, selectsRevision, type ControllerRevision } from './revisions.ts';

export const MAX_COLLISIONS = 10;
const CHANGE_CAUSE = 'kubernetes.io/change-cause';

/** The parent's own selector matches the labels of a revision Outrigger would write beside its controller's history. */
export class CoexistSelectorError extends Error {
  override name = 'CoexistSelectorError';
}

/** Every name a revision of this data could take is held by a revision of other data (someone else's). */
export class RevisionNamesTakenError extends Error {
  override name = 'RevisionNamesTakenError';
}

/** A revision to create: its data and number, and how it is labelled and owned. */
export interface NewRevision {
  data: JsonObject;
  number: number;
  /** Labels under the parent labels and the hash label. */
  labels?: Record<string, string>;
  /** Called before each write; throws when the caller may no longer write (its lease is about to expire). */
  guard?: () => void;
  /** revisionKey mode's key label: an existing revision with another key there is a collision. */
  keyLabel?: string | undefined;
  /** `owner` beside another controller's history (Coexist): a plain ownerReference. */
  reference?: 'controller' | 'owner';
}

/**
 * Creates the revision named `<parent>-<hash(data, count)>`, starting at collision count 0. On
 * AlreadyExists the existing revision is read: if it holds the same target state and is the parent's (an
 * earlier attempt whose answer was lost), it is the one; otherwise the next count is tried, at most
 * MAX_COLLISIONS times. The hash label always matches the name; `labels` come under the parent labels and it.
 * With `keyLabel` (revisionKey mode), an existing revision whose key differs is another key's revision, a
 * collision: a key is how the objects made from a revision find it, so it is never rewritten. With `reference`
 * `owner` (Coexist), the parent owns it by a plain ownerReference, and nothing is written where the parent's own
 * selector would match it: the parent's controller would list it with its own history, or adopt it.
 */
export async function createRevision(
  kube: KubeApi,
  target: ResolvedResource,
  parent: KubeObject,
  { data, number, labels = {}, guard = () => {}, keyLabel, reference = 'controller' }: NewRevision,
): Promise<ControllerRevision> {
  const namespace = parent.metadata.namespace!;
  const cause = parent.metadata.annotations?.[CHANGE_CAUSE];
  if (reference === 'owner') refuseSelected(target, parent, { ...labels, ...parentLabels(parent), [HASH_LABEL]: revisionHash(data, 0) });
  // `count` moves on only after a real collision; `attempts` bounds the loop whatever happens meanwhile.
  for (let count = 0, attempts = 0; count < MAX_COLLISIONS && attempts < 2 * MAX_COLLISIONS; attempts += 1) {
    const hash = revisionHash(data, count);
    const name = revisionName(parent.metadata.name ?? '', hash);
    const revision: ControllerRevision = {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: {
        name,
        namespace,
        labels: { ...labels, ...parentLabels(parent), [HASH_LABEL]: hash },
        ...(cause ? { annotations: { [CHANGE_CAUSE]: cause } } : {}),
        ownerReferences: [reference === 'owner' ? newOwnerRef(parent) : newControllerRef(parent)],
      },
      data: data as Json,
      revision: number,
    };
    guard();
    try {
      return await kube.create(Resources.controllerRevisions, revision, { encode: goJson });
    } catch (err) {
      if (!isKubeError(err, 'AlreadyExists')) throw err;
    }
    let existing: ControllerRevision;
    try {
      existing = await kube.get<ControllerRevision>(Resources.controllerRevisions, { name, namespace });
    } catch (err) {
      if (isKubeError(err, 'NotFound')) continue; // deleted in between: the same name is free again
      throw err;
    }
    const sameKey = keyLabel === undefined || existing.metadata.labels?.[keyLabel] === revision.metadata.labels?.[keyLabel];
    if (semanticallyEqual(existing.data, data) && isOwnedBy(existing, parent) && sameKey) {
      // Ours, with this data: an earlier attempt whose answer was lost, or a revision this sync's list did not
      // select. Make it what this sync would have created (its labels, the number; never its data).
      const missing = Object.entries(revision.metadata.labels ?? {}).some(([k, v]) => existing.metadata.labels?.[k] !== v);
      if (!missing && existing.revision >= number) return existing;
      guard();
      return kube.patch<ControllerRevision>(
        Resources.controllerRevisions,
        { name, namespace },
        {
          metadata: { uid: existing.metadata.uid, resourceVersion: existing.metadata.resourceVersion, labels: revision.metadata.labels },
          revision: Math.max(existing.revision, number),
        },
        'merge',
      );
    }
    count += 1;
  }
  throw new RevisionNamesTakenError(
    `${target.kind} ${namespace}/${parent.metadata.name}: ${MAX_COLLISIONS} revision names in a row were taken by other data; not creating a revision`,
  );
}

function refuseSelected(target: ResolvedResource, parent: KubeObject, labels: Record<string, string>): void {
  if (selectsRevision(fieldAt(parent, 'spec.selector'), labels))
    throw new CoexistSelectorError(
      `${target.kind} ${parent.metadata.namespace}/${parent.metadata.name}: its spec.selector matches the labels of Outrigger's revisions ` +
        `(${labelSelectorString(labels)}), so its own controller would take them for its history; not writing a revision beside it`,
    );
}
