import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Context } from 'aws-lambda';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { MetricsRecorder, publishCounts } from '../../shared/lambda/metrics.ts';
import { clusterBudget, eachCluster, throwIfAnyFailed } from '../../shared/lambda/per-cluster.ts';
import { storageContext } from '../storage/environment.ts';
import { pollReporter } from '../storage/poll.ts';

const logger = functionLogger('storage-poll');
const holder = `storage-poll-${randomUUID()}`;

/** In AWS each (cluster, reporter) has its own schedule target with this input; without one, every reporter polls. */
interface PollEvent {
  cluster?: string;
  reporter?: string;
}

export const handler = middy(async (event: PollEvent, context: Context) => {
  const env = environment();
  const clusters = (event.cluster ? [event.cluster] : env.clusters.ids()).filter(
    (id) => env.clusters.config(id).storage?.enabled !== false,
  );
  // The clusters at once, each on its own budget, its metrics written once its polls are done: one whose
  // apiserver never answers misses its own polls, no other's (docs/operations/operating.md#one-cluster-cannot-stall-another).
  const outcomes = await eachCluster(
    clusters,
    clusterBudget(context.getRemainingTimeInMillis()),
    async (cluster, deadline) => {
      const ctx = storageContext(env, cluster, holder, (level, m, f) => logger[level](m, { cluster, ...f }));
      ctx.kube = ctx.kube.within(deadline);
      const groups = env.clusters.config(cluster).storage?.groups;
      return Promise.all(
        env.clusters
          .reporters(cluster)
          .filter((r) => !event.reporter || r.id === event.reporter)
          .map((r) =>
            pollReporter(
              ctx,
              { ...r, client: r.client.within(deadline), ...(r.sample ? { sample: () => r.sample!().within(deadline) } : {}) },
              { groups },
            ),
          ),
      );
    },
    ({ cluster, value, error }) => {
      if (error) return logger.error('storage poll failed', { cluster, error: error.message });
      const metrics = new MetricsRecorder();
      for (const r of value) {
        logger.info('storage poll', { cluster, ...r });
        const stuck = r.leader?.overdue;
        // The stack's storage alarms watch these (docs/reference/metrics-and-alarms.md).
        if (stuck)
          publishCounts(cluster, { StorageStatesUnknownOverdue: stuck.unknown.length, StorageMigrationsOverdue: stuck.migrations.length });
        publishCounts(cluster, {
          StoragePollsMissed: Object.values(r.missedPolls).reduce((a, b) => a + b, 0),
          StorageStatesUndiscovered: r.undiscovered.length,
        });
        metrics.count(cluster, 'StoragePolls', 1, { reporter: r.reporter });
      }
      metrics.flush();
    },
  );
  throwIfAnyFailed('storage poll', outcomes);
  return outcomes.flatMap((o) => (o.value ?? []).map((r) => ({ cluster: o.cluster, ...r })));
}).use(injectLambdaContext(logger));
