// The RevisionPolicies the integration tests share. Policies are cluster-scoped, so every test file applies
// the same documents (server-side apply makes that idempotent) instead of its own variant.
import { forgetPolicies, listPolicies, policyFor, revisionPolicies } from '../../functions/history/policies.ts';
import type { RevisionPolicy } from '../../shared/history/policy.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import type { KubeApi } from '../../shared/kube/index.ts';
import { adminClient, eventually } from './index.ts';
export const STATEFULSET_POLICY = `
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: statefulsets }
spec:
  target: { apiVersion: apps/v1, kind: StatefulSet }
  targetState: [spec.template]
  revisionHistoryLimit: 10
  generated: { apiVersion: v1, kind: Pod }
  statusRevisionPaths: [status.currentRevision, status.updateRevision]
`;

export const DAEMONSET_POLICY = `
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: daemonsets }
spec:
  target: { apiVersion: apps/v1, kind: DaemonSet }
  targetState: [spec.template]
  generated: { apiVersion: v1, kind: Pod }
`;

/**
 * The shared StatefulSet policy once it is in effect. The files share the bed two at a time, and another file's
 * runtime may be checking the policy when this one applies it; a policy another file's objects put out of effect
 * (ForeignHistory from a revision left controlled without Outrigger's labels) is named in the error.
 */
export async function statefulSetPolicy(kube: KubeApi, cluster = 'it'): Promise<RevisionPolicy> {
  await applyManifests(adminClient(), STATEFULSET_POLICY);
  try {
    return await eventually(async () => {
      forgetPolicies(cluster);
      return policyFor(await listPolicies(kube, cluster), 'apps', 'StatefulSet');
    }, 30_000);
  } catch {
    const { status } = await adminClient().get(revisionPolicies, { name: 'statefulsets' });
    throw new Error(`the shared statefulsets policy is not in effect: ${JSON.stringify(status)}`);
  }
}
