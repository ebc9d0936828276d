// The defaulted fields of a policy's target kind, which history comparisons ignore (shared/history/defaults.ts):
// built-in kinds from the table there, custom resources from their CRD's schema for the served version. A CRD
// is read at most every few seconds per warm process, like the policies: a schema change (a new default) is
// picked up within the TTL.
import { builtinDefaults, crdDefaults } from '../../shared/history/defaults.ts';
import type { DefaultsSchema } from '../../shared/json.ts';
import { Resources, isKubeError, type KubeApi, type ResolvedResource } from '../../shared/kube/index.ts';
import { clusterCache } from '../cluster-cache.ts';

const TTL_MS = 5_000;

const cache = clusterCache<DefaultsSchema | undefined>(TTL_MS);

export async function targetDefaults(kube: KubeApi, cluster: string, target: ResolvedResource): Promise<DefaultsSchema | undefined> {
  const builtin = builtinDefaults(target.group, target.kind);
  if (builtin) return builtin;
  // A CRD's group always has a dot in it: any other group is built in, with no defaults Outrigger knows of.
  if (!target.group.includes('.')) return undefined;
  const name = `${target.resource}.${target.group}`;
  // One entry per cluster, CRD and version (the cache's key is only a string).
  return cache.get(`${cluster}/${name}/${target.version}`, async () => {
    try {
      // Not found: an aggregated API, or a built-in group with a dot (networking.k8s.io): no schema to read.
      const crd = await kube.find(Resources.customResourceDefinitions, { name });
      return crd ? crdDefaults(crd, target.version) : undefined;
    } catch (err) {
      // A cluster whose Outrigger role predates the CRD rule: compare without defaults, as before it existed.
      if (isKubeError(err, 'Forbidden')) return undefined;
      throw err;
    }
  });
}

/** Drops every cached schema (tests change CRDs under a warm process). */
export function forgetTargetDefaults(): void {
  cache.forget();
}
