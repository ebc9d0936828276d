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

interface Condition {
  type: string;
  status: string;
  reason?: string | undefined;
  message?: string | undefined;
  lastTransitionTime?: string;
}

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
 * Another controller's history of the kind (kube-controller-manager's StatefulSet and DaemonSet controllers, or a
 * team's own controller in its namespace): revisions controlled by an object of the kind that carry none of
 * Outrigger's labels. One metadata list of the cluster's revisions per check. It is reported, never a reason to
 * put the policy out of effect: each parent with such a revision is left alone by its own sync, so that a
 * tenant's revision of its own parent cannot stop the policy in every other namespace
 * (docs/controllers/history.md#coexistence).
 */
async function foreignHistory(kube: KubeApi, policy: RevisionPolicy, target: ResolvedResource): Promise<Condition> {
  if (policy.spec.foreignHistory === 'Coexist')
    return {
      type: FOREIGN_HISTORY,
      status: 'False',
      reason: 'Coexist',
      message: "Outrigger's revisions are kept beside any other controller's",
    };
  const listed = await kube.listMetadata(Resources.controllerRevisions);
  const foreign = foreignRevisions(listed.items, target);
  const parents = new Set(foreign.map((r) => r.metadata.ownerReferences?.find((o) => o.controller === true)?.uid));
  const [first] = foreign;
  if (!first)
    return { type: FOREIGN_HISTORY, status: 'False', reason: 'None', message: `no other controller keeps a ${target.kind}'s history` };
  const owner = first.metadata.ownerReferences?.find((o) => o.controller === true)?.name ?? '?';
  return {
    type: FOREIGN_HISTORY,
    status: 'True',
    reason: FOREIGN_HISTORY,
    message:
      `another controller keeps the history of ${parents.size} ${target.kind}${parents.size === 1 ? '' : 's'} (revision ` +
      `${first.metadata.namespace}/${first.metadata.name} of ${owner}${foreign.length > 1 ? ` and ${foreign.length - 1} more` : ''}); ` +
      `Outrigger leaves their history alone; set spec.foreignHistory: Coexist to keep Outrigger's beside it`,
  };
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
  let foreign: Condition | undefined;
  try {
    policy = parsePolicy(obj);
    const { target, generated } = await resolvePolicy(kube, policy);
    if (policy.spec.serviceAccount) await checkReader(kube, policy, [target, ...(generated ? [generated] : [])]);
    foreign = await foreignHistory(kube, policy, target);
    // One policy per kind: the one created first holds it (listPolicies); another says so rather than look in effect.
    const holder = policyFor(await listPolicies(kube, cluster), target.group, target.kind);
    if (holder && holder.name !== policy.name)
      throw new PolicyProblem(
        TARGET_KIND_TAKEN,
        `RevisionPolicy ${policy.name}: RevisionPolicy ${holder.name}, created first, keeps the history of ${target.kind}; this one is not in effect while it exists`,
      );
  } catch (err) {
    policy = undefined;
    foreign = undefined;
    if (err instanceof PolicyError) reason = 'InvalidPolicy';
    else if (err instanceof PolicyProblem) reason = err.reason;
    else throw err;
    message = err.message;
  }
  const ready = policy !== undefined;
  const observed = obj.status as { observedGeneration?: number; conditions?: Condition[] } | undefined;
  const was = (type: string) => (observed?.conditions ?? []).find((c) => c.type === type);
  const status = ready ? 'True' : 'False';
  const conditions = [{ type: 'Ready', status, reason, message }, ...(foreign ? [foreign] : [])].map((c) => {
    const before = was(c.type);
    const lastTransitionTime =
      before?.status === c.status && before.lastTransitionTime ? before.lastTransitionTime : new Date().toISOString();
    return { ...c, lastTransitionTime };
  });
  const newSpec = observed?.observedGeneration !== obj.metadata.generation;
  if (policy && newSpec) await onNewSpec?.(policy);
  const changed =
    conditions.length !== (observed?.conditions ?? []).length ||
    conditions.some((c) => {
      const before = was(c.type);
      return before?.status !== c.status || before.reason !== c.reason || before.message !== c.message;
    });
  if (changed || newSpec) {
    await kube.patch(
      revisionPolicies,
      { name, subresource: 'status' },
      { status: { observedGeneration: obj.metadata.generation, conditions } },
      'merge',
    );
    // The verdict is part of what the policy set means (a refused policy is not in effect).
    forgetPolicies(cluster);
  }
  return { ready, reason, message, policy, newSpec };
}
