// A RevisionPolicy's Ready condition: what the handler found when it checked the policy (the parts the CRD
// schema cannot check, such as whether the target kind exists; docs/controllers/history.md#policy-conditions). A bad policy is
// reported, never acted on. observedGeneration says which spec has been acted on: a new one is handed to
// `onNewSpec` first (a changed limit or live set may leave every parent's history with revisions to trim),
// and recorded only after.
import { Resources, isKubeError, type KubeApi, type ResolvedResource } from '../../shared/kube/index.ts';
import { FOREIGN_HISTORY, PolicyError, parsePolicy, type RevisionPolicy } from '../../shared/history/policy.ts';
import { foreignRevisions } from '../../shared/history/revisions.ts';
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
 * Another controller's history of the kind (kube-controller-manager's StatefulSet and DaemonSet controllers):
 * revisions controlled by an object of the kind that carry none of Outrigger's labels. One metadata list of
 * the cluster's revisions per check.
 */
async function foreignHistory(kube: KubeApi, policy: RevisionPolicy, target: ResolvedResource): Promise<string | undefined> {
  const listed = await kube.listMetadata(Resources.controllerRevisions);
  const [first, ...rest] = foreignRevisions(listed.items, target);
  if (!first) return undefined;
  const owner = first.metadata.ownerReferences?.find((o) => o.controller === true)?.name ?? '?';
  return (
    `RevisionPolicy ${policy.name}: another controller keeps the history of ${target.kind} (revision ${first.metadata.namespace}/${first.metadata.name} of ` +
    `${owner}${rest.length ? ` and ${rest.length} more` : ''}); set spec.foreignHistory: Coexist to keep Outrigger's beside it`
  );
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
    const foreign = policy.spec.foreignHistory === 'Coexist' ? undefined : await foreignHistory(kube, policy, target);
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
