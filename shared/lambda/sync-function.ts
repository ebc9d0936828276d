// The one shape of a controller handler (Reconcile(key)): middy, the function's logger in the Lambda context, an
// SQS batch of sync requests with partial failures and dead letters, and the process's environment. A handler
// module is then only what it does with one key.
import middy from '@middy/core';
import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Context, SQSEvent } from 'aws-lambda';
import { syncBatchHandler } from './batch.ts';
import { environment, type Environment } from './environment.ts';
import { functionLogger } from './logger.ts';
import { failureReason, MetricsRecorder } from './metrics.ts';
import { NotYet } from './retry.ts';
import type { SyncRequest } from './sync-request.ts';

export interface SyncTools {
  env: Environment;
  logger: Logger;
  /** The invocation's domain metrics, written when the batch is done. */
  metrics: MetricsRecorder;
  /** The invocation's Lambda context (remaining time). */
  context: Context;
  /** When the request was queued (SQS SentTimestamp, ms). */
  sentAt: number;
  /** How many times it has been received, this time included (SQS ApproximateReceiveCount). */
  receiveCount: number;
  /** How many records of the batch come after this one (they share what is left of the invocation). */
  later: number;
}

/**
 * The least of the invocation a record is started with, for functions that take a batch of 10 without a budget
 * of their own (history, truncate, storage): a record usually takes a second or two, and one cut off by the
 * timeout takes every record after it back to the queue, after the whole visibility timeout.
 */
export const RECORD_START_MIN_MS = 15_000;

/**
 * `environment` replaces the process's environment (tests run a handler against their own queues and table).
 * With `recordStartMinMs`, a record is started only while that much of the invocation is left; the others are
 * held back a second (not failed). Without it, `process` fits the invocation itself (the map pass's budget).
 */
export function syncFunction(
  name: string,
  process: (request: SyncRequest, tools: SyncTools) => Promise<void>,
  opts: { environment?: () => Environment; recordStartMinMs?: number } = {},
) {
  const logger = functionLogger(name);
  const env = opts.environment ?? (() => environment());
  return middy(async (event: SQSEvent, context: Context) => {
    const metrics = new MetricsRecorder();
    try {
      return await syncBatchHandler({
        source: name,
        deadLetter: () => env().deadLetter,
        log: (level, message, fields) => logger[level](message, fields ?? {}),
        retry: env().retry,
        process: async (request, record) => {
          // Held back, not failed: it comes back in a second, in a fresh invocation.
          if (opts.recordStartMinMs && context.getRemainingTimeInMillis() < opts.recordStartMinMs)
            throw new NotYet('too little of the invocation is left to start it', 1);
          try {
            await process(request, {
              env: env(),
              logger,
              metrics,
              context,
              sentAt: Number(record.attributes.SentTimestamp),
              receiveCount: Number(record.attributes.ApproximateReceiveCount) || 1,
              later: event.Records.length - 1 - event.Records.findIndex((r) => r.messageId === record.messageId),
            });
          } catch (err) {
            if (!(err instanceof NotYet))
              metrics.count(request.key.cluster, 'SyncsFailed', 1, { function: name, reason: failureReason(err) });
            throw err;
          }
        },
      })(event);
    } finally {
      metrics.flush();
    }
  }).use(injectLambdaContext(logger));
}

/**
 * syncFunction for a function without a time budget of its own (history, truncate, storage): a record of its batch
 * of 10 is started only while RECORD_START_MIN_MS of the invocation is left.
 */
export function fittedSyncFunction(name: string, process: (request: SyncRequest, tools: SyncTools) => Promise<void>) {
  return syncFunction(name, process, { recordStartMinMs: RECORD_START_MIN_MS });
}
