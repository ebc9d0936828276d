// What a sync of a parent's history did, and the Event that is news of it.
import type { EventSpec } from '../../shared/events/index.ts';
import type { KnownRevision } from '../../shared/history/record.ts';
import type { JsonObject } from '../../shared/history/data.ts';
import type { RevisionPolicy } from '../../shared/history/policy.ts';
import type { KubeApi, KubeObject, ResolvedResource } from '../../shared/kube/index.ts';

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

/**
 * One sync under the parent's history lease, as each step below the lease takes it: the parent as the sync
 * decided on it, its target state, and the guard each write calls first.
 */
export interface HeldSync {
  kube: KubeApi;
  /** With the target kind's defaults. */
  policy: RevisionPolicy;
  target: ResolvedResource;
  parent: KubeObject;
  /** The parent's target state: what a new revision holds. */
  candidate: JsonObject;
  /** Throws when the lease is about to expire: called before each write. */
  guard: () => void;
}

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
