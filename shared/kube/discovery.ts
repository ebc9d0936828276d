// Per-group discovery (`/api/v1`, `/apis/<group>/<version>`): the APIResourceList, which, unlike aggregated
// discovery, carries each resource's storageVersionHash.
import type { KubeClient } from './client.ts';
import { isKubeError } from './errors.ts';
import { groupVersionPath, parseApiVersion, type GVR } from './resource.ts';

export interface APIResource {
  name: string;
  singularName?: string;
  namespaced: boolean;
  kind: string;
  verbs: string[];
  shortNames?: string[];
  storageVersionHash?: string;
}

export interface APIResourceList {
  groupVersion: string;
  resources: APIResource[];
}

export async function getResourceList(client: KubeClient, group: string, version: string): Promise<APIResourceList> {
  return client.getPath<APIResourceList>(groupVersionPath({ group, version }));
}

export interface ResolvedResource extends GVR {
  kind: string;
  namespaced: boolean;
}

const cache = new WeakMap<KubeClient, Map<string, Promise<APIResourceList>>>();

/** Finds the resource serving `kind` in `apiVersion`; cached per client, since it does not change under us. */
export async function resolveKind(client: KubeClient, apiVersion: string, kind: string): Promise<ResolvedResource> {
  const { group, version } = parseApiVersion(apiVersion);
  let lists = cache.get(client);
  if (!lists) cache.set(client, (lists = new Map()));
  let list = lists.get(apiVersion);
  if (!list) {
    list = getResourceList(client, group, version);
    lists.set(apiVersion, list);
    list.catch(() => lists.delete(apiVersion));
  }
  let resources: APIResourceList;
  try {
    resources = await list;
  } catch (err) {
    if (isKubeError(err, 'NotFound')) throw new Error(`the cluster does not serve ${apiVersion}`, { cause: err });
    throw err;
  }
  const found = resources.resources.find((r) => r.kind === kind && !r.name.includes('/'));
  if (!found) throw new Error(`the cluster serves no kind ${kind} in ${apiVersion}`);
  return { group, version, resource: found.name, kind, namespaced: found.namespaced };
}

/** Forgets what discovery said, after installing CRDs for example. */
export function forgetDiscovery(client: KubeClient): void {
  cache.delete(client);
}
