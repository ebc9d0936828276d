// A RevisionPolicy's Ready condition: what the handler found when it checked the policy (the parts the CRD
// schema cannot check, such as whether the target kind exists). A bad policy is reported, never acted on.
import { isKubeError, type KubeClient } from '../../shared/kube/index.ts';
import { PolicyError, parsePolicy } from '../../shared/history/policy.ts';
import { revisionPolicies, forgetPolicies } from './policies.ts';
import { resolveTarget } from './sync.ts';

export async function reportPolicy(kube: KubeClient, cluster: string, name: string): Promise<{ ready: boolean; message: string }> {
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
  try {
    const policy = parsePolicy(obj);
    await resolveTarget(kube, policy);
  } catch (err) {
    if (!(err instanceof PolicyError) && !(err instanceof Error && /cluster does not serve|serves no kind|cluster-scoped/.test(err.message))) throw err;
    ready = false;
    reason = err instanceof PolicyError ? 'InvalidPolicy' : 'UnknownKind';
    message = err.message;
  }
  const current = ((obj.status as { conditions?: Array<{ type: string; status: string; message?: string }> } | undefined)?.conditions ?? []).find((c) => c.type === 'Ready');
  const status = ready ? 'True' : 'False';
  if (current?.status !== status || current.message !== message) {
    await kube.patch(
      revisionPolicies,
      name,
      undefined,
      { status: { observedGeneration: obj.metadata.generation, conditions: [{ type: 'Ready', status, reason, message, lastTransitionTime: new Date().toISOString() }] } },
      'merge',
      { subresource: 'status' },
    );
  }
  return { ready, message };
}
