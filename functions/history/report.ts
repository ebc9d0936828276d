// A RevisionPolicy's Ready condition: what the handler found when it checked the policy (the parts the CRD
// schema cannot check, such as whether the target kind exists; docs/controllers/history.md#policy-conditions). A bad policy is
// reported, never acted on. observedGeneration says which spec has been acted on: a new one is handed to
// `onNewSpec` first (a changed limit or live set may leave every parent's history with revisions to trim),
// and recorded only after.
import { Resources, isKubeError, type KubeApi, type ResolvedResource } from '../../shared/kube/index.ts';
import { FOREIGN_HISTORY, HISTORY_KEPT_BY_ANNOTATION, PolicyError, parsePolicy, type RevisionPolicy } from '../../shared/history/policy.ts';
import { foreignRevisions } from '../../shared/history/revisions.ts';
import { clusterCache } from '../cluster-cache.ts';
import { IdentityProblem, refusedNeeds, resourceName } from '../identity.ts';
import { PolicyProblem, forgetPolicies, listPolicies, policyFor, resolvePolicy, revisionPolicies } from './policies.ts';

/** The reason of a policy whose target kind another, created first, holds. */
const TARGET_KIND_TAKEN = 'TargetKindTaken';

export interface PolicyReport {
  ready: boolean;
  reason?: string;
  message: string;
  /** The policy, when it is in effect. */
  policy?: RevisionPolicy | undefined;
  /** Its spec had not been acted on before this check. */
  newSpec?: boolean;
}

/**
 * Another controller's history of a kind it is known to keep (historyKeeper): revisions controlled by an object of
 * the kind that carry none of Outrigger's labels. One metadata list of the cluster's revisions per check. Of any
 * other kind, such a revision is its parent's matter only (the sync's per-parent check).
 */
async function foreignHistory(
  kube: KubeApi,
  cluster: string,
  policy: RevisionPolicy,
  target: ResolvedResource,
): Promise<string | undefined> {
  const keeper = await historyKeeper(kube, cluster, target);
  if (!keeper) return undefined;
  const listed = await kube.listMetadata(Resources.controllerRevisions);
  const [first, ...rest] = foreignRevisions(listed.items, target);
  if (!first) return undefined;
  const owner = first.metadata.ownerReferences?.find((o) => o.controller === true)?.name ?? '?';
  return (
    `RevisionPolicy ${policy.name}: another controller (${keeper}) keeps the history of ${target.kind} (revision ${first.metadata.namespace}/${first.metadata.name} of ` +
    `${owner}${rest.length ? ` and ${rest.length} more` : ''}); set spec.foreignHistory: Coexist to keep Outrigger's beside it`
  );
}

/**
 * Kinds whose own controller keeps ControllerRevisions of every object it serves: kube-controller-manager's
 * StatefulSet and DaemonSet controllers, LWS's controller.
 */
const KNOWN_KEEPERS: ReadonlyArray<{ group: string; kind: string; keeper: string }> = [
  { group: 'apps', kind: 'StatefulSet', keeper: 'kube-controller-manager' },
  { group: 'apps', kind: 'DaemonSet', keeper: 'kube-controller-manager' },
  { group: 'leaderworkerset.x-k8s.io', kind: 'LeaderWorkerSet', keeper: "LWS's controller" },
];

const keepers = clusterCache<string | undefined>(5_000);

/**
 * Who keeps the kind's history besides Outrigger, as nobody but a cluster admin can say: Outrigger's own list of
 * known controllers, or the kind's CRD's annotation (HISTORY_KEPT_BY_ANNOTATION). A ControllerRevision is no such
 * word: anyone allowed to create one in a namespace of their own could otherwise stop the policy in every other
 * (docs/design/decisions/0013-who-keeps-a-kinds-history-is-an-admins-word.md).
 */
async function historyKeeper(kube: KubeApi, cluster: string, target: ResolvedResource): Promise<string | undefined> {
  const known = KNOWN_KEEPERS.find((k) => k.group === target.group && k.kind === target.kind);
  if (known) return known.keeper;
  // A CRD's group always has a dot in it (functions/history/defaults.ts).
  if (!target.group.includes('.')) return undefined;
  const name = `${target.resource}.${target.group}`;
  return keepers.get(`${cluster}/${name}`, async () => {
    try {
      const crd = await kube.find(Resources.customResourceDefinitions, { name });
      return crd?.metadata.annotations?.[HISTORY_KEPT_BY_ANNOTATION] || undefined;
    } catch (err) {
      // A role that predates the CRD rule: nobody is known to keep the kind, as for any other.
      if (isKubeError(err, 'Forbidden')) return undefined;
      throw err;
    }
  });
}

/** Drops what was read of CRDs' annotations (tests change them under a warm process). */
export function forgetHistoryKeepers(): void {
  keepers.forget();
}

/** Outrigger may act as the policy's ServiceAccount, which names the policy, and the account may get and list the kinds a sync reads. */
async function checkReader(kube: KubeApi, policy: RevisionPolicy, kinds: ResolvedResource[]): Promise<void> {
  const account = policy.spec.serviceAccount!;
  let refused;
  try {
    refused = await refusedNeeds(
      kube,
      account,
      { kind: 'RevisionPolicy', name: policy.name },
      kinds.flatMap((resource) => ['get', 'list'].map((verb) => ({ resource, verb }))),
    );
  } catch (err) {
    if (err instanceof IdentityProblem) throw new PolicyProblem(err.reason, `RevisionPolicy ${policy.name}: ${err.message}`);
    throw err;
  }
  if (refused.length) {
    const what = refused.map((r) => `${r.verb} ${resourceName(r.resource)}`).join(', ');
    throw new PolicyProblem(
      'Forbidden',
      `RevisionPolicy ${policy.name}: ServiceAccount ${account.namespace}/${account.name} may not ${what}`,
    );
  }
}

export async function reportPolicy(
  kube: KubeApi,
  cluster: string,
  name: string,
  onNewSpec?: (policy: RevisionPolicy) => Promise<void>,
): Promise<PolicyReport> {
  let obj;
  try {
    obj = await kube.get(revisionPolicies, { name });
  } catch (err) {
    if (isKubeError(err, 'NotFound')) return { ready: false, reason: 'Deleted', message: 'deleted' };
    throw err;
  }
  forgetPolicies(cluster);
  let reason = 'Valid';
  let message = 'the policy is in effect';
  let policy: RevisionPolicy | undefined;
  try {
    policy = parsePolicy(obj);
    const { target, generated } = await resolvePolicy(kube, policy);
    if (policy.spec.serviceAccount) await checkReader(kube, policy, [target, ...(generated ? [generated] : [])]);
    const foreign = policy.spec.foreignHistory === 'Coexist' ? undefined : await foreignHistory(kube, cluster, policy, target);
    if (foreign) throw new PolicyProblem(FOREIGN_HISTORY, foreign);
    // One policy per kind: the one created first holds it (listPolicies); another says so rather than look in effect.
    const holder = policyFor(await listPolicies(kube, cluster), target.group, target.kind);
    if (holder && holder.name !== policy.name)
      throw new PolicyProblem(
        TARGET_KIND_TAKEN,
        `RevisionPolicy ${policy.name}: RevisionPolicy ${holder.name}, created first, keeps the history of ${target.kind}; this one is not in effect while it exists`,
      );
  } catch (err) {
    policy = undefined;
    if (err instanceof PolicyError) reason = 'InvalidPolicy';
    else if (err instanceof PolicyProblem) reason = err.reason;
    else throw err;
    message = err.message;
  }
  const ready = policy !== undefined;
  const observed = obj.status as
    | {
        observedGeneration?: number;
        conditions?: Array<{ type: string; status: string; reason?: string; message?: string; lastTransitionTime?: string }>;
      }
    | undefined;
  const current = (observed?.conditions ?? []).find((c) => c.type === 'Ready');
  const status = ready ? 'True' : 'False';
  const newSpec = observed?.observedGeneration !== obj.metadata.generation;
  if (policy && newSpec) await onNewSpec?.(policy);
  if (current?.status !== status || current.message !== message || current.reason !== reason || newSpec) {
    const lastTransitionTime =
      current?.status === status && current.lastTransitionTime ? current.lastTransitionTime : new Date().toISOString();
    await kube.patch(
      revisionPolicies,
      { name, subresource: 'status' },
      {
        status: {
          observedGeneration: obj.metadata.generation,
          conditions: [{ type: 'Ready', status, reason, message, lastTransitionTime }],
        },
      },
      'merge',
    );
    // The verdict is part of what the policy set means (a refused policy is not in effect).
    forgetPolicies(cluster);
  }
  return { ready, reason, message, policy, newSpec };
}
