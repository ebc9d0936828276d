// The history resync (docs/controllers/history.md#history-resync): on a schedule, every RevisionPolicy is checked again and
// every parent of each policy in effect is synced, without events. Events are triggers, and a trigger can be
// lost (a watch started after its kind's objects existed, a process that read the policies before the new one);
// the resync bounds how long a parent can go without a baseline revision to one period.
import { createHash } from 'node:crypto';
import { RESYNC_TYPE } from '../../shared/history/record.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';

/** The causes a resync names start with this; the history handler then queues every parent of the policy. */
export const RESYNC_CAUSE = 'resync/history/';

/** The schedule's period (functions/index.ts). */
export const HISTORY_RESYNC_MINUTES = 15;

/**
 * The cause of a parent's sync queued by its policy (new spec or resync): in the form of the parent's own
 * event, typed RESYNC_TYPE, so that the record answers for it only when the parent's revisions, listed, are the
 * ones it holds: a parent whose history record holds its target state costs a read and a list
 * (docs/design/history-sync.md#cost).
 */
export function parentCause(key: SyncKey, policyCauses: readonly string[]): string {
  // Stamped with the policy's own causes: each resync and each new spec is a cause of its own, which SQS does not
  // drop as a copy of the last one (its deduplication window is 5 minutes; syncDeduplicationId).
  const stamp = createHash('sha256').update(policyCauses.join(',')).digest('hex').slice(0, 16);
  return `${key.kind}/${key.cluster}/${key.uid}/0/${RESYNC_TYPE}/${stamp}`;
}
