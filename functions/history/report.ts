// A RevisionPolicy's Ready condition: what the handler found when it checked the policy (the parts the CRD
// schema cannot check, such as whether the target kind exists). A bad policy is reported, never acted on.
// observedGeneration says which spec has been acted on: a new one is handed to `onNewSpec` first (a changed
// limit or live set may leave every parent's history with revisions to trim), and recorded only after.
import { isKubeError, type KubeClient } from '../../shared/kube/index.ts';
import { PolicyError, parsePolicy, type RevisionPolicy } from '../../shared/history/policy.ts';
import { revisionPolicies, forgetPolicies } from './policies.ts';
import { resolveTarget } from './sync.ts';

export async function reportPolicy(kube: KubeClient, cluster: string, name: string, onNewSpec?: (policy: RevisionPolicy) => Promise<void>): Promise<{ ready: boolean; message: string }> {
  let obj;
  try {
    obj = await kube.get(revisionPolicies, name);
  } catch (err) {
    if (isKubeError(err, 'NotFound')) return { ready: false, message: 'deleted' };
    throw err;
  }
  forgetPolicies(cluster);
  let ready = true;
  let reason = 'Valid';
  let message = 'the policy is in effect';
  let policy: RevisionPolicy | undefined;
  try {
    policy = parsePolicy(obj);
    await resolveTarget(kube, policy);
  } catch (err) {
    policy = undefined;
    if (!(err instanceof PolicyError) && !(err instanceof Error && /cluster does not serve|serves no kind|cluster-scoped/.test(err.message))) throw err;
    ready = false;
    reason = err instanceof PolicyError ? 'InvalidPolicy' : 'UnknownKind';
    message = err.message;
  }
  const observed = obj.status as { observedGeneration?: number; conditions?: Array<{ type: string; status: string; message?: string; lastTransitionTime?: string }> } | undefined;
  const current = (observed?.conditions ?? []).find((c) => c.type === 'Ready');
  const status = ready ? 'True' : 'False';
  const newSpec = observed?.observedGeneration !== obj.metadata.generation;
  if (policy && newSpec) await onNewSpec?.(policy);
  if (current?.status !== status || current.message !== message || newSpec) {
    const lastTransitionTime = current?.status === status && current.lastTransitionTime ? current.lastTransitionTime : new Date().toISOString();
    await kube.patch(
      revisionPolicies,
      name,
      undefined,
      { status: { observedGeneration: obj.metadata.generation, conditions: [{ type: 'Ready', status, reason, message, lastTransitionTime }] } },
      'merge',
      { subresource: 'status' },
    );
  }
  return { ready, message };
}
