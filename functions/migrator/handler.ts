import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Context, SQSEvent } from 'aws-lambda';
import { syncBatchHandler } from '../../shared/lambda/batch.ts';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { runMigration } from '../storage/migrator.ts';

const logger = functionLogger('migrator');
const holder = `migrator-${randomUUID()}`;
/** Stop after the chunk that leaves less than this: the token is saved and the migration is queued again. */
const RESERVE_MS = 90_000;

export const handler = middy(async (event: SQSEvent, context: Context) =>
  syncBatchHandler({
    source: 'migrator',
    deadLetter: () => environment().deadLetter,
    log: (level, message, fields) => logger[level](message, fields ?? {}),
    process: async ({ key, causes }) => {
      const env = environment();
      const result = await runMigration(
        { cluster: key.cluster, kube: env.clusters.migratorClient(key.cluster), state: env.state, holder, now: () => new Date(), log: (m, f) => logger.info(m, f ?? {}) },
        key.name,
        { shouldPause: () => context.getRemainingTimeInMillis() < RESERVE_MS },
      );
      logger.info('migration step', { ...result });
      if (result.outcome === 'paused') await env.syncSink.send('migrator', [makeSyncRequest(key, causes)]);
    },
  })(event),
).use(injectLambdaContext(logger));
