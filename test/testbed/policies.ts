// The RevisionPolicies the integration tests share. Policies are cluster-scoped, so every test file applies
// the same documents (server-side apply makes that idempotent) instead of its own variant.
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
