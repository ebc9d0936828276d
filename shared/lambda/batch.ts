// The shape every queue-driven handler shares: an SQS batch in, a partial batch response out.
// - A malformed message goes to the dead-letter sink with the reason and counts as handled: retrying it
//   cannot help, and it must not hold up the messages behind it.
// - A processing failure is reported for that message only; SQS redelivers it, and after the queue's
//   maxReceiveCount moves it to the dead-letter queue. On a FIFO queue the rest of that message group waits
//   (order within an object is kept) while other groups, other objects and other clusters, go on.
import { SqsFifoPartialProcessorAsync, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { parseEnvelope, type Envelope } from '../envelope/index.ts';
import { MalformedMessageError } from '../validation.ts';
import type { Log } from '../log.ts';
import type { DeadLetterSink } from './dead-letter.ts';
import { askedDelay, NotYet, RetryLater, type Retry } from './retry.ts';
import { parseSyncRequest, type SyncRequest } from './sync-request.ts';

export interface BatchOptions<T> {
  /** Does the work for one message. Throw to have it retried. */
  process: (message: T, record: SQSRecord) => Promise<void>;
  deadLetter: () => DeadLetterSink;
  /** Names this consumer in dead letters. */
  source: string;
  log?: Log;
  /** Has failed records come back after a backoff (shared/lambda/retry.ts); without it, after the visibility timeout. */
  retry?: Retry | undefined;
}

/**
 * Parses a record, or sends it to the dead-letter sink with the reason when it can never be processed.
 * Returns undefined for a dead-lettered record.
 */
export async function parseOrDeadLetter<T>(
  record: SQSRecord,
  parse: (body: string) => T,
  opts: Omit<BatchOptions<T>, 'process'>,
): Promise<T | undefined> {
  try {
    return parse(record.body);
  } catch (err) {
    if (!(err instanceof MalformedMessageError)) throw err;
    opts.log?.('warn', 'malformed message sent to the dead-letter queue', { messageId: record.messageId, reason: err.message });
    await opts.deadLetter().send({ body: record.body, reason: err.message, source: opts.source, queue: record.eventSourceARN });
    return undefined;
  }
}

/** The records a partial batch response reports as failed. */
export function failedRecords(event: SQSEvent, response: SQSBatchResponse): SQSRecord[] {
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  return event.Records.filter((r) => failed.has(r.messageId));
}

function fifoBatchHandler<T>(parse: (body: string) => T, opts: BatchOptions<T>): (event: SQSEvent) => Promise<SQSBatchResponse> {
  return async (event: SQSEvent) => {
    // The delays messages asked for (RetryLater), by messageId, for the retry.
    const asked = new Map<string, number>();
    const recordHandler = async (record: SQSRecord): Promise<void> => {
      const message = await parseOrDeadLetter(record, parse, opts);
      if (message === undefined) return;
      try {
        await opts.process(message, record);
      } catch (err) {
        const delay = err instanceof RetryLater ? askedDelay(err.afterSeconds) : undefined;
        if (delay !== undefined) asked.set(record.messageId, delay);
        if (err instanceof NotYet)
          opts.log?.('info', 'not due yet; held back', { messageId: record.messageId, reason: err.message, retryAfterSeconds: delay });
        else
          opts.log?.(err instanceof RetryLater ? 'warn' : 'error', 'processing failed; it will be retried', {
            messageId: record.messageId,
            error: String(err),
            ...(delay === undefined ? {} : { retryAfterSeconds: delay }),
          });
        throw err;
      }
    };
    const response = await processPartialResponse(event, recordHandler, new SqsFifoPartialProcessorAsync(), {
      skipGroupOnError: true,
      throwOnFullBatchFailure: false,
    });
    await opts.retry?.(failedRecords(event, response), asked);
    return response;
  };
}

/** For consumers of watch events (the router). */
export function envelopeBatchHandler(opts: BatchOptions<Envelope>): (event: SQSEvent) => Promise<SQSBatchResponse> {
  return fifoBatchHandler(parseEnvelope, opts);
}

/** For controller handlers: one sync request, one Reconcile(key). */
export function syncBatchHandler(opts: BatchOptions<SyncRequest>): (event: SQSEvent) => Promise<SQSBatchResponse> {
  return fifoBatchHandler(parseSyncRequest, opts);
}
