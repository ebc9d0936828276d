// The one function serving MapController, CompositeController and DecoratorController parents, from their one
// queue (docs/contributing/layout.md#one-function-for-the-metacontroller-style-controllers): each request runs
// each kind's part (functions/composite/serve.ts, functions/map/handler.ts), with the hooks measured.
import { HookError, type HookCaller } from '../../shared/hooks/index.ts';
import { failureReason, type MetricsRecorder } from '../../shared/lambda/metrics.ts';
import { syncFunction } from '../../shared/lambda/sync-function.ts';
import type { Log } from '../../shared/log.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { ClusterCache } from '../cluster-cache.ts';
import { compositeCache, type CompositeSet } from '../composite/controllers.ts';
import { serveCompositeRequest } from '../composite/serve.ts';
import { listMapControllers, mapControllerCache, mapControllerFor, type MapControllerSet } from '../map/controllers.ts';
import { hookCaller } from './environment.ts';
import { passTiming, serveMapRequest, type MapServeContext } from '../map/handler.ts';

/** Each hook call counted and timed (HookCalls, HookFailures by reason, HookLatency; docs/reference/metrics-and-alarms.md). */
function measuredHooks(hooks: HookCaller, metrics: MetricsRecorder, cluster: string): HookCaller {
  return {
    call: async (hook, request, opts) => {
      const started = performance.now();
      metrics.count(cluster, 'HookCalls');
      try {
        return await hooks.call(hook, request, opts);
      } catch (err) {
        metrics.count(cluster, 'HookFailures', 1, { reason: err instanceof HookError ? err.reason : failureReason(err) });
        throw err;
      } finally {
        metrics.milliseconds(cluster, 'HookLatency', performance.now() - started);
      }
    },
  };
}

export interface ServeContext extends Omit<MapServeContext, 'controllers'> {
  /** Each kind's definitions, per cluster. */
  caches: { map: ClusterCache<MapControllerSet>; composite: ClusterCache<CompositeSet> };
}

/**
 * One request, served by each kind's part side by side (docs/operations/security.md#one-definitions-hook-and-anothers-pass):
 * each with the request's whole time budget, none waiting for another's hooks. A problem of one (its retry, or a
 * timer held back) is thrown once the others are done, the map pass's first.
 */
export async function serveRequest(request: SyncRequest, sentAt: number, ctx: ServeContext): Promise<void> {
  const { caches, ...context } = ctx;
  const sharedWithMap = async (k: SyncRequest['key']) =>
    mapControllerFor(await listMapControllers(context.kube, k.cluster, caches.map, context.controllerSelector), k.group, k.kind) !==
    undefined;
  const [composite, map] = await Promise.allSettled([
    serveCompositeRequest(request, sentAt, {
      ...context,
      controllers: caches.composite,
      deadline: context.budget?.deadline,
      sharedWithMap,
    }),
    serveMapRequest(request, sentAt, { ...context, controllers: caches.map }),
  ]);
  if (map.status === 'rejected') throw map.reason;
  if (composite.status === 'rejected') throw composite.reason;
}

export const handler = syncFunction('map', async (request, tools) =>
  serveRequest(request, tools.sentAt, {
    kube: tools.env.clusters.client(request.key.cluster),
    state: tools.env.state,
    syncSink: tools.env.syncSink,
    hooks: measuredHooks(hookCaller(), tools.metrics, request.key.cluster),
    controllerSelector: tools.env.clusters.config(request.key.cluster).controllerSelector,
    log: (level: Parameters<Log>[0], m: string, f?: Record<string, unknown>) => tools.logger[level](m, f ?? {}),
    ...passTiming(tools),
    caches: { map: mapControllerCache, composite: compositeCache },
  }),
);
