// The per-parent history record (README, "What a sync does": the history record) and what it answers without
// the lease. Pure: the history handler reads the record and, at most, the parent, and asks here whether a sync
// request needs anything more.
import { compareResourceVersions } from '../kube/resource.ts';
import { parseSyncCause } from '../lambda/sync-request.ts';

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
  /** The parent's resourceVersion the last sync decided on: an event's object at least as new can stand in for a read. */
  parentVersion?: string;
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
  return causes.length > 0 && causes.every((c) => {
    const { kind, uid } = parseSyncCause(c);
    return kind === 'ControllerRevision' || uid === parentUid;
  });
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
 *    does not answer: the parent is read.
 * The echoes of a sync's writes are then no second sync in the parent's message group, ahead of its next change.
 */
export function recordAnswers(causes: readonly string[], parentUid: string, record: HistoryRecord, parent?: ParentState): boolean {
  if (causes.length === 0) return false;
  const parentHolds = parent !== undefined && parent.digest === record.digest && parent.truncation === record.truncation && (parent.current || (compareResourceVersions(parent.resourceVersion, record.parentVersion) ?? -1) >= 0);
  return causes.every((c) => {
    const { kind, uid, resourceVersion, type } = parseSyncCause(c);
    if (kind === 'ControllerRevision') {
      if (type === 'deleted') return record.revisionUid !== undefined && uid !== record.revisionUid;
      return record.revisionsVersion !== undefined && resourceVersion === record.revisionsVersion;
    }
    if (uid !== parentUid || !parentHolds) return false;
    if (parent.current) return true;
    // An event's object stands for this event only if it is at least as new as it.
    return type !== 'deleted' && (compareResourceVersions(resourceVersion, parent.resourceVersion) ?? 1) <= 0;
  });
}

/** Whether an event's object may stand in for reading the parent under the lease: at least as new as what the last holder decided on. */
export function observedSuffices(observedVersion: string | undefined, record: Pick<HistoryRecord, 'parentVersion'> | undefined): boolean {
  return record !== undefined && (compareResourceVersions(observedVersion, record.parentVersion) ?? -1) >= 0;
}
