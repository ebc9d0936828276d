import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Context } from 'aws-lambda';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { MetricsRecorder } from '../../shared/lambda/metrics.ts';
import { clusterBudget, eachCluster, throwIfAnyFailed } from '../../shared/lambda/per-cluster.ts';
import { forwarderSilence, HEARTBEAT_REQUESTS_MS, recordHeartbeat } from './heartbeat.ts';

const logger = functionLogger('heartbeat');

export const handler = middy(async (_event: unknown, context: Context) => {
  const env = environment();
  // Each cluster on its own budget, its metrics written as soon as it is done: an apiserver that never answers
  // is reported unreachable, and delays no other cluster's figures (docs/operations/operating.md#one-cluster-cannot-stall-another).
  const outcomes = await eachCluster(
    env.clusters.ids(),
    clusterBudget(context.getRemainingTimeInMillis(), HEARTBEAT_REQUESTS_MS),
    async (id, deadline) => {
      const kube = env.clusters.client(id).within(deadline);
      const beat = await recordHeartbeat(id, kube, env.state);
      const silentSeconds = beat.lastError ? undefined : await forwarderSilence(kube).catch(() => undefined);
      return { ...beat, silentSeconds };
    },
    ({ cluster, value: r, error }) => {
      // The stack's ClusterUnreachable and ForwarderSilent alarms watch these (docs/reference/metrics-and-alarms.md).
      const metrics = new MetricsRecorder();
      const failure = error?.message ?? r?.lastError;
      if (failure) logger.warn('cluster unreachable', { cluster, error: failure });
      else logger.debug('cluster reached', { cluster, gitVersion: r?.gitVersion, forwarderSilentSeconds: r?.silentSeconds });
      metrics.count(cluster, 'ClusterUnreachable', failure ? 1 : 0);
      if (r?.silentSeconds !== undefined) metrics.seconds(cluster, 'ForwarderSilentSeconds', r.silentSeconds);
      metrics.flush();
    },
  );
  // A cluster whose heartbeat could not be recorded (DynamoDB failing, its work abandoned) fails the invocation
  // too, after every cluster's metrics are out: HeartbeatErrors.
  throwIfAnyFailed('heartbeat', outcomes);
  return { clusters: outcomes.length, unreachable: outcomes.filter((o) => o.error ?? o.value?.lastError).length };
}).use(injectLambdaContext(logger));
