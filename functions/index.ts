// The function registry: the functions every deployment has (the heartbeat, the router, the ingest URL) and each
// controller's (functions/controllers.ts). The CDK construct and the local runtime read this list.
import type { ClusterConfig } from '../shared/clusters.ts';
import { gvrString, type GVR, type KubeClient } from '../shared/kube/index.ts';
import { mergeStatusReads, type StatusRead } from './controller-source.ts';
import { controllers, controllerSources, definitionResources, forgetControllers, type ControllerSource } from './controllers.ts';
import type { FunctionSpec } from './spec.ts';

export const functions: FunctionSpec[] = [
  {
    name: 'heartbeat',
    description: 'Records, for each cluster, whether its apiserver answered and which version it runs',
    entry: 'functions/heartbeat/handler.ts',
    schedule: { everyMinutes: 1 },
    table: ['dynamodb:GetItem', 'dynamodb:PutItem'],
    clusterAccess: 'controllers',
    timeoutSeconds: 30,
  },
  {
    name: 'router',
    description: 'Turns watch events into sync requests for the controllers that must reconcile (ControllerRef rules)',
    entry: 'functions/router/handler.ts',
    events: {
      resources: async (cluster, kube) => {
        const all = (await Promise.all(controllerSources.map((s) => s.watches(cluster, kube)))).flat();
        return [...new Map<string, GVR>(all.map((r) => [gvrString(r), r])).values()];
      },
      definitions: definitionResources,
      forget: forgetControllers,
      // The parents (and the definitions, parents of their own); children and inputs route by metadata alone.
      wholeObjects: async (cluster, kube) => [
        ...definitionResources,
        ...(await Promise.all(controllerSources.map((s) => s.kinds(cluster, kube)))).flat().map((k) => k.resource),
      ],
      statusChanges: async (cluster, kube) =>
        (await Promise.all(controllerSources.map((s) => s.statusChanges?.(cluster, kube) ?? []))).flat(),
      statusReads: (cluster, kube) => statusReads(controllerSources, cluster, kube),
    },
    // The targets of the controllers it routes for (history, storage, map); never the migrator.
    sends: [...new Set(controllerSources.map((s) => s.target))],
    clusterAccess: 'controllers',
    timeoutSeconds: 60,
  },
  ...controllers.flatMap((c) => c.functions),
  {
    name: 'ingest',
    description: 'Takes watch events over HTTPS (our envelopes, Knative ApiServerSource events) and queues them for the router',
    entry: 'functions/ingest/handler.ts',
    functionUrl: true,
    clusterAccess: 'none',
    timeoutSeconds: 30,
  },
];

/** The sync targets with a queue in a cluster of this configuration: those of the controllers that run in it. */
export function syncTargetsIn(config: ClusterConfig): string[] {
  const off = new Set(controllers.filter((c) => c.runsIn && !c.runsIn(config)).flatMap((c) => c.functions.map((f) => f.name)));
  return functions.flatMap((f) => (f.sync && !off.has(f.name) ? [f.sync.target] : []));
}

/** The names of one controller's functions (its `Controller.name`), for a runtime that leaves it out. */
export function functionsOf(controller: string): string[] {
  const declared = controllers.find((c) => c.name === controller);
  if (!declared) throw new Error(`no controller is named ${controller} (controllers: ${controllers.map((c) => c.name).join(', ')})`);
  return declared.functions.map((f) => f.name);
}

/**
 * The parents whose status every controller reconciling them reads at known paths only, with those paths: a
 * parent kind that any of its controllers reads whole (one that names no paths for it) is left out, so each of
 * its changes is sent.
 */
export async function statusReads(sources: readonly ControllerSource[], cluster: ClusterConfig, kube: KubeClient): Promise<StatusRead[]> {
  const entries: Array<{ resource: GVR; paths: readonly string[] | 'whole' }> = [];
  for (const s of sources) {
    const declared = new Map(((await s.statusReads?.(cluster, kube)) ?? []).map((r) => [gvrString(r.resource), r.paths]));
    for (const k of await s.kinds(cluster, kube))
      entries.push({ resource: k.resource, paths: declared.get(gvrString(k.resource)) ?? 'whole' });
  }
  return mergeStatusReads(entries);
}
