import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { SQSEvent } from 'aws-lambda';
import { forwarderKey } from '../../shared/envelope/signature.ts';
import { environment } from '../../shared/lambda/environment.ts';
import { failedRecords } from '../../shared/lambda/batch.ts';
import { EVENTS_QUEUE } from '../../shared/lambda/queues.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { MetricsRecorder } from '../../shared/lambda/metrics.ts';
import { controllerSources, type ControllerSource } from '../controllers.ts';
import { routeBatch } from './route.ts';

const logger = functionLogger('router');

export function createRouterHandler(sources: readonly ControllerSource[]) {
  // Per process, across batches (RouterDeps.reloads).
  const reloads = new Map<string, number>();
  return middy(async (event: SQSEvent) => {
    const env = environment();
    const queues = env.queues;
    if (!queues) throw new Error('the router has no queues to tell which cluster an event came from (OUTRIGGER_QUEUE_URL_PREFIX)');
    const { batchItemFailures, stats } = await routeBatch(event, {
      clusters: env.clusters,
      queueCluster: (arn) => queues.clusterOf(arn, EVENTS_QUEUE),
      sources,
      sink: env.syncSink,
      deadLetter: () => env.deadLetter,
      log: (level, message, fields) => logger[level](message, fields ?? {}),
      reloads,
      ...(env.signingSecret ? { forwarderKeys: forwarderKeysFrom(env.signingSecret) } : {}),
    });
    logger.debug('routed', { ...stats });
    // One queue per cluster: the batch's cluster is its queue's (docs/operations/security.md#who-can-make-outrigger-do-what).
    const cluster = event.Records[0] && queues.clusterOf(event.Records[0].eventSourceARN, EVENTS_QUEUE);
    if (cluster) {
      const metrics = new MetricsRecorder();
      metrics.count(cluster, 'EventsReceived', stats.records);
      metrics.count(cluster, 'EventsDeadLettered', stats.deadLettered);
      metrics.count(cluster, 'EventsRetried', stats.failed);
      metrics.count(cluster, 'SyncRequestsSent', stats.keys);
      metrics.count(cluster, 'RoutesRefused', stats.refused);
      metrics.flush();
    }
    await env.retry?.(failedRecords(event, { batchItemFailures }));
    return { batchItemFailures };
  }).use(injectLambdaContext(logger));
}

/** Each cluster's forwarder key, derived from the deployment's secret (read again as it rotates). */
function forwarderKeysFrom(secret: () => Promise<string>): (cluster: string) => Promise<readonly string[]> {
  return async (cluster) => [forwarderKey(await secret(), cluster)];
}

export const handler = createRouterHandler(controllerSources);
