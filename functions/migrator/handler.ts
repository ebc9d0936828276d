import { randomUUID } from 'node:crypto';
import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { runMigration } from '../storage/migrator.ts';

const holder = `migrator-${randomUUID()}`;
/** Stop after the chunk that leaves less than this: the progress is saved and the migration is queued again. */
const RESERVE_MS = 90_000;

export const handler = syncFunction('migrator', async ({ key, causes }, { env, logger, metrics, context }) => {
  const result = await runMigration(
    {
      cluster: key.cluster,
      kube: env.clusters.migratorClient(key.cluster),
      state: env.state,
      holder,
      now: () => new Date(),
      log: (level, m, f) => logger[level](m, f ?? {}),
    },
    key.name,
    { shouldPause: () => context.getRemainingTimeInMillis() < RESERVE_MS },
  );
  // `message` is the log line's own key in Powertools: the migration's message is logged as `detail`.
  const { message, ...rest } = result;
  // A migration carrying the label that the leader never recorded: someone made it who may create migrations,
  // which is not leave to rewrite a resource as the migrator (docs/operations/security.md#the-migrator).
  if (result.outcome === 'not-recorded') logger.warn('migration refused', { ...rest, detail: message });
  else logger.info('migration step', { ...rest, detail: message });
  if (result.rewritten) metrics.count(key.cluster, 'ObjectsMigrated', result.rewritten);
  // A cause of its own (the chunks done so far): with the causes it was sent with, the request would carry the
  // same deduplication id, and SQS would drop it within five minutes of the first.
  if (result.outcome === 'paused')
    await env.syncSink.send('migrator', [
      makeSyncRequest(key, [`StorageVersionMigration/continue/${result.progress?.chunks ?? 0}`, ...causes]),
    ]);
});
