import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { MetricsRecorder, publishCounts } from '../../shared/lambda/metrics.ts';
import { storageContext } from '../storage/environment.ts';
import { pollReporter } from '../storage/poll.ts';

const logger = functionLogger('storage-poll');
const holder = `storage-poll-${randomUUID()}`;

/** In AWS each (cluster, reporter) has its own schedule target with this input; without one, every reporter polls. */
interface PollEvent {
  cluster?: string;
  reporter?: string;
}

export const handler = middy(async (event: PollEvent) => {
  const env = environment();
  const clusters = (event.cluster ? [event.cluster] : env.clusters.ids()).filter(
    (id) => env.clusters.config(id).storage?.enabled !== false,
  );
  const results = await Promise.all(
    clusters.flatMap((cluster) => {
      const ctx = storageContext(env, cluster, holder, (level, m, f) => logger[level](m, { cluster, ...f }));
      const groups = env.clusters.config(cluster).storage?.groups;
      return env.clusters
        .reporters(cluster)
        .filter((r) => !event.reporter || r.id === event.reporter)
        .map(async (r) => ({ cluster, ...(await pollReporter(ctx, r, { groups })) }));
    }),
  );
  const metrics = new MetricsRecorder();
  for (const r of results) {
    logger.info('storage poll', { ...r });
    const stuck = r.leader?.overdue;
    // The stack's storage alarms watch these (docs/reference/metrics-and-alarms.md).
    if (stuck)
      publishCounts(r.cluster, { StorageStatesUnknownOverdue: stuck.unknown.length, StorageMigrationsOverdue: stuck.migrations.length });
    publishCounts(r.cluster, { StoragePollsMissed: Object.values(r.missedPolls).reduce((a, b) => a + b, 0) });
    metrics.count(r.cluster, 'StoragePolls', 1, { reporter: r.reporter });
  }
  metrics.flush();
  return results;
}).use(injectLambdaContext(logger));
