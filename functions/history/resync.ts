// The history resync (docs/controllers/history.md#history-resync): on a schedule, every RevisionPolicy is checked again and
// every parent of each policy in effect is synced, without events. Events are triggers, and a trigger can be
// lost (a watch started after its kind's objects existed, a process that read the policies before the new one);
// the resync bounds how long a parent can go without a baseline revision to one period.
import type { SyncKey } from '../../shared/ownership/index.ts';

/** The causes a resync names start with this; the history handler then queues every parent of the policy. */
export const RESYNC_CAUSE = 'resync/history/';

/** The schedule's period (functions/index.ts). */
export const HISTORY_RESYNC_MINUTES = 15;

/**
 * The cause of a parent's sync queued by its policy (new spec or resync): in the form of the parent's own
 * event, so that a parent whose history record holds its target state costs one read (docs/design/history-sync.md#cost).
 */
export function parentCause(key: SyncKey): string {
  return `${key.kind}/${key.cluster}/${key.uid}/0/resync`;
}
