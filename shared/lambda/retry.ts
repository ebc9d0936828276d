// A failed message comes back as a controller's workqueue item does, after a delay that doubles with each failure
// (client-go's ItemExponentialFailureRateLimiter,
// https://pkg.go.dev/k8s.io/client-go/util/workqueue#NewItemExponentialFailureRateLimiter), not after its queue's
// whole visibility timeout. SQS counts the failures (the record's ApproximateReceiveCount); ChangeMessageVisibility
// on the failed message says when it is seen again. After the queue's maxReceiveCount it moves to the dead-letter
// queue as before.
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { Log } from '../log.ts';
import type { QueueUrls } from './queues.ts';
import { sqsClient } from './sqs.ts';

export const RETRY_BASE_SECONDS = 2;
export const RETRY_MAX_SECONDS = 600;

/** The delay before a message received `receiveCount` times comes back, in the unit of `base` and `max`: 2 s, 4 s, 8 s, ... at most 10 minutes. */
export function retryDelay(receiveCount: number, base = RETRY_BASE_SECONDS, max = RETRY_MAX_SECONDS): number {
  const failures = Number.isInteger(receiveCount) && receiveCount > 0 ? receiveCount : 1;
  return Math.min(base * 2 ** Math.min(failures - 1, 30), max);
}

/**
 * Thrown by a handler to have its message come back later: after `afterSeconds` when the work said when (a hook's
 * Retry-After), else after the message's backoff.
 */
export class RetryLater extends Error {
  readonly afterSeconds: number | undefined;
  constructor(message: string, afterSeconds?: number) {
    super(message);
    this.name = 'RetryLater';
    this.afterSeconds = afterSeconds;
  }
}

/**
 * Thrown for a message that is not due yet (a MapController's wake-up timer): held back `afterSeconds` as a
 * RetryLater is, but a wait, not a failure (logged as such, and counted in no failure metric).
 */
export class NotYet extends RetryLater {
  constructor(message: string, afterSeconds: number) {
    super(message, afterSeconds);
    this.name = 'NotYet';
  }
}

/** The delay a failed message asked for, bounded: at least 1 s, at most RETRY_MAX_SECONDS; undefined for none. */
export function askedDelay(afterSeconds: number | undefined): number | undefined {
  if (afterSeconds === undefined || !Number.isFinite(afterSeconds)) return undefined;
  return Math.min(Math.max(Math.ceil(afterSeconds), 1), RETRY_MAX_SECONDS);
}

/**
 * Has the failed records come back after their backoff; `asked` holds, by messageId, the delays (seconds) some
 * asked for (RetryLater), which replace their backoff.
 */
export type Retry = (records: readonly SQSRecord[], asked?: ReadonlyMap<string, number>) => Promise<void>;

/**
 * Backoff on the deployment's queues. A record whose visibility cannot be changed (its receipt expired, the call
 * failed) is only logged: it comes back after the queue's visibility timeout, as it would without backoff.
 */
export function sqsRetry(queues: QueueUrls, client?: SQSClient, log?: Log): Retry {
  return async (records, asked) => {
    if (records.length === 0) return;
    const { ChangeMessageVisibilityCommand } = await import('@aws-sdk/client-sqs');
    const sqs = client ?? (await sqsClient());
    await Promise.all(
      records.map(async (r) => {
        const seconds = asked?.get(r.messageId) ?? retryDelay(Number(r.attributes.ApproximateReceiveCount));
        try {
          await sqs.send(
            new ChangeMessageVisibilityCommand({
              QueueUrl: queues.urlOf(r.eventSourceARN),
              ReceiptHandle: r.receiptHandle,
              VisibilityTimeout: seconds,
            }),
          );
        } catch (err) {
          log?.('warn', "the backoff of a failed message could not be set; it comes back after its queue's visibility timeout", {
            messageId: r.messageId,
            error: String(err),
          });
        }
      }),
    );
  };
}
