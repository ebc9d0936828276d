// The revisionKey mode (KEP-238): the generated objects' current key decides, and a revision is found by its key.
import { Resources, isKubeError, resolveKind, type KubeApi, type KubeObject } from '../../shared/kube/index.ts';
import { fieldAt, labelSelectorString, parentLabels, revisionHash } from '../../shared/history/data.ts';
import type { RevisionPolicy } from '../../shared/history/policy.ts';
import { currentKeyOf, decideByKey, maxRevision, type ControllerRevision } from '../../shared/history/revisions.ts';
import { controllerOf, isControlledBy, isOwnedBy, selectorAt, selectorString } from '../../shared/ownership/index.ts';
import { createRevision } from '../../shared/history/create-revision.ts';
import type { HeldSync, LockedOutcome } from './outcome.ts';
import { targetReader } from './policies.ts';
import { kubectlLabels, revisionReference } from './revisions.ts';

/** Seed 001 (KEP-238): the sync in revisionKey mode, from the generated objects' current key (decideByKey). */
export async function syncRevisionKey(
  held: HeldSync,
  owned: ControllerRevision[],
  listedVersion: string | undefined,
): Promise<LockedOutcome> {
  const { kube, policy, parent, candidate, guard } = held;
  const label = policy.spec.revisionKey!.label;
  const current = await currentRevisionKey(targetReader(kube, policy), policy, parent);
  const decision = decideByKey(candidate, owned, label, current, revisionHash(candidate, 0), policy.defaults);
  if (decision.kind === 'unchanged')
    return {
      outcome: { outcome: 'unchanged', revision: decision.revision.metadata.name!, number: decision.revision.revision },
      revisionsVersion: listedVersion,
      revisionUid: decision.revision.metadata.uid,
    };
  const r = await createRevision(kube, held.target, parent, {
    data: candidate,
    number: maxRevision(owned) + 1,
    labels: { ...kubectlLabels(policy, parent, candidate), [label]: decision.key },
    guard,
    keyLabel: label,
    reference: revisionReference(policy),
  });
  return {
    outcome: { outcome: 'created', revision: r.metadata.name!, number: r.revision, truncate: true },
    revisionsVersion: r.metadata.resourceVersion,
    revisionUid: r.metadata.uid,
  };
}

/**
 * The key on the generated objects the parent controls (docs/controllers/history.md#keyed-revisions-revisionkey-mode): directly, or through one
 * object it controls (LWS's leader pods belong to the leader StatefulSet the LWS controls); objects being
 * deleted do not count. The one named like the parent, or else the first by name.
 */
export async function currentRevisionKey(kube: KubeApi, policy: RevisionPolicy, parent: KubeObject): Promise<string | undefined> {
  const generated = policy.spec.generated;
  const label = policy.spec.revisionKey?.label;
  if (!generated || !label) return undefined;
  const labelSelector = selectorString(selectorAt(fieldAt(parent, generated.selectorPath)));
  if (labelSelector === undefined) return undefined;
  const resource = await resolveKind(kube, generated.apiVersion, generated.kind);
  const labelled = (await kube.listAll(resource, { namespace: parent.metadata.namespace, labelSelector })).filter(
    (o) => o.metadata.labels?.[label] && !o.metadata.deletionTimestamp,
  );
  return currentKeyOf(parent.metadata.name, await controlledByParent(kube, parent, labelled), label);
}

/** The objects whose controller is the parent, or a live object whose controller is the parent. */
async function controlledByParent(kube: KubeApi, parent: KubeObject, objects: KubeObject[]): Promise<KubeObject[]> {
  const owners = new Map<string, Promise<boolean>>();
  const ownerControlled = async (o: KubeObject): Promise<boolean> => {
    const ref = controllerOf(o)!;
    try {
      const resource = await resolveKind(kube, ref.apiVersion, ref.kind);
      const owner = await kube.get(resource, { name: ref.name, namespace: resource.namespaced ? o.metadata.namespace : undefined });
      return owner.metadata.uid === ref.uid && !owner.metadata.deletionTimestamp && isControlledBy(owner, parent);
    } catch (err) {
      // Gone, or not ours to read: nothing shows the parent controls it.
      if (isKubeError(err, 'NotFound') || isKubeError(err, 'Forbidden')) return false;
      throw err;
    }
  };
  const kept = await Promise.all(
    objects.map((o) => {
      const ref = controllerOf(o);
      if (!ref) return false;
      if (ref.uid === parent.metadata.uid) return true;
      if (!owners.has(ref.uid)) owners.set(ref.uid, ownerControlled(o));
      return owners.get(ref.uid)!;
    }),
  );
  return objects.filter((_, i) => kept[i]);
}

/** Looks a revision up by its key, as KEP-238's pod controller does. */
export async function revisionForKey(
  kube: KubeApi,
  policy: RevisionPolicy,
  parent: KubeObject,
  key: string,
): Promise<ControllerRevision | undefined> {
  const label = policy.spec.revisionKey?.label;
  if (!label) throw new Error(`RevisionPolicy ${policy.name} is not in revisionKey mode`);
  const listed = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
    namespace: parent.metadata.namespace,
    labelSelector: `${labelSelectorString(parentLabels(parent))},${label}=${key}`,
  });
  return listed.items
    .filter((r) => isOwnedBy(r, parent))
    .sort((a, b) => a.revision - b.revision)
    .at(-1);
}
