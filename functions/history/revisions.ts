// A parent's revisions: listing them, and writing what was decided (nothing, a rollback's new number, or a new
// revision, through the collision loop).
import type { KubeApi } from '../../shared/kube/index.ts';
import { Resources, isKubeError, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import {
  fieldAt,
  labelSelectorString,
  parentLabels,
  revisionHash,
  revisionName,
  selectorLabels,
  type Json,
  type JsonObject,
} from '../../shared/history/data.ts';
import { goJson, semanticallyEqual } from '../../shared/json.ts';
import { historyLimit, type RevisionPolicy } from '../../shared/history/policy.ts';
import { HASH_LABEL, selectsRevision, truncationMayDelete, type ControllerRevision, type Outcome } from '../../shared/history/revisions.ts';
import type { KnownRevision } from '../../shared/history/record.ts';
import {
  isOwnedBy,
  newControllerRef,
  newOwnerRef,
  parseSelector,
  SelectorError,
  type LabelSelector,
} from '../../shared/ownership/index.ts';
import type { LockedOutcome } from './outcome.ts';

export const MAX_COLLISIONS = 10;
const CHANGE_CAUSE = 'kubernetes.io/change-cause';

/**
 * How a policy's revisions are owned: beside another controller's history, by a plain ownerReference, so that
 * the parent's own controller never claims or releases them (docs/controllers/history.md#coexistence).
 */
export const revisionReference = (policy: RevisionPolicy): 'controller' | 'owner' =>
  policy.spec.foreignHistory === 'Coexist' ? 'owner' : 'controller';

/** The parent's own selector matches the labels of a revision Outrigger would write beside its controller's history. */
export class CoexistSelectorError extends Error {
  override name = 'CoexistSelectorError';
}

/** Every name a revision of this data could take is held by a revision of other data (someone else's). */
export class RevisionNamesTakenError extends Error {
  override name = 'RevisionNamesTakenError';
}

/**
 * The parent's revisions, at least as new as `notOlderThan` (from the history record). Without one (a first
 * sync), or when the apiserver has not got that far (a restored etcd: it answers 504 after waiting), a
 * consistent list.
 */
export async function listRevisions(kube: KubeApi, namespace: string, labelSelector: string, notOlderThan: string | undefined) {
  if (notOlderThan) {
    try {
      return await kube.list<ControllerRevision>(Resources.controllerRevisions, {
        namespace,
        labelSelector,
        resourceVersion: notOlderThan,
        resourceVersionMatch: 'NotOlderThan',
      });
    } catch (err) {
      if (!(isKubeError(err) && err.status === 504)) throw err;
    }
  }
  return kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace, labelSelector });
}

/** Writes what was decided: nothing, a rollback's new number (its data untouched) or a new revision. */
export async function writeDecision<T extends KnownRevision>(
  deps: { kube: KubeApi },
  policy: RevisionPolicy,
  target: ResolvedResource,
  parent: KubeObject,
  candidate: JsonObject,
  guard: () => void,
  owned: T[],
  version: string | undefined,
  outcome: Outcome<T>,
): Promise<LockedOutcome> {
  const namespace = parent.metadata.namespace!;
  const limit = historyLimit(policy, parent);
  const truncate = (count: number) => (truncationMayDelete(count, limit) ? { truncate: true as const } : {});
  switch (outcome.kind) {
    case 'unchanged':
      return {
        outcome: {
          outcome: 'unchanged',
          revision: outcome.revision.metadata.name!,
          number: outcome.revision.revision,
          ...truncate(owned.length),
        },
        revisionsVersion: version,
        revisionUid: outcome.revision.metadata.uid,
        revisions: owned,
      };
    case 'rollback': {
      // Only the number changes; the apiserver would refuse a change to data, and we never send one.
      const r = outcome.revision;
      guard();
      const patched = await deps.kube.patch<ControllerRevision>(
        Resources.controllerRevisions,
        { name: r.metadata.name!, namespace },
        { metadata: { uid: r.metadata.uid, resourceVersion: r.metadata.resourceVersion }, revision: outcome.number },
        'merge',
      );
      return {
        outcome: { outcome: 'rollback', revision: r.metadata.name!, number: outcome.number, ...truncate(owned.length) },
        revisionsVersion: patched.metadata.resourceVersion,
        revisionUid: patched.metadata.uid,
        revisions: owned.map((o): KnownRevision => (o === r ? patched : o)),
      };
    }
    case 'create': {
      const created = await createRevision(
        deps.kube,
        target,
        parent,
        candidate,
        outcome.number,
        kubectlLabels(policy, parent, candidate),
        guard,
        undefined,
        revisionReference(policy),
      );
      return {
        outcome: { outcome: 'created', revision: created.metadata.name!, number: created.revision, ...truncate(owned.length + 1) },
        revisionsVersion: created.metadata.resourceVersion,
        revisionUid: created.metadata.uid,
        revisions: [...owned.filter((o) => o.metadata.name !== created.metadata.name), created],
      };
    }
  }
}

/**
 * Labels that let stock kubectl find a revision of `data` by the parent's selector (docs/design/history-sync.md#labels):
 * none beside another controller's history, whose controller lists revisions by that selector and would take
 * Outrigger's for its own, nor in revisionKey mode, where the selector is the generated objects' (LWS's own
 * revisions carry its labels) and kubectl keeps no history of the kind (docs/controllers/history.md#coexistence).
 */
export function kubectlLabels(policy: RevisionPolicy, parent: KubeObject, data: JsonObject): Record<string, string> {
  if (policy.spec.foreignHistory === 'Coexist' || policy.spec.mode === 'revisionKey') return {};
  const at = fieldAt(parent, policy.spec.generated?.selectorPath ?? 'spec.selector');
  return selectorLabels(typeof at === 'string' ? parsedOrNone(at) : (at as LabelSelector | undefined), data, policy.spec.targetState);
}

// A malformed string selector gives no labels, as a malformed object selector does in selectorLabels.
function parsedOrNone(selector: string): LabelSelector | undefined {
  try {
    return parseSelector(selector);
  } catch (err) {
    if (err instanceof SelectorError) return undefined;
    throw err;
  }
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
  data: JsonObject,
  number: number,
  labels: Record<string, string> = {},
  guard: () => void = () => {},
  keyLabel?: string,
  reference: 'controller' | 'owner' = 'controller',
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
