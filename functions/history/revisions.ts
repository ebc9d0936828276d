// A parent's revisions: listing them, and writing what was decided (nothing, a rollback's new number, or a new
// revision, through the collision loop of shared/history/create-revision.ts).
import type { KubeApi } from '../../shared/kube/index.ts';
import { Resources, isKubeError, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import { fieldAt, selectorLabels, type JsonObject } from '../../shared/history/data.ts';
import { historyLimit, type RevisionPolicy } from '../../shared/history/policy.ts';
import { foreignRevisions, truncationMayDelete, type ControllerRevision, type Outcome } from '../../shared/history/revisions.ts';
import { createRevision } from '../../shared/history/create-revision.ts';
import type { KnownRevision } from '../../shared/history/record.ts';
import { parseSelector, SelectorError, type LabelSelector } from '../../shared/ownership/index.ts';
import type { HeldSync, LockedOutcome } from './outcome.ts';

/**
 * How a policy's revisions are owned: beside another controller's history, by a plain ownerReference, so that
 * the parent's own controller never claims or releases them (docs/controllers/history.md#coexistence).
 */
export const revisionReference = (policy: RevisionPolicy): 'controller' | 'owner' =>
  policy.spec.foreignHistory === 'Coexist' ? 'owner' : 'controller';

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
  held: HeldSync,
  owned: T[],
  version: string | undefined,
  outcome: Outcome<T>,
): Promise<LockedOutcome> {
  const { kube, policy, parent, candidate, guard } = held;
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
      const patched = await kube.patch<ControllerRevision>(
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
      const created = await createRevision(kube, held.target, parent, {
        data: candidate,
        number: outcome.number,
        labels: kubectlLabels(policy, parent, candidate),
        guard,
        reference: revisionReference(policy),
      });
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
 * The name of a revision another controller keeps for the parent, unless the policy coexists with it. Found
 * among the namespace's revisions by its ControllerRef, whatever its labels (LWS's match no selector of the
 * parent's, and a LeaderWorkerSet has none): one metadata list, on a parent's first sync only.
 */
export async function foreignHistoryOf(
  kube: KubeApi,
  policy: RevisionPolicy,
  target: ResolvedResource,
  parent: KubeObject,
): Promise<string | undefined> {
  if (policy.spec.foreignHistory === 'Coexist') return undefined;
  const listed = await kube.listMetadata(Resources.controllerRevisions, { namespace: parent.metadata.namespace });
  return foreignRevisions(listed.items, target, parent.metadata.uid)[0]?.metadata.name;
}
