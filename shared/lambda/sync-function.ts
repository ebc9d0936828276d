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
import type { SyncRequest } from './sync-request.ts';

export interface SyncTools {
  env: Environment;
  logger: Logger;
  /** The invocation's Lambda context (remaining time). */
  context: Context;
  /** When the request was queued (SQS SentTimestamp, ms). */
  sentAt: number;
}

export function syncFunction(name: string, process: (request: SyncRequest, tools: SyncTools) => Promise<void>) {
  const logger = functionLogger(name);
  return middy(async (event: SQSEvent, context: Context) =>
    syncBatchHandler({
      source: name,
      deadLetter: () => environment().deadLetter,
      log: (level, message, fields) => logger[level](message, fields ?? {}),
      retry: environment().retry,
      process: (request, record) => process(request, { env: environment(), logger, context, sentAt: Number(record.attributes.SentTimestamp) }),
    })(event),
  ).use(injectLambdaContext(logger));
}
