// What a pass's outcome asks of its request, the same for every kind (shared/metacontroller/problems.ts decides):
// a retry is its message failed with backoff, or after the hook's Retry-After; retries spent, a warning, and the
// message is consumed (docs/design/map-pass.md#per-parent-backoff).
import { RetryLater } from '../../shared/lambda/retry.ts';
import type { Log } from '../../shared/log.ts';
import type { RetryOutcome } from '../../shared/metacontroller/problems.ts';

export function followRetry(
  outcome: RetryOutcome | { kind: 'continue' },
  pass: { what: string; parent: string; receiveCount: number | undefined },
  log: Log,
): void {
  const { what, parent, receiveCount } = pass;
  if (outcome.kind === 'retry')
    throw new RetryLater(
      `${what} pass of ${parent} had problems (${outcome.reason || 'hook'}); retried ${outcome.afterSeconds === undefined ? 'with backoff' : `after ${outcome.afterSeconds} s, as the hook asked`}`,
      outcome.afterSeconds,
    );
  if (outcome.kind === 'give-up')
    log('warn', `${what} pass still failing after its retries; the next change or resync tries again`, {
      parent,
      reason: outcome.reason,
      receiveCount,
    });
}
