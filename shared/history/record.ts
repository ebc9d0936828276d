// The per-parent history record (docs/design/history-sync.md#the-history-record) and what it answers without
// the lease. Pure: the history handler reads the record and, at most, the parent, and asks here whether a sync
// request needs anything more.
import { createHash } from 'node:crypto';
import { compareResourceVersions, type KubeObject } from '../kube/resource.ts';
import { parseSyncCause } from '../lambda/sync-request.ts';
import { controllerOf, newControllerRef } from '../ownership/controller-ref.ts';
import { type Json } from './data.ts';
import { canonicalJson } from '../json.ts';
import type { DefaultsSchema } from '../json.ts';
import type { EventAllowance } from '../events/allowance.ts';
import { HASH_LABEL, maxRevision, sortRevisions, type ControllerRevision, type Outcome } from './revisions.ts';

/**
 * What DynamoDB remembers per parent: the digest of the target state its latest revision holds. It is the
 * memo on the parent's history lease, so the holder gets it with the lease and leaves it at release.
 */
export interface HistoryRecord {
  digest: string;
  revision: string;
  number: number;
  /**
   * The resourceVersion of the parent's revisions as the last sync left them (its own write, or its list).
   * The next sync lists revisions "not older than" it, which the apiserver answers from its watch cache at
   * once; a plain (consistent) list waits until that cache has caught up with etcd's latest revision, which
   * after a write to another resource (the parent's update) takes up to a progress-notify round, ~50-100 ms.
   */
  revisionsVersion?: string;
  /** The latest revision's uid. */
  revisionUid?: string;
  /** truncationInputs of the parent as the sync read it: when they change, truncation may have work. */
  truncation?: string;
  /**
   * The parent's resourceVersion the last sync decided on: a read made before the lease at least as new stands in
   * for reading under it, and an event's object at least as new may answer that there is no work.
   */
  parentVersion?: string | undefined;
  /** The parent's revisions as the last sync left them (truncation's deletes removed), when few enough. */
  revisions?: RecordedRevision[] | undefined;
  /** defaultsKey of the defaults the digests were made with. */
  defaults?: string | undefined;
  /** The resourceVersion the last truncation's list of the generated objects answered at. */
  generatedVersion?: string | undefined;
  /** What is left of the parent's allowance of routine Events (docs/controllers/history.md#events). */
  events?: EventAllowance | undefined;
}

/**
 * The type of the cause of a parent's sync queued by its policy (a new spec, a history resync): never answered by
 * the record alone, since what it is there to heal is what the record cannot see (docs/controllers/history.md#history-resync).
 */
export const RESYNC_TYPE = 'resync';

const isResync = (cause: string) => parseSyncCause(cause).type === RESYNC_TYPE;

/** Whether a resync is among the causes: the record answers for it only once the parent's revisions, listed, are the ones it holds. */
export function resyncCauses(causes: readonly string[]): boolean {
  return causes.some(isResync);
}

/**
 * Whether the revisions listed now by the parent's labels are the ones the record holds: its latest is among them,
 * none is an orphan (a sync would adopt it), and when the record keeps its revisions, the parent's are exactly
 * those. Another controller's revisions are no part of the parent's history.
 */
export function recordHoldsListed(record: HistoryRecord, listed: readonly Pick<KubeObject, 'metadata'>[], parentUid: string): boolean {
  if (listed.some((r) => controllerOf(r) === undefined)) return false;
  const ours = listed.filter((r) => controllerOf(r)?.uid === parentUid).map((r) => r.metadata.uid ?? '');
  if (record.revisionUid === undefined || !ours.includes(record.revisionUid)) return false;
  if (!record.revisions) return true;
  const held = new Set(record.revisions.map((r) => r.uid));
  return ours.length === held.size && ours.every((uid) => held.has(uid));
}

/** The parent's state as the handler has it: read now, or an event's object (at its resourceVersion). */
export interface ParentState {
  resourceVersion: string | undefined;
  /** The digest of its target state (with the kind's defaults). */
  digest: string;
  /** Its truncationInputs. */
  truncation: string;
  /** Read from the apiserver by this sync: the current state, whatever the record says. */
  current: boolean;
}

/**
 * Whether the history record may answer for these causes (so it is worth reading): events of the parent itself
 * and of its revisions. An event of a generated object (a pod deleted) always takes the full sync.
 */
export function recordMayAnswer(causes: readonly string[], parentUid: string): boolean {
  return (
    causes.length > 0 &&
    causes.every((c) => {
      const { kind, uid } = parseSyncCause(c);
      return kind === 'ControllerRevision' || uid === parentUid;
    })
  );
}

/**
 * Whether the parent causes need the parent's state to be answered: a request of revision events only (the
 * echoes of a sync's own writes, truncation's deletes) is answered by the record alone, since any change of the
 * parent brings an event, and so a sync request, of its own.
 */
export function parentCauses(causes: readonly string[], parentUid: string): boolean {
  return causes.some((c) => {
    const { kind, uid } = parseSyncCause(c);
    return kind !== 'ControllerRevision' && uid === parentUid;
  });
}

/**
 * Whether the record answers for every cause, so that the sync takes no lease and makes no write:
 *  - a revision event: the echo of the record's own write (a revision event at the resourceVersion it left),
 *    or the deletion of a revision other than the latest (truncation's), which changes no decision;
 *  - the parent's own event (not its deletion): the parent's state holds the recorded target state and
 *    truncation inputs, and is the state at or after every such event: read now, or an event's object at
 *    least as new as the state the record was made from (the state at that resourceVersion; any later change
 *    brings its own event). An event's object older than the record, or of a form whose order is unknown,
 *    does not answer: the parent is read;
 *  - a resync (RESYNC_TYPE): as the parent's own event, read now, and only when `revisionsHeld`: the parent's
 *    revisions, listed now, are the ones the record holds (recordHoldsListed).
 * The echoes of a sync's writes are then no second sync in the parent's message group, ahead of its next change.
 */
export function recordAnswers(
  causes: readonly string[],
  parentUid: string,
  record: HistoryRecord,
  parent?: ParentState,
  revisionsHeld = false,
): boolean {
  if (causes.length === 0) return false;
  const parentHolds =
    parent !== undefined &&
    parent.digest === record.digest &&
    parent.truncation === record.truncation &&
    (parent.current || (compareResourceVersions(parent.resourceVersion, record.parentVersion) ?? -1) >= 0);
  return causes.every((c) => {
    const { kind, uid, resourceVersion, type } = parseSyncCause(c);
    if (kind === 'ControllerRevision') {
      if (type === 'deleted') return record.revisionUid !== undefined && uid !== record.revisionUid;
      return record.revisionsVersion !== undefined && resourceVersion === record.revisionsVersion;
    }
    if (uid !== parentUid || !parentHolds) return false;
    if (type === RESYNC_TYPE) return parent.current && revisionsHeld;
    if (parent.current) return true;
    // An event's object stands for this event only if it is at least as new as it.
    return type !== 'deleted' && (compareResourceVersions(resourceVersion, parent.resourceVersion) ?? 1) <= 0;
  });
}

/**
 * Whether the parent as read before the lease may stand in for reading it under the lease: at least as new as
 * what the last holder decided on. Never asked of an event's object: its sender chooses its resourceVersion.
 */
export function observedSuffices(observedVersion: string | undefined, record: Pick<HistoryRecord, 'parentVersion'> | undefined): boolean {
  return record !== undefined && (compareResourceVersions(observedVersion, record.parentVersion) ?? -1) >= 0;
}

/** A revision as the record keeps it: enough to decide and truncate without listing, given one set of defaults. */
export interface RecordedRevision {
  name: string;
  uid: string;
  resourceVersion: string;
  number: number;
  /** Its hash label (what generated objects may name it by). */
  hash?: string | undefined;
  created?: string | undefined;
  /** targetDigest of its data. */
  digest: string;
}

/** A revision the sync knows the digest of (from its data, or from the record). */
export type KnownRevision = ControllerRevision & { digest?: string };

/** More than this many revisions are not kept in the record (an item stays far below DynamoDB's 400 KB): the next sync lists. */
export const MAX_RECORDED_REVISIONS = 100;

/**
 * Which equality digests are made under. Digests of another (those records left before `{}` became a value,
 * docs/design/history-sync.md#equivalence-is-semantic) never equal these: such a record answers nothing, and the
 * parent's next sync lists and decides on the revisions' data, once.
 */
const EQUALITY = 'null-is-absent';

/** The digest of a target state (or of a revision's data), given the kind's defaults: equal digests, semantically equal. */
export function targetDigest(state: Json | undefined, defaults: DefaultsSchema | undefined): string {
  return createHash('sha256').update(`${EQUALITY}\n`).update(canonicalJson(state, defaults)).digest('hex');
}

/** Which defaults (and equality) the record's digests were made with: digests made with others do not compare. */
export function defaultsKey(defaults: DefaultsSchema | undefined): string {
  return createHash('sha256')
    .update(`${EQUALITY}\n`)
    .update(JSON.stringify(defaults ?? null))
    .digest('hex');
}

/**
 * The record as DynamoDB keeps it (docs/design/history-sync.md#the-history-record): this head is the memo on the
 * parent's lease item, and each recorded revision a part of its own, by uid, written only when it changes: a
 * sync's lease writes are billed at the head's size, and a new revision adds one part, whatever the history's
 * length. `revisionsKept`: how many revisions the parts hold (absent when the record keeps none).
 */
export type RecordHead = Omit<HistoryRecord, 'revisions'> & { revisionsKept?: number };

/** The record split as it is stored: its head, and its revisions as parts by uid (none when it keeps none). */
export function storedRecord(record: HistoryRecord): { head: RecordHead; parts: Record<string, RecordedRevision> } {
  const { revisions, ...head } = record;
  return {
    head: revisions ? { ...head, revisionsKept: revisions.length } : head,
    parts: Object.fromEntries((revisions ?? []).map((r) => [r.uid, r])),
  };
}

/**
 * The record from its stored head and parts. Its revisions only when the parts are those the head was left
 * with (`parts` undefined: they do not add up), in the order of their numbers. A head left before the record was
 * split keeps its revisions inside: those are not read, and the next sync lists once.
 */
export function recordFrom(head: RecordHead | undefined, parts: Record<string, unknown> | undefined): HistoryRecord | undefined {
  if (!head) return undefined;
  const { revisionsKept, revisions: _inside, ...rest } = head as RecordHead & { revisions?: unknown };
  const revisions = parts && (Object.values(parts) as RecordedRevision[]).sort((a, b) => a.number - b.number);
  return revisionsKept !== undefined && revisions?.length === revisionsKept ? { ...rest, revisions } : rest;
}

/** The revisions as the record keeps them, or undefined when there are too many to keep. */
export function recordRevisions(revisions: readonly KnownRevision[], defaults: DefaultsSchema | undefined): RecordedRevision[] | undefined {
  if (revisions.length > MAX_RECORDED_REVISIONS) return undefined;
  return revisions.map((r) => ({
    name: r.metadata.name ?? '',
    uid: r.metadata.uid ?? '',
    resourceVersion: r.metadata.resourceVersion ?? '',
    number: r.revision,
    hash: r.metadata.labels?.[HASH_LABEL],
    created: r.metadata.creationTimestamp ?? undefined,
    digest: r.digest ?? targetDigest(r.data, defaults),
  }));
}

/** The record's revisions as ControllerRevisions without data, each controlled by the parent (only those are recorded). */
export function recordedRevisions(recorded: readonly RecordedRevision[], parent: KubeObject): KnownRevision[] {
  const ref = newControllerRef(parent);
  return recorded.map((r) => ({
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: {
      name: r.name,
      namespace: parent.metadata.namespace,
      uid: r.uid,
      resourceVersion: r.resourceVersion,
      ...(r.created ? { creationTimestamp: r.created } : {}),
      labels: r.hash ? { [HASH_LABEL]: r.hash } : ({} as Record<string, string>),
      ownerReferences: [ref],
    },
    revision: r.number,
    digest: r.digest,
  }));
}

/**
 * Whether the record's revisions may stand in for listing them: they were recorded with these defaults, and every
 * cause is the parent's own event (not a resync: it lists) or a revision event the record accounts for (the echo of its write, or the
 * deletion of a revision it no longer holds or that is not the latest). A generated object's event, an orphan's
 * or a revision changed by someone else takes the list (and the claim).
 */
export function recordListSuffices(
  causes: readonly string[],
  parentUid: string,
  record: HistoryRecord | undefined,
  defaults: string,
): boolean {
  if (!record?.revisions || record.defaults !== defaults) return false;
  const held = new Set(record.revisions.map((r) => r.uid));
  return (
    causes.length > 0 &&
    causes.every((c) => {
      const { kind, uid, resourceVersion, type } = parseSyncCause(c);
      if (kind !== 'ControllerRevision') return uid === parentUid && type !== RESYNC_TYPE;
      if (type === 'deleted') return uid !== record.revisionUid || !held.has(uid ?? '');
      return record.revisionsVersion !== undefined && resourceVersion === record.revisionsVersion;
    })
  );
}

/** Seed 000's decision (decide) by digests: equal digests are semantically equal data, given one set of defaults. */
export function decideByDigest<T extends KnownRevision>(digest: string, owned: readonly T[]): Outcome<T> {
  const sorted = sortRevisions(owned);
  const latest = sorted[sorted.length - 1];
  const next = maxRevision(sorted) + 1;
  if (latest && latest.digest === digest) return { kind: 'unchanged', revision: latest };
  for (let i = sorted.length - 2; i >= 0; i -= 1) {
    if (sorted[i]!.digest === digest) return { kind: 'rollback', revision: sorted[i]!, number: next };
  }
  return { kind: 'create', number: next };
}
