// What a sync of a parent's history did, and the Event that is news of it.
import type { EventSpec } from '../../shared/events/index.ts';
import type { KnownRevision } from '../../shared/history/record.ts';

/** How history's Kubernetes Events name their reporter. */
export const HISTORY_CONTROLLER = 'outrigger.dev/history';

/** `truncate`: the parent owns more revisions than its limit could keep, so truncation may have work. */
export type SyncOutcome =
  | { outcome: 'skipped'; reason: string }
  | { outcome: 'cached' | 'unchanged' | 'created' | 'rollback'; revision: string; number: number; truncate?: true };

export type LockedOutcome = {
  outcome: Exclude<SyncOutcome, { outcome: 'skipped' | 'cached' }>;
  revisionsVersion: string | undefined;
  revisionUid: string | undefined;
  revisions?: KnownRevision[];
};

/** The Event a sync's outcome is news of, if any: one for a change and the truncation it made due (docs/controllers/history.md#events). */
export function outcomeEvent(outcome: SyncOutcome, deleted: readonly string[]): Omit<EventSpec, 'type'> | undefined {
  if (outcome.outcome !== 'created' && outcome.outcome !== 'rollback') return undefined;
  const also = deleted.length ? `; deleted ${deleted.length} revision(s) beyond the history limit: ${deleted.join(', ')}` : '';
  return outcome.outcome === 'created'
    ? { reason: 'RevisionCreated', action: 'Create', note: `Created revision ${outcome.number}: ${outcome.revision}${also}` }
    : {
        reason: 'RolledBack',
        action: 'Update',
        note: `Back to the target state of ${outcome.revision}, now revision ${outcome.number}${also}`,
      };
}
