// The RevisionPolicies of a cluster, read at most every few seconds per warm process, and what they mean to
// the router: each policy in effect makes its target kind a controller kind whose children (revisions, and
// the objects it generates) route to the history handler. A policy is in effect when it parses, its target
// and generated kinds are served, its target is namespaced, and its last check found nothing against it
// (docs/controllers/history.md#policy-conditions); any other policy is watched and routed for nothing but its own events.
import {
  NotServedError,
  Resources,
  apiVersionOf,
  gvr,
  parseApiVersion,
  resolveKind,
  type GVR,
  type KubeApi,
  type KubeClient,
  type KubeObject,
  type ResolvedResource,
} from '../../shared/kube/index.ts';
import { parentLabels, targetState, type JsonObject } from '../../shared/history/data.ts';
import { semanticallyEqual } from '../../shared/json.ts';
import { PolicyError, parsePolicy, POLICY_GROUP, reportedNotReady, type RevisionPolicy } from '../../shared/history/policy.ts';
import type { ControllerKind } from '../../shared/ownership/index.ts';
import { clusterCache } from '../cluster-cache.ts';
import { actingAs, checkConsent, IdentityProblem, type ServiceAccountRef } from '../identity.ts';
import { firstHolderFirst } from '../../shared/identity.ts';
import { mergeStatusReads, type ControllerSource, type StatusRead } from '../controller-source.ts';

export const revisionPolicies = gvr(POLICY_GROUP, 'v1alpha1', 'revisionpolicies');
const TTL_MS = 5_000;

/** A policy in effect, with its kinds as discovery serves them. */
export interface EffectivePolicy {
  policy: RevisionPolicy;
  target: ResolvedResource;
  generated?: ResolvedResource | undefined;
}

export interface PolicySet {
  valid: RevisionPolicy[];
  effective: EffectivePolicy[];
  invalid: Array<{ name: string; reason: string; error: string }>;
  /**
   * Policies whose kinds discovery could not answer for now (a timeout, an aggregated API that is down): their
   * kinds, as the spec names them, are neither routed nor dropped but retried (docs/controllers/history.md#policy-conditions).
   */
  unresolved: Array<{ name: string; kinds: Array<{ group: string; kind: string }>; error: string }>;
}

/** Why a policy is not in effect, as its Ready condition's reason and message. */
export class PolicyProblem extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = 'PolicyProblem';
    this.reason = reason;
  }
}

/**
 * The policy's kinds, or the PolicyProblem that keeps it out of effect. A discovery read that fails for any
 * other reason throws: the caller retries rather than take a policy for bad.
 */
export async function resolvePolicy(kube: KubeApi, policy: RevisionPolicy): Promise<EffectivePolicy> {
  const resolve = async (t: { apiVersion: string; kind: string }, reason: string, what: string) => {
    try {
      return await resolveKind(kube, t.apiVersion, t.kind);
    } catch (err) {
      if (err instanceof NotServedError)
        throw new PolicyProblem(reason, `RevisionPolicy ${policy.name}: ${what}: ${(err as Error).message}`);
      throw err;
    }
  };
  const target = await resolve(policy.spec.target, 'UnknownKind', 'spec.target');
  if (!target.namespaced) {
    throw new PolicyProblem(
      'ClusterScoped',
      `RevisionPolicy ${policy.name}: ${target.kind} is cluster-scoped; ControllerRevisions are namespaced, so it cannot have a history`,
    );
  }
  // A Secret's data never leaves it (docs/operations/security.md#secrets-stay-in-the-cluster): revisions are
  // readable wherever ControllerRevisions are (the `view` role), Secrets are not, and the forwarder sends
  // Secrets' metadata only.
  if (target.group === '' && target.resource === 'secrets') {
    throw new PolicyProblem(
      'SecretTarget',
      `RevisionPolicy ${policy.name}: the target is Secrets, whose data would be copied into ControllerRevisions that anyone who may read the namespace's revisions can read; Outrigger keeps no history of Secrets`,
    );
  }
  const generated = policy.spec.generated ? await resolve(policy.spec.generated, 'UnknownGeneratedKind', 'spec.generated') : undefined;
  return { policy, target, generated };
}

/** The policy's target kind, as discovery serves it; a cluster-scoped kind cannot have a history. */
export async function resolveTarget(kube: KubeApi, policy: RevisionPolicy): Promise<ResolvedResource> {
  const target = await resolveKind(kube, policy.spec.target.apiVersion, policy.spec.target.kind);
  if (!target.namespaced)
    throw new Error(
      `RevisionPolicy ${policy.name}: ${target.kind} is cluster-scoped; ControllerRevisions are namespaced, so it cannot have a history`,
    );
  return target;
}

/**
 * The client the policy's target and generated kinds are read with: the ServiceAccount it names
 * (docs/operations/security.md), or Outrigger's own identity. Revisions, Events and the policy's status are Outrigger's own.
 */
export function targetReader(kube: KubeApi, policy: RevisionPolicy): KubeApi {
  return policy.spec.serviceAccount ? actingAs(kube, policy.spec.serviceAccount) : kube;
}

// Kept until the resync where the policies are watched, when every one is in effect and names no ServiceAccount
// (whose consent is not watched): functions/cluster-cache.ts.
const cache = clusterCache<PolicySet>(TTL_MS, {
  watchable: (set) => set.invalid.length === 0 && set.unresolved.length === 0 && set.valid.every((p) => !p.spec.serviceAccount),
});

export async function listPolicies(kube: KubeApi, cluster: string): Promise<PolicySet> {
  return cache.get(cluster, async () => {
    const out: PolicySet = { valid: [], effective: [], invalid: [], unresolved: [] };
    const objects = await kube.listAll(revisionPolicies);
    // The policy created first wins when two name the same kind, whatever their names; the others report it in
    // their status (docs/operations/security.md#serviceaccounts-a-definition-names).
    objects.sort(firstHolderFirst);
    for (const o of objects) {
      const name = o.metadata.name ?? '';
      let parsed: RevisionPolicy | undefined;
      try {
        parsed = parsePolicy(o);
        const resolved = await resolvePolicy(kube, parsed);
        // Nothing is read as an account that does not name the policy, even before the policy's first check.
        if (parsed.spec.serviceAccount) await consented(kube, parsed.spec.serviceAccount, name);
        if (reportedNotReady(o)) {
          out.invalid.push({ name, reason: 'Reported', error: 'its last check found it not in effect' });
          continue;
        }
        out.effective.push(resolved);
        out.valid.push(resolved.policy);
      } catch (err) {
        if (err instanceof PolicyError) out.invalid.push({ name, reason: 'InvalidPolicy', error: err.message });
        else if (err instanceof PolicyProblem) out.invalid.push({ name, reason: err.reason, error: err.message });
        else if (parsed) out.unresolved.push({ name, kinds: specKinds(parsed), error: String(err) });
        else throw err;
      }
    }
    return out;
  });
}

async function consented(kube: KubeApi, account: ServiceAccountRef, name: string): Promise<void> {
  try {
    await checkConsent(kube, account, { kind: 'RevisionPolicy', name });
  } catch (err) {
    if (err instanceof IdentityProblem) throw new PolicyProblem(err.reason, `RevisionPolicy ${name}: ${err.message}`);
    throw err;
  }
}

/** The kinds a policy names, as its spec names them (no discovery). */
function specKinds(policy: RevisionPolicy): Array<{ group: string; kind: string }> {
  return [policy.spec.target, ...(policy.spec.generated ? [policy.spec.generated] : [])].map((t) => ({
    group: parseApiVersion(t.apiVersion).group,
    kind: t.kind,
  }));
}

/** Thrown for an object of a kind whose policy discovery could not answer for: the event or request is retried. */
export function unresolvedFor(set: PolicySet, group: string, kind: string): Error | undefined {
  const u = set.unresolved.find((x) => x.kinds.some((k) => k.group === group && k.kind === kind));
  return u && new Error(`RevisionPolicy ${u.name}: its kinds could not be resolved (${u.error}); retried`);
}

export function forgetPolicies(cluster?: string): void {
  cache.forget(cluster);
}

export function policyFor(set: PolicySet, group: string, kind: string): RevisionPolicy | undefined {
  return set.valid.find((p) => p.spec.target.kind === kind && parseApiVersion(p.spec.target.apiVersion).group === group);
}

/**
 * The policy for a parent's kind; when the cached set has none, the policies are read again once (another
 * process may have seen a new policy first: the forwarder starts watching its kind as soon as it exists).
 */
export async function freshPolicyFor(kube: KubeApi, cluster: string, group: string, kind: string): Promise<RevisionPolicy | undefined> {
  const found = policyFor(await listPolicies(kube, cluster), group, kind);
  if (found) return found;
  forgetPolicies(cluster);
  const fresh = await listPolicies(kube, cluster);
  const unresolved = unresolvedFor(fresh, group, kind);
  if (unresolved) throw unresolved;
  return policyFor(fresh, group, kind);
}

export const policyKind: ControllerKind = {
  resource: revisionPolicies,
  kind: 'RevisionPolicy',
  namespaced: false,
  selectorOf: () => null,
  // A parent of its own, with no children: no child's label change lists the policies.
  owns: [],
  target: 'history',
};

function withoutManagedFields(parent: KubeObject): KubeObject {
  const { managedFields: _, ...metadata } = parent.metadata;
  return { ...parent, metadata };
}

async function targetKinds(kube: KubeApi, cluster: string): Promise<ControllerKind[]> {
  const { effective } = await listPolicies(kube, cluster);
  const kinds: ControllerKind[] = [policyKind];
  for (const { target: r, generated, policy } of effective) {
    if (kinds.some((k) => k.kind === r.kind && k.resource.group === r.group)) continue;
    const paths = policy.spec.targetState;
    const account = policy.spec.serviceAccount;
    kinds.push({
      resource: r,
      kind: r.kind,
      namespaced: r.namespaced,
      // The parent "selects" its own revisions by the parent labels; generated objects reach it by ControllerRef.
      // Listed items carry no apiVersion or kind, so they come from the kind resolved here.
      selectorOf: (parent: KubeObject) => ({ matchLabels: parentLabels({ ...parent, apiVersion: apiVersionOf(r), kind: r.kind }) }),
      // Its revisions and what it generates: another controller's children of the same parent are not history's.
      owns: [{ group: 'apps', kind: 'ControllerRevision' }, ...(generated ? [{ group: generated.group, kind: generated.kind }] : [])],
      target: 'history',
      definition: `RevisionPolicy/${policy.name}`,
      // A sync may answer from the parent's own event (docs/design/history-sync.md#cost); its managed fields
      // are only bulk to it.
      observe: withoutManagedFields,
      // Both objects come from the apiserver, defaulted alike: no defaults are needed to compare them.
      targetChanged: (object, old) =>
        !semanticallyEqual(targetState(object as unknown as JsonObject, paths), targetState(old as unknown as JsonObject, paths)),
      checksRefUid: true,
      // Parent labels name the parent: a Coexist revision, owned by a plain reference, reaches it with no list.
      selectsByName: true,
      // An orphan's event lists the parents of the kind: with the policy's account when it names one.
      ...(account ? { reader: (k: KubeClient) => actingAs(k, account) } : {}),
    });
  }
  return kinds;
}

async function watched(kube: KubeApi, cluster: string): Promise<GVR[]> {
  const { effective } = await listPolicies(kube, cluster);
  const out: GVR[] = [revisionPolicies, Resources.controllerRevisions];
  for (const { target, generated } of effective) {
    for (const r of generated ? [target, generated] : [target]) out.push(gvr(r.group, r.version, r.resource));
  }
  return out;
}

/**
 * What a snapshot-mode history sync reads of a parent's status: the revisions its status paths name (live
 * revisions) and the generated objects' selector where it lives in status; nothing else of it
 * (docs/operations/cost.md#parents-status-steps). A revisionKey-mode sync runs whole on every event, and its
 * parent's status steps are how it hears that generated objects it does not own took a key (LWS's leader pods are
 * the leader StatefulSet's): such a kind names no paths, and all its changes are sent.
 */
async function statusReads(kube: KubeApi, cluster: string): Promise<StatusRead[]> {
  const { effective } = await listPolicies(kube, cluster);
  // Every policy of a kind counts (one of two naming it wins the kind; the reads stay conservative).
  return mergeStatusReads(
    effective.map(({ target, policy }) => {
      const selectorPath = policy.spec.generated?.selectorPath;
      return {
        resource: gvr(target.group, target.version, target.resource),
        paths:
          policy.spec.mode === 'revisionKey'
            ? 'whole'
            : [...policy.spec.statusRevisionPaths, ...(selectorPath?.startsWith('status.') ? [selectorPath] : [])],
      };
    }),
  );
}

export const historySource: ControllerSource = {
  target: 'history',
  kinds: (cluster, kube) => targetKinds(kube, cluster.id),
  watches: (cluster, kube) => watched(kube, cluster.id),
  statusReads: (cluster, kube) => statusReads(kube, cluster.id),
  forget: (cluster) => forgetPolicies(cluster),
  unresolved: async (cluster, kube, group, kind) => unresolvedFor(await listPolicies(kube, cluster.id), group, kind),
};
