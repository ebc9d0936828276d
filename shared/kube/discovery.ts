// Per-group discovery (`/api/v1`, `/apis/<group>/<version>`): the APIResourceList, which, unlike aggregated
// discovery, carries each resource's storageVersionHash.
import pLimit from 'p-limit';
import type { KubeApi } from './api.ts';
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

export async function getResourceList(client: KubeApi, group: string, version: string): Promise<APIResourceList> {
  return client.getPath<APIResourceList>(groupVersionPath({ group, version }));
}

export interface ResolvedResource extends GVR {
  kind: string;
  namespaced: boolean;
}

/** Discovery's answer that a group version, kind or resource is not served, as opposed to a failed read. */
export class NotServedError extends Error {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super(message, opts);
    this.name = 'NotServedError';
  }
}

/**
 * How long a group version's resource list is trusted: a warm function keeps its client for hours, and a CRD added
 * to a group already read, or removed from it, must be seen within seconds (client-go's memory cache likewise
 * drops what it knows on a miss). A lookup that misses re-reads a list older than MISS_REFRESH_MS, so a resource
 * served since is found at once, and a run of misses costs at most one read a second per group version.
 */
export const DISCOVERY_MAX_AGE_MS = 10_000;
export const MISS_REFRESH_MS = 1_000;

interface CachedList {
  list: Promise<APIResourceList>;
  at: number;
}

const cache = new WeakMap<KubeApi, Map<string, CachedList>>();

/** Finds the resource serving `kind` in `apiVersion`; cached per client for DISCOVERY_MAX_AGE_MS (docs/controllers/mapcontroller.md#kinds-the-cluster-starts-or-stops-serving). */
export async function resolveKind(client: KubeApi, apiVersion: string, kind: string): Promise<ResolvedResource> {
  const found = await lookUp(client, apiVersion, (r) => r.kind === kind && !r.name.includes('/'));
  if (!found) throw new NotServedError(`the cluster serves no kind ${kind} in ${apiVersion}`);
  return { ...parseApiVersion(apiVersion), resource: found.name, kind, namespaced: found.namespaced };
}

/** Finds the kind served as `resource` (plural) in `apiVersion`, with the same cache. */
export async function resolveResource(client: KubeApi, apiVersion: string, resource: string): Promise<ResolvedResource> {
  const found = await lookUp(client, apiVersion, (r) => r.name === resource);
  if (!found) throw new NotServedError(`the cluster serves no resource ${resource} in ${apiVersion}`);
  return { ...parseApiVersion(apiVersion), resource, kind: found.kind, namespaced: found.namespaced };
}

/** The first resource of the group version that `matches`, reading the list again on a miss if it is not fresh. */
async function lookUp(client: KubeApi, apiVersion: string, matches: (r: APIResource) => boolean): Promise<APIResource | undefined> {
  const found = (await cachedResourceList(client, apiVersion, DISCOVERY_MAX_AGE_MS)).resources.find(matches);
  return found ?? (await cachedResourceList(client, apiVersion, MISS_REFRESH_MS)).resources.find(matches);
}

/** The group version's resource list, read again when the cached one is older than `maxAge` ms. */
async function cachedResourceList(client: KubeApi, apiVersion: string, maxAge = DISCOVERY_MAX_AGE_MS): Promise<APIResourceList> {
  const { group, version } = parseApiVersion(apiVersion);
  let lists = cache.get(client);
  if (!lists) cache.set(client, (lists = new Map()));
  let entry = lists.get(apiVersion);
  if (!entry || Date.now() - entry.at > maxAge) {
    const fresh: CachedList = { list: getResourceList(client, group, version), at: Date.now() };
    lists.set(apiVersion, fresh);
    // A failed read is not cached; a later read that has already replaced it stays.
    fresh.list.catch(() => lists.get(apiVersion) === fresh && lists.delete(apiVersion));
    entry = fresh;
  }
  try {
    return await entry.list;
  } catch (err) {
    if (isKubeError(err, 'NotFound')) throw new NotServedError(`the cluster does not serve ${apiVersion}`, { cause: err });
    throw err;
  }
}

/** Whether the resource is namespaced (a watch limited to one namespace must not name one for the others). */
export async function isNamespaced(client: KubeApi, r: GVR): Promise<boolean> {
  return (await cachedResourceList(client, apiVersionOf(r))).resources.find((x) => x.name === r.resource)?.namespaced ?? false;
}

/** Whether the resource has the subresource (`status`: a CRD may have none, and then status is written on the object). */
export async function hasSubresource(client: KubeApi, r: GVR, subresource: string): Promise<boolean> {
  return (await cachedResourceList(client, apiVersionOf(r))).resources.some((x) => x.name === `${r.resource}/${subresource}`);
}

/** Forgets what discovery said, after installing CRDs for example. */
export function forgetDiscovery(client: KubeApi): void {
  cache.delete(client);
}

/** A resource as the storage poll sees it: a version that serves it (the group's preferred one if it does) and its hash. */
export interface StorageVersionEntry extends GVR {
  kind: string;
  storageVersionHash: string;
}

export interface StorageDiscovery {
  resources: StorageVersionEntry[];
  /** Group versions whose discovery failed: their resources get no heartbeat this time; the others still do. */
  failed: Array<{ group: string; version: string; error: string }>;
}

interface APIGroup {
  name: string;
  preferredVersion?: { version: string };
  versions: Array<{ version: string }>;
}

interface APIGroupList {
  groups: APIGroup[];
}

/** A group's served versions, its preferred one first (the rest in the server's order, which is by priority). */
function servedVersions(g: APIGroup): string[] {
  const preferred = g.preferredVersion?.version;
  return [...new Set([...(preferred ? [preferred] : []), ...g.versions.map((v) => v.version)])];
}

/**
 * Every resource with a storageVersionHash, from per-group discovery (aggregated discovery carries no hash) at
 * every served version of every group: a resource need not be served in its group's preferred version (a
 * group's CRDs each list their own versions). One request per group version, whatever the number of resources;
 * a resource served in several versions is reported once, from the first version in servedVersions' order.
 * Subresources and resources without a hash are skipped.
 */
export async function discoverStorageVersions(
  client: KubeApi,
  opts: { groups?: readonly string[] | undefined; concurrency?: number } = {},
): Promise<StorageDiscovery> {
  const wanted = (g: string) => !opts.groups || opts.groups.includes(g);
  const targets: Array<{ group: string; version: string }> = [];
  if (wanted('')) targets.push({ group: '', version: 'v1' });
  const list = await client.getPath<APIGroupList>('/apis');
  for (const g of list.groups) if (wanted(g.name)) targets.push(...servedVersions(g).map((version) => ({ group: g.name, version })));
  const out: StorageDiscovery = { resources: [], failed: [] };
  const limit = pLimit(opts.concurrency ?? 8);
  const lists = await Promise.all(
    targets.map((t) =>
      limit(async () => {
        try {
          return await getResourceList(client, t.group, t.version);
        } catch (err) {
          out.failed.push({ ...t, error: err instanceof Error ? err.message : String(err) });
          return undefined;
        }
      }),
    ),
  );
  const seen = new Set<string>();
  targets.forEach((t, i) => {
    for (const r of lists[i]?.resources ?? []) {
      if (r.name.includes('/') || !r.storageVersionHash || seen.has(`${r.name}.${t.group}`)) continue;
      seen.add(`${r.name}.${t.group}`);
      out.resources.push({ group: t.group, version: t.version, resource: r.name, kind: r.kind, storageVersionHash: r.storageVersionHash });
    }
  });
  out.resources.sort((a, b) => a.group.localeCompare(b.group) || a.resource.localeCompare(b.resource));
  return out;
}

/**
 * The version to reach a resource through: its group's preferred version when that serves it, else the first
 * served version that does (what a migration lists and rewrites through).
 */
export async function servingVersion(client: KubeApi, group: string, resource: string): Promise<string> {
  if (group === '') return 'v1';
  const g = await client.getPath<APIGroup>(`/apis/${group}`);
  for (const version of servedVersions(g)) {
    const rl = await getResourceList(client, group, version).catch((err: unknown) => {
      if (isKubeError(err, 'NotFound')) return undefined;
      throw err;
    });
    if (rl?.resources.some((r) => r.name === resource)) return version;
  }
  throw new Error(`the cluster serves ${resource} in no version of API group ${group}`);
}
