// A namespaced CRD for tests and benchmarks that need a kind of their own: v1 only, a status subresource, and
// spec and status open to any field (the tests are about Outrigger, not about schemas).
// Cluster-scoped, or without the status subresource, when asked.
export function openCrd(
  group: string,
  kind: string,
  plural: string,
  opts: { scope?: 'Namespaced' | 'Cluster'; status?: boolean } = {},
): string {
  return `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: ${plural}.${group} }
spec:
  group: ${group}
  scope: ${opts.scope ?? 'Namespaced'}
  names: { kind: ${kind}, plural: ${plural}, singular: ${kind.toLowerCase()} }
  versions:
    - name: v1
      served: true
      storage: true
      ${opts.status === false ? '' : 'subresources: { status: {} }'}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: { type: object, x-kubernetes-preserve-unknown-fields: true }
            status: { type: object, x-kubernetes-preserve-unknown-fields: true }
`;
}
