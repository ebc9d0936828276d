import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Context } from 'aws-lambda';
import { metacontrollerOn } from '../../shared/clusters.ts';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { clusterBudget, eachCluster, throwIfAnyFailed } from '../../shared/lambda/per-cluster.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { RESYNC_CAUSE } from '../../shared/map/api.ts';
import { resyncDue } from '../../shared/metacontroller/timers.ts';
import { queueCompositeResyncs } from '../composite/resync.ts';
import { actingAs, listMapControllers, MAP_TARGET, mapControllerCache, writeReadiness } from '../map/controllers.ts';

const logger = functionLogger('map-resync');
/** The schedule's period (functions/index.ts): each tick queues the parents whose resync falls in it. */
export const RESYNC_TICK_MS = 60_000;

/**
 * Resyncs without events (resyncPeriodSeconds; docs/design/map-pass.md#resync): a one-minute schedule, rather than a delayed
 * message per parent: sync queues are FIFO, which take no per-message delay, and a schedule costs one list
 * per parent kind per minute whatever the number of parents, with nothing stored per parent.
 */
export const handler = middy(async (event: { cluster?: string }, context: Context) => {
  const env = environment();
  const now = new Date();
  // The clusters at once, each on its own budget: one that never answers loses its own resyncs, no other's
  // (docs/operations/operating.md#one-cluster-cannot-stall-another).
  const outcomes = await eachCluster(
    // A cluster that serves none (metacontroller.enabled: false) has no map queue to send to.
    (event.cluster ? [event.cluster] : env.clusters.ids()).filter((id) => metacontrollerOn(env.clusters.config(id))),
    clusterBudget(context.getRemainingTimeInMillis()),
    async (cluster, deadline) => {
      const kube = env.clusters.client(cluster).within(deadline);
      const set = await listMapControllers(kube, cluster, mapControllerCache, env.clusters.config(cluster).controllerSelector);
      // A ServiceAccount or a grant that came or went changes no MapController: each tick reports it.
      await writeReadiness(kube, set, now);
      let queued = 0;
      for (const mc of set.valid) {
        const period = mc.spec.resyncPeriodSeconds;
        if (!period) continue;
        const requests = [];
        for (const p of await actingAs(kube, mc).listAll(mc.parent)) {
          const index = resyncDue(p.metadata.uid ?? '', period, now, RESYNC_TICK_MS);
          if (index === undefined) continue;
          requests.push(
            makeSyncRequest(
              {
                cluster,
                group: mc.parent.group,
                kind: mc.parent.kind,
                namespace: p.metadata.namespace,
                name: p.metadata.name ?? '',
                uid: p.metadata.uid ?? '',
              },
              [`${RESYNC_CAUSE}${period}/${index}`],
            ),
          );
        }
        await env.syncSink.send(MAP_TARGET, requests);
        queued += requests.length;
      }
      // CompositeController and DecoratorController parents, on the same schedule and queue.
      return queued + (await queueCompositeResyncs(kube, env.clusters.config(cluster), now, RESYNC_TICK_MS, env.syncSink));
    },
    ({ cluster, value, error }) =>
      error ? logger.error('map resync failed', { cluster, error: error.message }) : logger.info('map resync', { cluster, queued: value }),
  );
  throwIfAnyFailed('map resync', outcomes);
  return { queued: outcomes.reduce((n, o) => n + (o.value ?? 0), 0) };
}).use(injectLambdaContext(logger));
