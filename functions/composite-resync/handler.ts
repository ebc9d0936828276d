// Resyncs of CompositeController parents and DecoratorController objects without events (resyncPeriodSeconds), on
// the map resync's one-minute schedule and phase rule (docs/design/map-pass.md#resync); it also keeps the
// definitions' Ready condition current.
import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Context } from 'aws-lambda';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { clusterBudget, eachCluster, throwIfAnyFailed } from '../../shared/lambda/per-cluster.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { RESYNC_CAUSE } from '../../shared/map/api.ts';
import { resyncDue } from '../../shared/map/plan/index.ts';
import { actingAs, COMPOSITE_TARGET, listCompositeSet, writeReadiness } from '../composite/controllers.ts';
import { RESYNC_TICK_MS } from '../map-resync/handler.ts';

const logger = functionLogger('composite-resync');

export const handler = middy(async (event: { cluster?: string }, context: Context) => {
  const env = environment();
  const now = new Date();
  const outcomes = await eachCluster(
    event.cluster ? [event.cluster] : env.clusters.ids(),
    clusterBudget(context.getRemainingTimeInMillis()),
    async (cluster, deadline) => {
      const kube = env.clusters.client(cluster).within(deadline);
      const set = await listCompositeSet(kube, cluster);
      await writeReadiness(kube, set, now);
      let queued = 0;
      for (const d of [...set.composites, ...set.decorators]) {
        const period = d.resyncPeriodSeconds;
        if (!period) continue;
        for (const r of d.kind === 'CompositeController' ? [d.parentResource] : d.targets) {
          const requests = [];
          for (const p of await actingAs(kube, d).listAll(r)) {
            const index = resyncDue(p.metadata.uid ?? '', period, now, RESYNC_TICK_MS);
            if (index === undefined) continue;
            const key = {
              cluster,
              group: r.group,
              kind: r.kind,
              namespace: p.metadata.namespace,
              name: p.metadata.name ?? '',
              uid: p.metadata.uid ?? '',
            };
            requests.push(makeSyncRequest(key, [`${RESYNC_CAUSE}${period}/${index}`]));
          }
          await env.syncSink.send(COMPOSITE_TARGET, requests);
          queued += requests.length;
        }
      }
      return queued;
    },
    ({ cluster, value, error }) =>
      error
        ? logger.error('composite resync failed', { cluster, error: error.message })
        : logger.info('composite resync', { cluster, queued: value }),
  );
  throwIfAnyFailed('composite resync', outcomes);
  return { queued: outcomes.reduce((n, o) => n + (o.value ?? 0), 0) };
}).use(injectLambdaContext(logger));
