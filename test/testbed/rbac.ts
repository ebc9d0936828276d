// What a test or benchmark grants Outrigger's controllers (the group its identity is in) for a kind of its own,
// as a user would for a real one: a ClusterRole with these rules, bound to `outrigger:controllers`.
export function controllersGrant(name: string, rules: readonly string[]): string {
  return `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: ${name} }
rules:
${rules.map((r) => `  - ${r}`).join('\n')}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: ${name} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${name} }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: "outrigger:controllers" }]
`;
}
