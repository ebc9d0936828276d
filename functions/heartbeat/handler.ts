import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { MetricsRecorder } from '../../shared/lambda/metrics.ts';
import { forwarderSilence, recordHeartbeat } from './heartbeat.ts';

const logger = functionLogger('heartbeat');

export const handler = middy(async () => {
  const env = environment();
  const results = await Promise.all(
    env.clusters.ids().map(async (id) => {
      const beat = await recordHeartbeat(id, env.clusters.client(id), env.state);
      const silentSeconds = beat.lastError ? undefined : await forwarderSilence(env.clusters.client(id)).catch(() => undefined);
      return { id, ...beat, silentSeconds };
    }),
  );
  // The stack's ClusterUnreachable and ForwarderSilent alarms watch these (docs/reference/metrics-and-alarms.md).
  const metrics = new MetricsRecorder();
  for (const r of results) {
    if (r.lastError) logger.warn('cluster unreachable', { cluster: r.id, error: r.lastError });
    else logger.debug('cluster reached', { cluster: r.id, gitVersion: r.gitVersion, forwarderSilentSeconds: r.silentSeconds });
    metrics.count(r.id, 'ClusterUnreachable', r.lastError ? 1 : 0);
    if (r.silentSeconds !== undefined) metrics.seconds(r.id, 'ForwarderSilentSeconds', r.silentSeconds);
  }
  metrics.flush();
  return { clusters: results.length, unreachable: results.filter((r) => r.lastError).length };
}).use(injectLambdaContext(logger));
