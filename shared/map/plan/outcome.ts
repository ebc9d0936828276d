// What follows a pass: nothing, a follow-up, a retry, or giving up until the next change.
import type { Continuation } from './budget.ts';

/** Reasons a retry cannot cure (the parent's or the MapController's spec must change, which queues a sync anyway). */
const NOT_RETRIED = new Set(['InvalidSelector', 'HookRefused']);

/**
 * A failing parent is retried with backoff this many receives at most; then its message is consumed and the next
 * change or resync tries again, so a tenant's broken hook never fills a dead-letter queue (infra's
 * MAX_RECEIVE_COUNT is higher).
 */
export const MAP_RETRY_RECEIVES = 10;

export type PassOutcome =
  | { kind: 'done' }
  | { kind: 'continue'; continuation: Continuation }
  | { kind: 'retry'; afterSeconds: number | undefined; reason: string }
  | { kind: 'give-up'; reason: string };

/**
 * What follows a pass: nothing (done), a follow-up for the inputs it did not reach, a retry of its message (after
 * the hook's Retry-After, else the message's backoff), or, past MAP_RETRY_RECEIVES, nothing more for now.
 * A hook that asked to be called later is not called again before then: the retry, not a follow-up, continues.
 */
export function passOutcome(pass: {
  deferred: readonly string[];
  problems: ReadonlyArray<{ reason: string }>;
  retryAfterSeconds: number | undefined;
  earlier: Continuation | undefined;
  receiveCount: number;
}): PassOutcome {
  const problems = (pass.earlier?.problems ?? 0) + pass.problems.length;
  const reason = pass.earlier?.problems ? pass.earlier.reason : (pass.problems[0]?.reason ?? '');
  const retry = (afterSeconds: number | undefined): PassOutcome =>
    pass.receiveCount >= MAP_RETRY_RECEIVES ? { kind: 'give-up', reason } : { kind: 'retry', afterSeconds, reason };
  if (pass.retryAfterSeconds !== undefined) return retry(pass.retryAfterSeconds);
  if (pass.deferred.length) return { kind: 'continue', continuation: { cursor: [...pass.deferred].sort()[0]!, problems, reason } };
  const retriable =
    pass.problems.some((p) => !NOT_RETRIED.has(p.reason)) ||
    (pass.earlier !== undefined && pass.earlier.problems > 0 && !NOT_RETRIED.has(pass.earlier.reason));
  return retriable ? retry(undefined) : { kind: 'done' };
}
