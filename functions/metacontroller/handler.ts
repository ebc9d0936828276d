// The one function serving MapController, CompositeController and DecoratorController parents, from their one
// queue (docs/contributing/layout.md#one-function-for-the-metacontroller-style-controllers): each request runs
// each kind's part (functions/composite/serve.ts, functions/map/handler.ts), with the hooks measured.
import { HookError, type HookCaller } from '../../shared/hooks/index.ts';
import { failureReason, type MetricsRecorder } from '../../shared/lambda/metrics.ts';
import { syncFunction } from '../../shared/lambda/sync-function.ts';
import type { Log } from '../../shared/log.ts';
import { compositeCache } from '../composite/controllers.ts';
import { serveCompositeRequest } from '../composite/serve.ts';
import { listMapControllers, mapControllerCache, mapControllerFor } from '../map/controllers.ts';
import { hookCaller } from './environment.ts';
import { passTiming, serveMapRequest } from '../map/handler.ts';

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

export const handler = syncFunction('map', async (request, tools) => {
  const context = {
    kube: tools.env.clusters.client(request.key.cluster),
    state: tools.env.state,
    syncSink: tools.env.syncSink,
    hooks: measuredHooks(hookCaller(), tools.metrics, request.key.cluster),
    controllerSelector: tools.env.clusters.config(request.key.cluster).controllerSelector,
    log: (level: Parameters<Log>[0], m: string, f?: Record<string, unknown>) => tools.logger[level](m, f ?? {}),
    ...passTiming(tools),
  };
  // CompositeController and DecoratorController parents share this queue (docs/controllers/compositecontroller.md#how-a-parent-is-synced).
  // A composite problem (its retry, or a timer held back) is thrown after the map pass, which it never holds up.
  let composite: unknown;
  try {
    await serveCompositeRequest(request, tools.sentAt, {
      ...context,
      controllers: compositeCache,
      deadline: context.budget?.deadline,
      receiveCount: tools.receiveCount,
      sharedWithMap: async (k) =>
        mapControllerFor(
          await listMapControllers(context.kube, k.cluster, mapControllerCache, context.controllerSelector),
          k.group,
          k.kind,
        ) !== undefined,
    });
  } catch (err) {
    composite = err;
  }
  await serveMapRequest(request, tools.sentAt, { ...context, controllers: mapControllerCache });
  if (composite !== undefined) throw composite;
});
