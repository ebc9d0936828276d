// The RevisionPolicies of a cluster, read at most every few seconds per warm process, and what they mean to
// the router: each valid policy makes its target kind a controller kind whose children (revisions, and the
// objects it generates) route to the history handler.
import { Resources, apiVersionOf, gvr, parseApiVersion, resolveKind, type GVR, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { parentLabels } from '../../shared/history/data.ts';
import { PolicyError, parsePolicy, POLICY_GROUP, type RevisionPolicy } from '../../shared/history/policy.ts';
import type { ControllerKind } from '../../shared/ownership/index.ts';
import { clusterCache } from '../cluster-cache.ts';
import type { ControllerSource } from '../controllers.ts';

export const revisionPolicies = gvr(POLICY_GROUP, 'v1alpha1', 'revisionpolicies');
const TTL_MS = 5_000;

export interface PolicySet {
  valid: RevisionPolicy[];
  invalid: Array<{ name: string; error: string }>;
}

const cache = clusterCache<PolicySet>(TTL_MS);

export async function listPolicies(kube: KubeClient, cluster: string): Promise<PolicySet> {
  return cache.get(cluster, async () => {
    const out: PolicySet = { valid: [], invalid: [] };
    for (const o of await kube.listAll(revisionPolicies)) {
      try {
        out.valid.push(parsePolicy(o));
      } catch (err) {
        if (!(err instanceof PolicyError)) throw err;
        out.invalid.push({ name: o.metadata.name ?? '', error: err.message });
      }
    }
    // The oldest-named policy wins when two name the same kind; the others report it in their status.
    out.valid.sort((a, b) => a.name.localeCompare(b.name));
    return out;
  });
}

export function forgetPolicies(cluster?: string): void {
  cache.forget(cluster);
}

export function policyFor(set: PolicySet, group: string, kind: string): RevisionPolicy | undefined {
  return set.valid.find((p) => p.spec.target.kind === kind && parseApiVersion(p.spec.target.apiVersion).group === group);
}

const policyKind: ControllerKind = { resource: revisionPolicies, kind: 'RevisionPolicy', namespaced: false, selectorOf: () => null, target: 'history' };

async function targetKinds(kube: KubeClient, cluster: string): Promise<ControllerKind[]> {
  const { valid } = await listPolicies(kube, cluster);
  const kinds: ControllerKind[] = [policyKind];
  for (const p of valid) {
    const r = await resolveKind(kube, p.spec.target.apiVersion, p.spec.target.kind).catch(() => undefined);
    if (!r || kinds.some((k) => k.kind === r.kind && k.resource.group === r.group)) continue;
    const generated = p.spec.generated && { group: parseApiVersion(p.spec.generated.apiVersion).group, kind: p.spec.generated.kind };
    kinds.push({
      resource: r,
      kind: r.kind,
      namespaced: r.namespaced,
      // The parent "selects" its own revisions by the parent labels; generated objects reach it by ControllerRef.
      // Listed items carry no apiVersion or kind, so they come from the kind resolved here.
      selectorOf: (parent: KubeObject) => ({ matchLabels: parentLabels({ ...parent, apiVersion: apiVersionOf(r), kind: r.kind }) }),
      // Its revisions and what it generates: another controller's children of the same parent are not history's.
      owns: [{ group: 'apps', kind: 'ControllerRevision' }, ...(generated ? [generated] : [])],
      target: 'history',
    });
  }
  return kinds;
}

async function watched(kube: KubeClient, cluster: string): Promise<GVR[]> {
  const { valid } = await listPolicies(kube, cluster);
  const out: GVR[] = [revisionPolicies, Resources.controllerRevisions];
  for (const p of valid) {
    for (const t of [p.spec.target, p.spec.generated].filter((x): x is { apiVersion: string; kind: string } => x !== undefined)) {
      const r = await resolveKind(kube, t.apiVersion, t.kind).catch(() => undefined);
      if (r) out.push(gvr(r.group, r.version, r.resource));
    }
  }
  return out;
}

export const historySource: ControllerSource = { target: 'history', kinds: (cluster, kube) => targetKinds(kube, cluster), watches: (cluster, kube) => watched(kube, cluster) };
