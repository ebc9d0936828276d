// The MapControllers of a cluster, resolved against discovery (the spec names resources; hooks and
// ControllerRefs name kinds), and what they mean to the router: each valid one makes its parent kind a
// controller kind whose inputs route by the parent's selector and whose outputs route by ControllerRef.
import { gvr, hasSubresource, resolveResource, type GVR, type KubeClient, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import { MAP_GROUP, MAP_VERSION, MapControllerError, parseMapController, type MapController, type ResourceRule } from '../../shared/map/api.ts';
import type { ControllerKind, LabelSelector } from '../../shared/ownership/index.ts';
import { clusterCache, type ClusterCache } from '../cluster-cache.ts';
import type { ControllerSource } from '../controllers.ts';

export const mapControllers = gvr(MAP_GROUP, MAP_VERSION, 'mapcontrollers');
export const MAP_TARGET = 'map';

export interface ResolvedMapController extends MapController {
  parent: ResolvedResource;
  /** Whether the parent kind has a status subresource; without one, status is written on the object. */
  parentStatus: boolean;
  inputs: ResolvedResource[];
  outputs: ResolvedResource[];
}

export interface MapControllerSet {
  valid: ResolvedMapController[];
  invalid: Array<{ name: string; error: string }>;
}

/** The process's MapControllers per cluster; tests make caches of their own to play two processes. */
export const mapControllerCache = clusterCache<MapControllerSet>(5_000);

export async function listMapControllers(kube: KubeClient, cluster: string, cache: ClusterCache<MapControllerSet> = mapControllerCache): Promise<MapControllerSet> {
  return cache.get(cluster, async () => {
    const out: MapControllerSet = { valid: [], invalid: [] };
    const objects = (await kube.listAll(mapControllers)).sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
    for (const o of objects) {
      try {
        const mc = await resolve(kube, parseMapController(o));
        // The first by name wins a parent kind; a second would fight it over the same parents.
        const earlier = out.valid.find((v) => v.parent.group === mc.parent.group && v.parent.kind === mc.parent.kind);
        if (earlier) throw new MapControllerError(mc.name, `parent kind ${mc.parent.kind} is already controlled by MapController ${earlier.name}`);
        out.valid.push(mc);
      } catch (err) {
        out.invalid.push({ name: o.metadata.name ?? '', error: (err as Error).message });
      }
    }
    return out;
  });
}

export function forgetMapControllers(cluster?: string): void {
  mapControllerCache.forget(cluster);
}

async function resolve(kube: KubeClient, mc: MapController): Promise<ResolvedMapController> {
  const one = async (r: ResourceRule, field: string): Promise<ResolvedResource> => {
    try {
      return await resolveResource(kube, r.apiVersion, r.resource);
    } catch (err) {
      throw new MapControllerError(mc.name, `${field}: ${(err as Error).message}`);
    }
  };
  const parent = await one(mc.spec.parentResource, 'spec.parentResource');
  return {
    ...mc,
    parent,
    parentStatus: await hasSubresource(kube, parent, 'status'),
    inputs: await Promise.all(mc.spec.inputResources.map((r, i) => one(r, `spec.inputResources[${i}]`))),
    outputs: await Promise.all(mc.spec.outputResources.map((r, i) => one(r, `spec.outputResources[${i}]`))),
  };
}

export function mapControllerFor(set: MapControllerSet, group: string, kind: string): ResolvedMapController | undefined {
  return set.valid.find((m) => m.parent.group === group && m.parent.kind === kind);
}

/** Status writes bump no generation: a parent's change needs a sync when its spec moved past what was synced. */
function specChanged(parent: KubeObject): boolean {
  const observed = (parent.status as { observedGeneration?: number } | undefined)?.observedGeneration;
  return parent.metadata.generation !== observed || Boolean(parent.metadata.deletionTimestamp);
}

const mapControllerKind: ControllerKind = { resource: mapControllers, kind: 'MapController', namespaced: false, selectorOf: () => null, target: MAP_TARGET };

async function kinds(kube: KubeClient, cluster: string): Promise<ControllerKind[]> {
  const { valid } = await listMapControllers(kube, cluster);
  return [
    mapControllerKind,
    ...valid.map(
      (m): ControllerKind => ({
        resource: m.parent,
        kind: m.parent.kind,
        namespaced: m.parent.namespaced,
        // Outputs reach their parent by ControllerRef; a map parent adopts nothing.
        selectorOf: () => null,
        inputs: { kinds: m.inputs.map((i) => ({ group: i.group, kind: i.kind })), selectorOf: (p) => (p.spec as { selector?: LabelSelector | null } | undefined)?.selector },
        owns: m.outputs.map((o) => ({ group: o.group, kind: o.kind })),
        ownChangeSyncs: specChanged,
        target: MAP_TARGET,
      }),
    ),
  ];
}

async function watches(kube: KubeClient, cluster: string): Promise<GVR[]> {
  const { valid } = await listMapControllers(kube, cluster);
  return [mapControllers, ...valid.flatMap((m) => [m.parent, ...m.inputs, ...m.outputs])];
}

export const mapSource: ControllerSource = { target: MAP_TARGET, kinds: (cluster, kube) => kinds(kube, cluster), watches: (cluster, kube) => watches(kube, cluster) };
