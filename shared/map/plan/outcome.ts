// What follows a pass: nothing, a follow-up, a retry, or giving up until the next change.
import { RETRY_RECEIVES, ruleOf } from '../../metacontroller/problems.ts';
import type { Continuation } from './budget.ts';

export type PassOutcome =
  | { kind: 'done' }
  | { kind: 'continue'; continuation: Continuation }
  | { kind: 'retry'; afterSeconds: number | undefined; reason: string }
  | { kind: 'give-up'; reason: string };

/**
 * What follows a pass: nothing (done), a follow-up for the inputs it did not reach, a retry of its message (after
 * the hook's Retry-After, else the message's backoff), or, past RETRY_RECEIVES (shared/metacontroller/problems.ts, whose rules say which reasons retry), nothing more for now.
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
    pass.receiveCount >= RETRY_RECEIVES ? { kind: 'give-up', reason } : { kind: 'retry', afterSeconds, reason };
  if (pass.retryAfterSeconds !== undefined) return retry(pass.retryAfterSeconds);
  if (pass.deferred.length) return { kind: 'continue', continuation: { cursor: [...pass.deferred].sort()[0]!, problems, reason } };
  const retriable =
    pass.problems.some((p) => ruleOf(p.reason).retried) ||
    (pass.earlier !== undefined && pass.earlier.problems > 0 && ruleOf(pass.earlier.reason).retried);
  return retriable ? retry(undefined) : { kind: 'done' };
}
