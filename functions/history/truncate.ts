// Truncation (docs/design/history-sync.md#truncation), run whenever the parent's limit or live set may have changed
// and it owns more revisions than the limit could keep (docs/design/history-sync.md), and for every parent of a
// kind whose policy spec changed. It deletes the oldest non-live revisions the parent owns until at most the
// limit remain. Never deleted: the latest revision, any revision holding the parent's target state as truncation
// reads it (a rollback whose sync has not run yet), any revision a generated object is labelled with or the
// parent's status names (current and update revision), and anything the parent does not own.
// No lease: every delete carries the revision's uid and resourceVersion as preconditions, so a revision that
// changed after it was read (renumbered by a rollback, relabelled by an adoption) is left for the next run to
// decide on, and a sync that loses the race to reuse a deleted revision fails its write and is retried. So a
// history sync never waits for truncation.
import { Resources, isKubeError, resolveKind, type GVR, type KubeApi, type KubeObject } from '../../shared/kube/index.ts';
import { fieldAt, labelSelectorString, parentLabels, targetState, type JsonObject } from '../../shared/history/data.ts';
import { semanticallyEqual } from '../../shared/json.ts';
import { historyLimit, statusRevisions, type RevisionPolicy } from '../../shared/history/policy.ts';
import { HASH_LABEL, truncationPlan, type ControllerRevision } from '../../shared/history/revisions.ts';
import { targetDigest, type KnownRevision } from '../../shared/history/record.ts';
import { isOwnedBy, selectorAt, SelectorError, selectorString, type SyncKey } from '../../shared/ownership/index.ts';
import { targetDefaults } from './defaults.ts';
import { resolveTarget, targetReader } from './policies.ts';
import { HISTORY_CONTROLLER } from './outcome.ts';
import { currentRevisionKey } from './revision-key.ts';
import { recordEvent } from '../../shared/events/index.ts';
import { truncationRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import type { Logger } from '@aws-lambda-powertools/logger';

export interface TruncateResult {
  deleted: string[];
  /** Revisions it would have deleted that were gone already (someone else's delete, which the history record may not know of). */
  gone?: string[];
  kept: number;
  live: string[];
  skipped?: string;
}

/**
 * Names, hashes and revision keys of the revisions in use: by generated objects' labels (the revision label,
 * and in revisionKey mode the key label) and by the parent's status. Undefined when the generated objects
 * cannot be found (no readable selector): then nothing can be known to be dead, and nothing is deleted.
 */
export async function liveRevisions(
  kube: KubeApi,
  policy: RevisionPolicy,
  parent: KubeObject,
  seen: { generatedVersion?: string | undefined } = {},
): Promise<Set<string> | undefined> {
  const live = new Set<string>(statusRevisions(policy, parent));
  const generated = policy.spec.generated;
  if (generated) {
    let labelSelector: string | undefined;
    try {
      labelSelector = selectorString(selectorAt(fieldAt(parent, generated.selectorPath)));
    } catch (err) {
      if (err instanceof SelectorError) return undefined; // unreadable: which revisions are live cannot be known
      throw err;
    }
    if (labelSelector === undefined) return undefined;
    const resource = await resolveKind(kube, generated.apiVersion, generated.kind);
    const objects = await listGenerated(kube, resource, { namespace: parent.metadata.namespace, labelSelector }, seen);
    const labels = [generated.revisionLabel, ...(policy.spec.revisionKey ? [policy.spec.revisionKey.label] : [])];
    for (const o of objects) {
      for (const l of labels) {
        const v = o.metadata.labels?.[l];
        if (v) live.add(v);
      }
    }
  }
  return live;
}

/**
 * The generated objects, from the apiserver's watch cache as soon as it has seen `seen.generatedVersion` (the
 * version the last truncation's list answered at; it then records this one's there). A consistent list instead
 * waits until that cache has caught up with etcd, which after a write to another resource (the revision just
 * made) takes up to a progress-notify round, ~95 ms here: within the parent's sync, that delay would hold up its
 * next change. The cache is what kube-controller-manager decides by too (its informer's); a consistent list
 * where nothing was seen yet, or when the cache answers 504 (a restored etcd), or the objects take more pages.
 */
async function listGenerated(
  kube: KubeApi,
  resource: GVR,
  { namespace, labelSelector }: { namespace: string | undefined; labelSelector: string },
  seen: { generatedVersion?: string | undefined },
): Promise<KubeObject[]> {
  if (seen.generatedVersion) {
    try {
      const page = await kube.list(resource, {
        namespace,
        labelSelector,
        resourceVersion: seen.generatedVersion,
        resourceVersionMatch: 'NotOlderThan',
      });
      if (!page.metadata.continue) {
        seen.generatedVersion = page.metadata.resourceVersion;
        return page.items;
      }
    } catch (err) {
      if (!(isKubeError(err) && err.status === 504)) throw err;
    }
  }
  const first = await kube.list(resource, { namespace, labelSelector, limit: 500 });
  seen.generatedVersion = first.metadata.resourceVersion;
  const items = [...first.items];
  for (let cont = first.metadata.continue || undefined; cont;) {
    const page = await kube.list(resource, { namespace, labelSelector, limit: 500, continue: cont });
    items.push(...page.items);
    cont = page.metadata.continue || undefined;
  }
  return items;
}

export async function truncateHistory(deps: { kube: KubeApi }, policy: RevisionPolicy, key: SyncKey): Promise<TruncateResult> {
  return truncateFrom(deps, policy, key, {
    revisionsOf: async (parent) => {
      const listed = await deps.kube.list<ControllerRevision>(Resources.controllerRevisions, {
        namespace: parent.metadata.namespace,
        labelSelector: labelSelectorString(parentLabels(parent)),
      });
      return listed.items;
    },
  });
}

/**
 * Truncation right after a history sync, under its lease, from the revisions that sync listed and wrote, or knew
 * from the history record, and from the parent as that sync decided on it: no list of revisions and no read of
 * the parent of its own. The generated objects are listed all the same: they alone make a revision live
 * (docs/design/history-sync.md#truncation, for why a change to the parent since needs no read).
 */
export async function truncateSynced(
  deps: { kube: KubeApi },
  policy: RevisionPolicy,
  key: SyncKey,
  revisions: readonly KnownRevision[],
  opts: { quiet?: boolean; seen?: { generatedVersion?: string | undefined }; parent?: KubeObject } = {},
): Promise<TruncateResult> {
  return truncateFrom(deps, policy, key, { ...opts, revisionsOf: async () => [...revisions] });
}

/**
 * Truncation right after a history sync, under its lease (HistoryDeps.truncate), from the revisions the sync
 * listed and wrote and the parent it decided on; `quiet` when the sync's own Event says what was deleted. It
 * answers the names deleted, and those found gone already; `seen` carries the generated objects' version from
 * one truncation to the next (listGenerated).
 */
export type TruncationStep = (
  revisions: KnownRevision[],
  quiet: boolean,
  seen: { generatedVersion?: string | undefined },
  parent: KubeObject,
) => Promise<{ deleted: string[]; gone: string[] }>;

/**
 * The history function's truncation step for one sync request. A failure is queued as the parent's truncation
 * request, which retries on its own: a redelivered sync would find nothing to do.
 */
export function truncationStep(
  kube: KubeApi,
  policy: RevisionPolicy,
  { key, causes }: { key: SyncKey; causes: readonly string[] },
  { logger, sink }: { logger: Pick<Logger, 'info' | 'warn'>; sink: SyncSink },
): TruncationStep {
  const parentName = `${key.namespace}/${key.name}`;
  return async (revisions, quiet, seen, parent) => {
    try {
      const truncated = await truncateSynced({ kube }, policy, key, revisions, { quiet, seen, parent });
      logger.info('history truncated', { parent: parentName, ...truncated });
      return { deleted: truncated.deleted, gone: truncated.gone ?? [] };
    } catch (err) {
      logger.warn('truncation after the sync failed; queued as a truncation request', { parent: parentName, error: String(err) });
      await sink.send('history', [truncationRequest(key, [...causes])]);
      return { deleted: [], gone: [] };
    }
  };
}

/**
 * `revisionsOf`: the parent's revisions. `quiet`: no Truncated Event (the sync's own Event says what was deleted).
 * `parent`: the parent as decided on; else it is read.
 */
async function truncateFrom(
  deps: { kube: KubeApi },
  policy: RevisionPolicy,
  key: SyncKey,
  opts: {
    revisionsOf: (parent: KubeObject) => Promise<KnownRevision[]>;
    quiet?: boolean;
    seen?: { generatedVersion?: string | undefined };
    parent?: KubeObject;
  },
): Promise<TruncateResult> {
  const target = await resolveTarget(deps.kube, policy);
  let parent: KubeObject;
  try {
    parent = opts.parent ?? (await targetReader(deps.kube, policy).get(target, { name: key.name, namespace: key.namespace }));
  } catch (err) {
    if (isKubeError(err, 'NotFound')) return { deleted: [], kept: 0, live: [], skipped: 'the parent no longer exists' };
    throw err;
  }
  if (parent.metadata.uid !== key.uid) return { deleted: [], kept: 0, live: [], skipped: 'the parent was replaced' };
  if (parent.metadata.deletionTimestamp) return { deleted: [], kept: 0, live: [], skipped: 'the parent is being deleted' };

  const owned = (await opts.revisionsOf(parent)).filter((r) => isOwnedBy(r, parent));
  const live = await liveRevisions(targetReader(deps.kube, policy), policy, parent, opts.seen);
  if (!live) {
    return {
      deleted: [],
      kept: owned.length,
      live: [],
      skipped: `the parent has no readable selector at ${policy.spec.generated?.selectorPath}, so live revisions cannot be known`,
    };
  }
  const candidate = targetState(parent as unknown as JsonObject, policy.spec.targetState);
  const defaults = await targetDefaults(deps.kube, key.cluster, target);
  // A revision known from the history record alone carries the digest of its data instead; one with neither is kept.
  const held = targetDigest(candidate, defaults);
  const holds = (r: KnownRevision) =>
    r.data !== undefined ? semanticallyEqual(r.data, candidate, defaults) : r.digest === undefined || r.digest === held;
  for (const r of owned) if (holds(r)) live.add(r.metadata.name!);
  const doomed =
    policy.spec.mode === 'revisionKey'
      ? await revisionKeyPlan(targetReader(deps.kube, policy), policy, parent, { owned, live })
      : truncationPlan(owned, live, historyLimit(policy, parent));
  const deleted: string[] = [];
  const gone: string[] = [];
  for (const r of doomed) {
    try {
      await deps.kube.delete(
        Resources.controllerRevisions,
        { name: r.metadata.name!, namespace: r.metadata.namespace },
        {
          preconditions: { uid: r.metadata.uid!, resourceVersion: r.metadata.resourceVersion! },
        },
      );
      deleted.push(r.metadata.name!);
    } catch (err) {
      if (isKubeError(err, 'NotFound')) gone.push(r.metadata.name!);
      else if (!isKubeError(err, 'Conflict')) throw err;
    }
  }
  if (deleted.length && !opts.quiet) {
    const note = `Deleted ${deleted.length} revision(s) beyond the history limit: ${deleted.join(', ')}`;
    await recordEvent(
      deps.kube,
      parent,
      { type: 'Normal', reason: 'Truncated', action: 'Delete', note },
      { controller: HISTORY_CONTROLLER, instance: 'truncate' },
    );
  }
  return { deleted, kept: owned.length - deleted.length, live: [...live], ...(gone.length ? { gone } : {}) };
}

/**
 * Seed 001: once the rollout is done (the policy's condition is True on the parent), every revision but the
 * current key's is deleted; the latest revision (the parent's target state) is kept whatever its key.
 */
async function revisionKeyPlan(
  kube: KubeApi,
  policy: RevisionPolicy,
  parent: KubeObject,
  { owned, live }: { owned: ControllerRevision[]; live: ReadonlySet<string> },
): Promise<ControllerRevision[]> {
  const { label, rolloutCompleteCondition } = policy.spec.revisionKey!;
  const conditions = (fieldAt(parent, 'status.conditions') as Array<{ type?: string; status?: string }> | undefined) ?? [];
  if (!conditions.some((c) => c.type === rolloutCompleteCondition && c.status === 'True')) return [];
  const current = await currentRevisionKey(kube, policy, parent);
  if (!current) return [];
  const latest = [...owned].sort((a, b) => a.revision - b.revision).at(-1);
  const isLive = (r: ControllerRevision) =>
    [r.metadata.name, r.metadata.labels?.[HASH_LABEL], r.metadata.labels?.[label]].some((v) => v !== undefined && live.has(v));
  return owned.filter((r) => r !== latest && r.metadata.labels?.[label] !== current && !isLive(r));
}

/** Every parent of the policy's kind, as keys for truncation: a new policy spec may change any one's limit or live set. */
export async function policyParents(kube: KubeApi, cluster: string, policy: RevisionPolicy): Promise<SyncKey[]> {
  const target = await resolveTarget(kube, policy);
  return (await targetReader(kube, policy).listAll(target)).map((p) => ({
    cluster,
    group: target.group,
    kind: target.kind,
    namespace: p.metadata.namespace,
    name: p.metadata.name ?? '',
    uid: p.metadata.uid ?? '',
  }));
}
