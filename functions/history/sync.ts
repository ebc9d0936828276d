// Controller history for one parent (docs/controllers/history.md): Reconcile(key) for the history controller.
//  1. Read the parent; compute its target object state (the candidate revision data).
//  2. Fast path: when only the parent itself changed since the last sync and its target state is the one
//     recorded in DynamoDB for it, nothing can have changed: one apiserver read, no write.
//  3. Otherwise, holding the parent's lease (so overlapping invocations for one parent run one at a time and
//     revision numbers strictly increase in creation order): list its revisions by label, claim them (adopt
//     matching orphans, release strays) through the ownership library, and decide:
//     equal to the latest -> nothing; equal to an older one -> rollback (that revision gets the next number,
//     its data untouched); otherwise -> a new revision with the next number.
//  4. When the history may hold more revisions than the limit keeps, trim it right after, under the lease (the
//     injected truncation step, truncate.ts's truncationStep), or say that truncation is due.
//  5. Leave the record of what was found on the lease as it is released; then the Event that is news of it.
import {
  Resources,
  apiVersionOf,
  isKubeError,
  type KubeApi,
  type KubeList,
  type KubeObject,
  type ResolvedResource,
} from '../../shared/kube/index.ts';
import { labelSelectorString, parentLabels, targetState, type JsonObject } from '../../shared/history/data.ts';
import type { DefaultsSchema } from '../../shared/json.ts';
import { recordEvent, type EventSpec } from '../../shared/events/index.ts';
import { spendEvent, withWithheld } from '../../shared/events/allowance.ts';
import { truncationInputs, type RevisionPolicy } from '../../shared/history/policy.ts';
import { decide, type ControllerRevision } from '../../shared/history/revisions.ts';
import {
  decideByDigest,
  defaultsKey,
  observedSuffices,
  parentCauses,
  recordAnswers,
  recordedRevisions,
  recordListSuffices,
  recordHoldsListed,
  recordMayAnswer,
  recordFrom,
  recordRevisions,
  storedRecord,
  type RecordHead,
  resyncCauses,
  targetDigest,
  type HistoryRecord,
} from '../../shared/history/record.ts';
import { claim, compileSelector, type SyncKey } from '../../shared/ownership/index.ts';
import type { Lease, LeaseStore } from '../../shared/state/index.ts';
import { targetDefaults } from './defaults.ts';
import { CoexistSelectorError, RevisionNamesTakenError } from '../../shared/history/create-revision.ts';
import { HISTORY_CONTROLLER, outcomeEvent, type HeldSync, type LockedOutcome, type SyncOutcome } from './outcome.ts';
import { resolveTarget, targetReader } from './policies.ts';
import { syncRevisionKey } from './revision-key.ts';
import { foreignHistoryOf, listRevisions, revisionReference, writeDecision } from './revisions.ts';
import type { TruncationStep } from './truncate.ts';

// Longer than the function timeout (60 s) with room to spare: a holder never outlives its lease unnoticed.
const LEASE_TTL_MS = 90_000;
/** A write is made only while the lease has at least this long left. */
const LEASE_MARGIN_MS = 15_000;
const LEASE_WAIT_MS = 20_000;
/**
 * A parent's lease item, with its record, is kept this long after the last sync that took it; then DynamoDB's TTL
 * deletes it, so a gone parent's item goes too (docs/controllers/history.md#the-history-record-and-its-ttl). A parent
 * that lives on without a full sync for that long only loses a cache: its next sync lists.
 */
export const RECORD_KEEP_SECONDS = 7 * 24 * 3600;

export interface HistoryDeps {
  kube: KubeApi;
  /** The parents' history leases, and the records left on them (a State's; test/fakes/leases.ts in unit tests). */
  state: { leases: Pick<LeaseStore, 'get' | 'acquireWithin' | 'stillHeld' | 'release'> };
  /** Identifies this invocation as a lease holder. */
  holder: string;
  /** The clock the parent's allowance of Events runs by (tests). */
  now?: () => number;
  /**
   * Truncates right after a full sync that may leave more revisions than the limit keeps (truncationStep).
   * Without it, the sync only says truncation is due (`truncate`).
   */
  truncate?: TruncationStep;
}

const leaseName = (parentUid: string) => `history/${parentUid}`;
/** The record left on the parent's lease: its head is the memo, its revisions the parts (recordFrom). */
const recordOf = (lease: Lease | undefined) => recordFrom(lease?.memo as RecordHead | undefined, lease?.parts);

type ParentRead = { parent: KubeObject; skipped?: undefined } | { parent?: undefined; skipped: { outcome: 'skipped'; reason: string } };

async function readParent(deps: HistoryDeps, policy: RevisionPolicy, target: ResolvedResource, key: SyncKey): Promise<ParentRead> {
  let parent: KubeObject;
  try {
    parent = await targetReader(deps.kube, policy).get(target, { name: key.name, namespace: key.namespace });
  } catch (err) {
    if (isKubeError(err, 'NotFound'))
      return { skipped: { outcome: 'skipped', reason: 'the parent no longer exists (its revisions are garbage-collected with it)' } };
    throw err;
  }
  if (parent.metadata.uid !== key.uid)
    return { skipped: { outcome: 'skipped', reason: `the parent was replaced (uid ${parent.metadata.uid})` } };
  if (parent.metadata.deletionTimestamp) return { skipped: { outcome: 'skipped', reason: 'the parent is being deleted' } };
  return { parent };
}

// Given the kind's defaults, so that a newly defaulted field does not make the recorded digest miss.
const digestOf = (candidate: JsonObject, defaults: DefaultsSchema | undefined) => targetDigest(candidate, defaults);

/**
 * `observed` is the parent as its latest own event in the request showed it (SyncRequest.observed), if any: what
 * its sender says the state at that resourceVersion is. It may answer that there is nothing to do, never what to
 * write: whatever the sync writes is decided on the parent read from the apiserver
 * (docs/operations/security.md#events-are-triggers-not-state), unless `observedSigned`: the router verified the
 * cluster's forwarder signature on it, so it is the parent's state at that resourceVersion. `targetChanged`: the
 * router saw that event change the target state (SyncRequest.targetChanged), so the record, which the lease brings anyway, is not read first.
 */
// eslint-disable-next-line max-params -- one sync request's parts, in the order the handler, tests and bench pass them; nothing below takes more than four
export async function syncHistory(
  deps: HistoryDeps,
  policy: RevisionPolicy,
  key: SyncKey,
  causes: readonly string[],
  observed?: KubeObject,
  hints: { targetChanged?: boolean; observedSigned?: boolean } = {},
): Promise<SyncOutcome> {
  const target = await resolveTarget(deps.kube, policy);
  // The kind's defaulted fields go with the policy: the digest and every comparison below ignore them.
  policy = { ...policy, defaults: await targetDefaults(deps.kube, key.cluster, target) };
  const ctx: SyncContext = { deps, policy, target, key, causes };
  const seen = observed?.metadata.uid === key.uid && !observed.metadata.deletionTimestamp ? observed : undefined;
  // Fast path: the record, read without the lease, answers for a target state it holds.
  const early = await answerFromRecord(ctx, seen, hints);
  if (early.done) return early.done;
  // A parent gone or replaced takes no lease. An event's object is a trigger, not the parent's state, unless the
  // forwarder's signature on it verified: any other sender chooses what it says, so a sync that may write reads the parent.
  const first = early.ahead ?? (seen && hints.observedSigned ? { parent: seen } : await readParent(deps, policy, target, key));
  if (first.skipped) return first.skipped;
  // Under the parent's lease: read, decide, write and truncate; the record is left on the lease whatever happens.
  const lease = await acquireParentLease(deps, key);
  const progress: Progress = {
    digest: '',
    deleted: [],
    generated: { generatedVersion: (lease.memo as HistoryRecord | undefined)?.generatedVersion },
  };
  let outcome: SyncOutcome;
  let event: OutcomeEvent | undefined;
  try {
    outcome = await syncHeld(ctx, lease, first.parent, progress);
  } finally {
    event = await leaveRecord(ctx, lease, progress);
  }
  // After the lease is free: an event is news of what was done, not part of doing it.
  if (event?.record)
    await recordEvent(
      deps.kube,
      progress.recorded!,
      { type: 'Normal', ...event.spec, note: withWithheld(event.spec.note, event.withheld) },
      { controller: HISTORY_CONTROLLER, instance: deps.holder },
    );
  return outcome;
}

/** One sync's inputs, as its steps share them. */
interface SyncContext {
  deps: HistoryDeps;
  /** With the target kind's defaults. */
  policy: RevisionPolicy;
  target: ResolvedResource;
  key: SyncKey;
  causes: readonly string[];
}

/** What the sync under the lease got to: the record left on the lease is made from it, whatever happened. */
interface Progress {
  result?: LockedOutcome;
  digest: string;
  truncation?: string | undefined;
  /** The parent the sync decided on, once it completed. */
  recorded?: KubeObject;
  /** Revisions the truncation after the sync deleted. */
  deleted: string[];
  /** The generated objects' version as the last truncation listed them, for the next one (listGenerated). */
  generated: { generatedVersion?: string | undefined };
}

type OutcomeEvent = { spec: Omit<EventSpec, 'type'>; record: boolean; withheld: number };

/**
 * The record's answer, when it may give one: `done` when it answers (or the parent read ahead for it is gone);
 * otherwise the parent as read ahead, if it was.
 */
async function answerFromRecord(
  { deps, policy, target, key, causes }: SyncContext,
  seen: KubeObject | undefined,
  hints: { targetChanged?: boolean },
): Promise<{ done?: SyncOutcome; ahead?: ParentRead | undefined }> {
  const mayAnswer = policy.spec.mode === 'snapshot' && recordMayAnswer(causes, key.uid) && !(hints.targetChanged && seen);
  // The parent is read ahead only for the record's answer, and only when no event's object can stand in for it.
  const readFirst = mayAnswer && !seen && parentCauses(causes, key.uid);
  // A resync is there for what the record cannot see (revisions deleted or orphaned while nothing listened): it
  // answers only when the parent's revisions, listed now, are the record's (docs/controllers/history.md#history-resync).
  const listFirst = mayAnswer && resyncCauses(causes);
  // The record's revisions only for a resync, which compares them with the list.
  const readRecord = async () => {
    const lease = await deps.state.leases.get(key.cluster, leaseName(key.uid), { parts: listFirst });
    // A resync is answered only by revisions known: parts that do not add up (a release racing the read) answer nothing.
    const kept = (lease?.memo as RecordHead | undefined)?.revisionsKept !== undefined;
    const record = recordOf(lease);
    return listFirst && kept && !record?.revisions ? undefined : record;
  };
  const [ahead, record, listed] = await Promise.all([
    readFirst ? readParent(deps, policy, target, key) : undefined,
    mayAnswer ? readRecord() : undefined,
    listFirst
      ? deps.kube.listMetadata(Resources.controllerRevisions, { namespace: key.namespace, labelSelector: revisionSelector(target, key) })
      : undefined,
  ]);
  if (ahead?.skipped) return { done: ahead.skipped };
  if (record) {
    const known = ahead?.parent ?? seen;
    const state = known && {
      resourceVersion: known.metadata.resourceVersion,
      digest: digestOf(targetState(known as unknown as JsonObject, policy.spec.targetState), policy.defaults),
      truncation: truncationInputs(policy, known),
      current: ahead !== undefined,
    };
    if (recordAnswers(causes, key.uid, record, state, listed !== undefined && recordHoldsListed(record, listed.items, key.uid)))
      return { done: { outcome: 'cached', revision: record.revision, number: record.number } };
  }
  return { ahead };
}

/** The sync under the parent's lease; `known` is the parent as read before it. */
async function syncHeld(ctx: SyncContext, lease: Lease, known: KubeObject, progress: Progress): Promise<SyncOutcome> {
  const { deps, policy, target, key, causes } = ctx;
  const held = recordOf(lease);
  // Decide on the state as it is now, not as it was before another sync ran (which could otherwise make a
  // stale state look like a rollback): the read above when it is at least as new as the state the last holder
  // decided on (any later change brings its own event), else the parent read again under the lease.
  // The revisions come from the record, which came with the lease, when it holds them and every cause is one
  // it accounts for (docs/design/history-sync.md#the-history-record): as the last holder left them, every
  // other change to them bringing an event that takes the list. Otherwise they are listed meanwhile (the labels
  // need only the parent's name and kind), "not older than" what the record says earlier holders' writes left.
  const dk = defaultsKey(policy.defaults);
  const fromRecord = policy.spec.mode === 'snapshot' && recordListSuffices(causes, key.uid, held, dk);
  const list = () => listRevisions(deps.kube, key.namespace!, revisionSelector(target, key), held?.revisionsVersion);
  const [read, listed] = await Promise.all([
    observedSuffices(known.metadata.resourceVersion, held)
      ? Promise.resolve<ParentRead>({ parent: known })
      : readParent(deps, policy, target, key),
    fromRecord ? undefined : list(),
  ]);
  if (read.skipped) return read.skipped;
  const parent = read.parent;
  // A parent with no history record yet: is another controller keeping its history? (docs/controllers/history.md#coexistence)
  const foreign = lease.memo === undefined ? await foreignHistoryOf(deps.kube, policy, target, parent) : undefined;
  if (foreign)
    return {
      outcome: 'skipped',
      reason: `another controller keeps this parent's history (revision ${foreign}); the policy's check reports ForeignHistory unless spec.foreignHistory is Coexist`,
    };
  const candidate = targetState(parent as unknown as JsonObject, policy.spec.targetState);
  progress.digest = digestOf(candidate, policy.defaults);
  progress.truncation = truncationInputs(policy, parent);
  const guard = () => {
    if (!deps.state.leases.stillHeld(lease, LEASE_MARGIN_MS))
      throw new Error(`the history lease of ${key.namespace}/${key.name} is about to expire; not writing, the sync will be retried`);
  };
  const sync: HeldSync = { kube: deps.kube, policy, target, parent, candidate, guard };
  try {
    // Decide and write: from the record's revisions when they suffice, else from the list.
    progress.result =
      (fromRecord && held?.revisions ? await syncFromRecord(sync, progress.digest, held) : undefined) ??
      (await syncLocked(sync, listed ?? (await list())));
    // One Event for a change and the truncation it made due (docs/controllers/history.md#events): the truncation first, under the
    // lease, so that the record holds the revisions it left.
    progress.deleted = await truncateDue(deps.truncate, progress.result, parent, progress.generated);
  } catch (err) {
    // A failure a retry will not mend shows on the parent, as an in-tree controller's would.
    if (
      err instanceof RevisionNamesTakenError ||
      err instanceof CoexistSelectorError ||
      isKubeError(err, 'Forbidden') ||
      isKubeError(err, 'Invalid') ||
      isKubeError(err, 'BadRequest')
    ) {
      await recordEvent(
        deps.kube,
        parent,
        { type: 'Warning', reason: 'SyncFailed', action: 'Create', note: err.message },
        { controller: HISTORY_CONTROLLER, instance: deps.holder },
      );
    }
    throw err;
  }
  progress.recorded = parent;
  return progress.result.outcome;
}

/** Truncates when the sync made it due (and a step is injected): the names deleted. The result keeps the revisions left. */
async function truncateDue(
  truncate: TruncationStep | undefined,
  result: LockedOutcome,
  parent: KubeObject,
  generated: { generatedVersion?: string | undefined },
): Promise<string[]> {
  const due = 'truncate' in result.outcome && result.outcome.truncate;
  if (!due || !result.revisions || !truncate) return [];
  const truncated = await truncate(
    result.revisions,
    result.outcome.outcome === 'created' || result.outcome.outcome === 'rollback',
    generated,
    parent,
  );
  const removed = new Set([...truncated.deleted, ...truncated.gone]);
  result.revisions = result.revisions.filter((r) => !removed.has(r.metadata.name ?? ''));
  return truncated.deleted;
}

/** Releases the lease with the record of what the sync found, and says which Event, if any, is news of it. */
async function leaveRecord({ deps, policy }: SyncContext, lease: Lease, progress: Progress): Promise<OutcomeEvent | undefined> {
  const held = lease.memo as RecordHead | undefined;
  const { result, recorded } = progress;
  // Whether the parent's allowance of Events covers this one is decided before the record is left, so that
  // the record carries what is left of it.
  const spec = result && recorded ? outcomeEvent(result.outcome, progress.deleted) : undefined;
  const spent = spec ? spendEvent(held?.events, deps.now?.() ?? Date.now()) : undefined;
  // The record is a cache of what the sync found, left on the lease only while it is still held.
  const memo: HistoryRecord | undefined = result && {
    digest: progress.digest,
    revision: result.outcome.revision,
    number: result.outcome.number,
    revisionsVersion: result.revisionsVersion,
    revisionUid: result.revisionUid,
    truncation: progress.truncation,
    parentVersion: recorded?.metadata.resourceVersion,
    ...(progress.generated.generatedVersion ? { generatedVersion: progress.generated.generatedVersion } : {}),
    ...((spent?.next ?? held?.events) ? { events: spent?.next ?? held?.events } : {}),
    ...(result.revisions && recorded
      ? { revisions: recordRevisions(result.revisions, policy.defaults), defaults: defaultsKey(policy.defaults) }
      : {}),
  };
  const stored = memo && storedRecord(memo);
  await deps.state.leases.release(lease, stored?.head, stored?.parts);
  return spec && spent ? { spec, record: spent.record, withheld: spent.withheld } : undefined;
}

/** The label selector of the parent's revisions: it needs only the parent's name and kind. */
const revisionSelector = (target: ResolvedResource, key: SyncKey) =>
  labelSelectorString(parentLabels({ apiVersion: apiVersionOf(target), kind: target.kind, metadata: { name: key.name } }));

/** The parent's history lease; waits briefly while another sync holds it. */
async function acquireParentLease(deps: HistoryDeps, key: SyncKey): Promise<Lease> {
  // Holders finish in milliseconds (a sync or a truncation), so the wait polls briskly.
  const lease = await deps.state.leases.acquireWithin(key.cluster, leaseName(key.uid), deps.holder, LEASE_TTL_MS, LEASE_WAIT_MS, {
    keepSeconds: RECORD_KEEP_SECONDS,
    parts: true,
  });
  if (!lease)
    throw new Error(
      `another sync of ${key.kind} ${key.namespace}/${key.name} held its lease for over ${LEASE_WAIT_MS / 1000} s; retrying later`,
    );
  return lease;
}
/** The sync from the listed revisions: claimed (orphans adopted, strays released), then decided and written. */
async function syncLocked(sync: HeldSync, listed: KubeList<ControllerRevision>): Promise<LockedOutcome> {
  const { kube, policy, target, parent, candidate } = sync;
  const claimed = await claim(
    { kube, parentResource: target, parentReader: targetReader(kube, policy), childResource: Resources.controllerRevisions },
    parent,
    compileSelector({ matchLabels: parentLabels(parent) }),
    listed.items,
    { reference: revisionReference(policy) },
  );
  if (claimed.parentGone) throw new Error(`not syncing history: ${claimed.parentGone}`);
  const owned = claimed.owned as ControllerRevision[];
  const version = listed.metadata.resourceVersion;
  if (policy.spec.mode === 'revisionKey') return syncRevisionKey(sync, owned, version);
  return writeDecision(sync, owned, version, decide(candidate, owned, policy.defaults));
}

/**
 * The sync from the record's revisions, with no list: undefined when the record proves stale (the revision a
 * rollback reuses was changed or deleted meanwhile), and the sync then lists.
 */
async function syncFromRecord(sync: HeldSync, digest: string, held: HistoryRecord): Promise<LockedOutcome | undefined> {
  const owned = recordedRevisions(held.revisions ?? [], sync.parent);
  const outcome = decideByDigest(digest, owned);
  try {
    const result = await writeDecision(sync, owned, held.revisionsVersion, outcome);
    if (outcome.kind === 'create' && result.revisions)
      result.revisions = result.revisions.map((r) => (r.metadata.name === result.outcome.revision ? { ...r, digest } : r));
    return result;
  } catch (err) {
    if (outcome.kind === 'rollback' && (isKubeError(err, 'Conflict') || isKubeError(err, 'NotFound'))) return undefined;
    throw err;
  }
}
