// Per-group discovery (`/api/v1`, `/apis/<group>/<version>`): the APIResourceList, which, unlike aggregated
// discovery, carries each resource's storageVersionHash.
import pLimit from 'p-limit';
import type { KubeClient } from './client.ts';
import { isKubeError } from './errors.ts';
import { apiVersionOf, groupVersionPath, parseApiVersion, type GVR } from './resource.ts';

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
  const found = (await cachedResourceList(client, apiVersion)).resources.find((r) => r.kind === kind && !r.name.includes('/'));
  if (!found) throw new Error(`the cluster serves no kind ${kind} in ${apiVersion}`);
  return { ...parseApiVersion(apiVersion), resource: found.name, kind, namespaced: found.namespaced };
}

/** Finds the kind served as `resource` (plural) in `apiVersion`, with the same cache. */
export async function resolveResource(client: KubeClient, apiVersion: string, resource: string): Promise<ResolvedResource> {
  const found = (await cachedResourceList(client, apiVersion)).resources.find((r) => r.name === resource);
  if (!found) throw new Error(`the cluster serves no resource ${resource} in ${apiVersion}`);
  return { ...parseApiVersion(apiVersion), resource, kind: found.kind, namespaced: found.namespaced };
}

async function cachedResourceList(client: KubeClient, apiVersion: string): Promise<APIResourceList> {
  const { group, version } = parseApiVersion(apiVersion);
  let lists = cache.get(client);
  if (!lists) cache.set(client, (lists = new Map()));
  let list = lists.get(apiVersion);
  if (!list) {
    list = getResourceList(client, group, version);
    lists.set(apiVersion, list);
    list.catch(() => lists.delete(apiVersion));
  }
  try {
    return await list;
  } catch (err) {
    if (isKubeError(err, 'NotFound')) throw new Error(`the cluster does not serve ${apiVersion}`, { cause: err });
    throw err;
  }
}

/** Whether the resource is namespaced (a watch limited to one namespace must not name one for the others). */
export async function isNamespaced(client: KubeClient, r: GVR): Promise<boolean> {
  return (await cachedResourceList(client, apiVersionOf(r))).resources.find((x) => x.name === r.resource)?.namespaced ?? false;
}

/** Forgets what discovery said, after installing CRDs for example. */
export function forgetDiscovery(client: KubeClient): void {
  cache.delete(client);
}

/** A resource as the storage poll sees it: where it is served (the group's preferred version) and its hash. */
export interface StorageVersionEntry extends GVR {
  kind: string;
  storageVersionHash: string;
}

export interface StorageDiscovery {
  resources: StorageVersionEntry[];
  /** Groups whose discovery failed: their resources get no heartbeat this time; the others still do. */
  failed: Array<{ group: string; error: string }>;
}

interface APIGroupList {
  groups: Array<{ name: string; preferredVersion?: { version: string }; versions: Array<{ version: string }> }>;
}

/**
 * Every resource with a storageVersionHash, from per-group discovery at each group's preferred version
 * (aggregated discovery carries no hash). Subresources and resources without a hash are skipped.
 */
export async function discoverStorageVersions(client: KubeClient, opts: { groups?: readonly string[] | undefined; concurrency?: number } = {}): Promise<StorageDiscovery> {
  const wanted = (g: string) => !opts.groups || opts.groups.includes(g);
  const targets: Array<{ group: string; version: string }> = [];
  if (wanted('')) targets.push({ group: '', version: 'v1' });
  const list = await client.getPath<APIGroupList>('/apis');
  for (const g of list.groups) {
    const version = g.preferredVersion?.version ?? g.versions[0]?.version;
    if (version && wanted(g.name)) targets.push({ group: g.name, version });
  }
  const out: StorageDiscovery = { resources: [], failed: [] };
  const limit = pLimit(opts.concurrency ?? 8);
  await Promise.all(
    targets.map((t) =>
      limit(async () => {
        try {
          const rl = await getResourceList(client, t.group, t.version);
          for (const r of rl.resources) {
            if (r.name.includes('/') || !r.storageVersionHash) continue;
            out.resources.push({ group: t.group, version: t.version, resource: r.name, kind: r.kind, storageVersionHash: r.storageVersionHash });
          }
        } catch (err) {
          out.failed.push({ group: t.group, error: err instanceof Error ? err.message : String(err) });
        }
      }),
    ),
  );
  out.resources.sort((a, b) => a.group.localeCompare(b.group) || a.resource.localeCompare(b.resource));
  return out;
}
