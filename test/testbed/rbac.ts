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
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: "outrigger:controllers" }, { kind: ServiceAccount, name: mapper, namespace: outrigger-map-tests }]
`;
}

/**
 * A user (an author or tenant the test acts as, through impersonation) granted `rules` cluster-wide: a ClusterRole
 * and its binding, both named for the user. Applied again with other rules, it changes the user's grants.
 */
export function userGrant(user: string, rules: readonly string[]): string {
  return `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: ${user} }
rules:
${rules.map((r) => `  - ${r}`).join('\n')}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: ${user} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${user} }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: ${user} }]
`;
}

/** The ServiceAccount test MapControllers act as (docs/controllers/mapcontroller.md#identity-each-mapcontroller-acts-as-its-own-serviceaccount), with every controllersGrant. */
export const MAP_TEST_SERVICE_ACCOUNT = { namespace: 'outrigger-map-tests', name: 'mapper' };

/** The ServiceAccount, and a cluster admin's grant that lets Outrigger act as it. */
export const MAP_TEST_IDENTITY = `
apiVersion: v1
kind: Namespace
metadata: { name: outrigger-map-tests }
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: mapper
  namespace: outrigger-map-tests
  # Every test MapController and RevisionPolicy may act as it (docs/operations/security.md#serviceaccounts-a-definition-names).
  annotations: { outrigger.dev/allowed-controllers: "mapcontroller/*, revisionpolicy/*" }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: outrigger-impersonate-mapper, namespace: outrigger-map-tests }
rules: [{ apiGroups: [""], resources: ["serviceaccounts"], resourceNames: ["mapper"], verbs: ["get", "impersonate"] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: outrigger-impersonate-mapper, namespace: outrigger-map-tests }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: outrigger-impersonate-mapper }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: "outrigger:controllers" }]
`;

/**
 * The ServiceAccount, naming the definitions it serves (`consents`: its outrigger.dev/allowed-controllers
 * annotation; every one by default), and what a cluster admin grants Outrigger for it: impersonating it, and
 * nothing else.
 */
export function impersonatedAccount(
  ns: string,
  name: string,
  rules: readonly string[],
  consents = 'mapcontroller/*, revisionpolicy/*',
): string {
  return `
apiVersion: v1
kind: ServiceAccount
metadata: { name: ${name}, namespace: ${ns}, annotations: { outrigger.dev/allowed-controllers: "${consents}" } }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: outrigger-impersonate-${name}, namespace: ${ns} }
rules: [{ apiGroups: [""], resources: ["serviceaccounts"], resourceNames: ["${name}"], verbs: ["get", "impersonate"] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: outrigger-impersonate-${name}, namespace: ${ns} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: outrigger-impersonate-${name} }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: "outrigger:controllers" }]
${
  rules.length
    ? `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: ${ns}-${name} }
rules:
${rules.map((r) => `  - ${r}`).join('\n')}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: ${ns}-${name} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${ns}-${name} }
subjects: [{ kind: ServiceAccount, name: ${name}, namespace: ${ns} }]`
    : ''
}`;
}
