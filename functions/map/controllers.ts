// The MapControllers of a cluster, resolved against discovery (the spec names resources; hooks and
// ControllerRefs name kinds), and what they mean to the router: each valid one makes its parent kind a
// controller kind whose inputs route by the parent's selector and whose outputs route by ControllerRef.
import {
  gvr,
  hasSubresource,
  resolveResource,
  type GVR,
  type KubeApi,
  type KubeClient,
  type KubeObject,
  type ResolvedResource,
} from '../../shared/kube/index.ts';
import {
  MAP_GROUP,
  MAP_VERSION,
  MapControllerError,
  parseMapController,
  type MapController,
  type ResourceRule,
  type UpdateMethod,
} from '../../shared/map/api.ts';
import type { ControllerKind, LabelSelector } from '../../shared/ownership/index.ts';
import { clusterCache, type ClusterCache } from '../cluster-cache.ts';
import { actingAs as actingAsAccount, IdentityProblem, refusedNeeds, resourceName } from '../identity.ts';
import { firstHolderFirst } from '../../shared/identity.ts';
import { METACONTROLLER_TARGET } from '../metacontroller/target.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';
import { listServedDefinitions, specChanged, writeDefinitionReady, type ControllerSource } from '../controller-source.ts';

export const mapControllers = gvr(MAP_GROUP, MAP_VERSION, 'mapcontrollers');
export const MAP_TARGET = METACONTROLLER_TARGET;

export interface ResolvedMapController extends MapController {
  /** The ServiceAccount it acts as; a controller without one is not resolved. */
  serviceAccount: { namespace: string; name: string };
  parent: ResolvedResource;
  /** Whether the parent kind has a status subresource; without one, status is written on the object. */
  parentStatus: boolean;
  inputs: ResolvedResource[];
  /** Each with how a changed output of it is written (spec.outputResources[].updateStrategy). */
  outputs: ResolvedOutput[];
}

export type ResolvedOutput = ResolvedResource & { updateMethod: UpdateMethod };

export interface MapControllerSet {
  valid: ResolvedMapController[];
  invalid: Array<{ name: string; reason: string; error: string }>;
  /** Every MapController as listed, for its Ready condition (readiness). */
  objects: KubeObject[];
}

/** The process's MapControllers per cluster; tests make caches of their own to play two processes. */
// Every MapController acts as a ServiceAccount, whose consent is not watched: only the empty set is kept until
// the resync where the MapControllers are watched (functions/cluster-cache.ts).
export const mapControllerCache = clusterCache<MapControllerSet>(5_000, { watchable: (set) => set.objects.length === 0 });

/** The cluster's MapControllers this deployment serves (`controllerSelector`: the cluster's; listServedDefinitions). */
export async function listMapControllers(
  kube: KubeClient,
  cluster: string,
  cache: ClusterCache<MapControllerSet> = mapControllerCache,
  controllerSelector?: string | undefined,
): Promise<MapControllerSet> {
  return cache.get(cluster, async () => {
    const objects = (await listServedDefinitions(kube, mapControllers, controllerSelector)).sort(firstHolderFirst);
    const out: MapControllerSet = { valid: [], invalid: [], objects };
    for (const o of objects) {
      try {
        const mc = await resolve(kube, parseMapController(o));
        // Only a controller that may run claims a kind. Of those, the first created holds it (a second would fight
        // it over the same parents), whatever names come later (docs/operations/security.md#serviceaccounts-a-definition-names).
        await checkIdentity(kube, mc);
        const earlier = out.valid.find((v) => v.parent.group === mc.parent.group && v.parent.kind === mc.parent.kind);
        if (earlier)
          throw new MapControllerError(
            mc.name,
            `parent kind ${mc.parent.kind} is already controlled by MapController ${earlier.name}, created before it`,
            'ParentKindTaken',
          );
        out.valid.push(mc);
      } catch (err) {
        out.invalid.push({
          name: o.metadata.name ?? '',
          reason: err instanceof MapControllerError ? err.reason : 'InvalidSpec',
          error: (err as Error).message,
        });
      }
    }
    return out;
  });
}

export function forgetMapControllers(cluster?: string): void {
  mapControllerCache.forget(cluster);
}

/** The client a MapController's reads and writes of its parents, inputs and outputs go through: its ServiceAccount's. */
export function actingAs(kube: KubeClient, mc: ResolvedMapController): KubeClient {
  return actingAsAccount(kube, mc.serviceAccount);
}

/**
 * Whether Outrigger may act as the controller's ServiceAccount (a cluster admin's grant: `get` and `impersonate`
 * on it; the account's consent: its annotation names the controller), and whether the ServiceAccount may list what a pass lists cluster-wide: the parent kind (resyncs list it
 * so), and the input and output resources a pass lists across namespaces (those of a cluster-scoped parent, and
 * cluster-scoped ones). Inputs and outputs listed in a parent's namespace are judged by the pass itself, whose
 * list as the ServiceAccount answers Forbidden there (the parent's Synced condition says so).
 */
async function checkIdentity(kube: KubeClient, mc: ResolvedMapController): Promise<void> {
  const who = `ServiceAccount ${mc.serviceAccount.namespace}/${mc.serviceAccount.name}`;
  const across = [
    ...new Map(
      [...mc.inputs, ...mc.outputs].filter((r) => !r.namespaced || !mc.parent.namespaced).map((r) => [`${r.group}/${r.resource}`, r]),
    ).values(),
  ];
  let refused;
  try {
    refused = await refusedNeeds(
      kube,
      mc.serviceAccount,
      { kind: 'MapController', name: mc.name },
      [mc.parent, ...across].map((resource) => ({ resource, verb: 'list' })),
    );
  } catch (err) {
    if (err instanceof IdentityProblem) throw new MapControllerError(mc.name, err.message, err.reason);
    throw err;
  }
  if (refused.some((r) => r.resource === mc.parent))
    throw new MapControllerError(mc.name, `${who} may not list ${resourceName(mc.parent)}`, 'Forbidden');
  if (refused.length)
    throw new MapControllerError(
      mc.name,
      `${who} may not list ${refused.map((r) => resourceName(r.resource)).join(', ')} in every namespace, as its passes would`,
      'Forbidden',
    );
}

async function resolve(kube: KubeClient, mc: MapController): Promise<ResolvedMapController> {
  const one = async (r: ResourceRule, field: string): Promise<ResolvedResource> => {
    try {
      return await resolveResource(kube, r.apiVersion, r.resource);
    } catch (err) {
      throw new MapControllerError(mc.name, `${field}: ${(err as Error).message}`, 'UnresolvableResource');
    }
  };
  const serviceAccount = mc.spec.serviceAccount;
  if (!serviceAccount)
    throw new MapControllerError(
      mc.name,
      'spec.serviceAccount is not set: a MapController acts only as a ServiceAccount of its own',
      'NoServiceAccount',
    );
  const parent = await one(mc.spec.parentResource, 'spec.parentResource');
  const outputs = await Promise.all(
    mc.spec.outputResources.map(async (r, i) => ({
      ...(await one(r, `spec.outputResources[${i}]`)),
      updateMethod: r.updateStrategy?.method ?? 'InPlace',
    })),
  );
  // The garbage collector never deletes a cluster-scoped object with a namespaced owner: such outputs would
  // outlive their parent (docs/controllers/mapcontroller.md#the-mapcontrollers-status).
  const index = outputs.findIndex((o) => parent.namespaced && !o.namespaced);
  if (index >= 0)
    throw new MapControllerError(
      mc.name,
      `spec.outputResources[${index}]: ${resourceName(outputs[index]!)} is cluster-scoped and the parent resource ${resourceName(parent)} is namespaced: the garbage collector would never delete such outputs with their parent`,
      'ClusterScopedOutput',
    );
  return {
    ...mc,
    serviceAccount,
    parent,
    parentStatus: await hasSubresource(kube, parent, 'status'),
    inputs: await Promise.all(mc.spec.inputResources.map((r, i) => one(r, `spec.inputResources[${i}]`))),
    outputs,
  };
}

export function mapControllerFor(set: MapControllerSet, group: string, kind: string): ResolvedMapController | undefined {
  return set.valid.find((m) => m.parent.group === group && m.parent.kind === kind);
}

/** Status writes bump no generation: a parent's change needs a sync when its spec moved past what was synced. */

// Its own Ready writes (readiness) move no generation, and so queue nothing.
export const mapControllerKind: ControllerKind = {
  resource: mapControllers,
  kind: 'MapController',
  namespaced: false,
  selectorOf: () => null,
  // A parent of its own, with no children: no child's label change lists the MapControllers.
  owns: [],
  ownChangeSyncs: specChanged,
  target: MAP_TARGET,
};

/** Writes each MapController's Ready condition where it changed (writeDefinitionReady). */
export async function writeReadiness(kube: KubeApi, set: MapControllerSet, now: Date = new Date()): Promise<void> {
  await Promise.all(
    set.objects.map((o) =>
      writeDefinitionReady(
        kube,
        mapControllers,
        o,
        set.invalid.find((i) => i.name === o.metadata.name),
        now,
      ),
    ),
  );
}

async function kinds(kube: KubeClient, cluster: ClusterConfig): Promise<ControllerKind[]> {
  const { valid } = await listMapControllers(kube, cluster.id, mapControllerCache, cluster.controllerSelector);
  return [
    mapControllerKind,
    ...valid.map((m): ControllerKind => ({
      resource: m.parent,
      kind: m.parent.kind,
      namespaced: m.parent.namespaced,
      // Outputs reach their parent by ControllerRef; a map parent adopts nothing.
      selectorOf: () => null,
      inputs: {
        kinds: m.inputs.map((i) => ({ group: i.group, kind: i.kind })),
        selectorOf: (p) => (p.spec as { selector?: LabelSelector | null } | undefined)?.selector,
      },
      owns: m.outputs.map((o) => ({ group: o.group, kind: o.kind })),
      definition: `MapController/${m.name}`,
      ownChangeSyncs: specChanged,
      target: MAP_TARGET,
    })),
  ];
}

async function watches(kube: KubeClient, cluster: ClusterConfig): Promise<GVR[]> {
  const { valid } = await listMapControllers(kube, cluster.id, mapControllerCache, cluster.controllerSelector);
  return [mapControllers, ...valid.flatMap((m) => [m.parent, ...m.inputs, ...m.outputs])];
}

export const mapSource: ControllerSource = {
  target: MAP_TARGET,
  kinds: (cluster, kube) => kinds(kube, cluster),
  watches: (cluster, kube) => watches(kube, cluster),
  // A MapController's event (the forwarder's, the router's) drops what this process keeps, as a policy's does.
  forget: (cluster) => forgetMapControllers(cluster),
};
