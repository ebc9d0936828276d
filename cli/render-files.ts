// The files `outrigger render` reads (cli/render.ts; docs/reference/cli.md#outrigger-render): objects from YAML
// or JSON, and the resources a controller names resolved without a cluster, from CustomResourceDefinitions given
// and a table of built-in ones.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { loadAll } from 'js-yaml';
import { parseApiVersion, type KubeObject, type ResolvedResource } from '../shared/kube/index.ts';

/** A usage or input problem: printed as it is, naming the file or field at fault. */
export class RenderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RenderError';
  }
}

/**
 * Built-in resources a controller names most, as discovery serves them; a resource not here, nor in a given
 * CustomResourceDefinition, is refused with the fix (the parent's is also taken from the parent's file).
 */
const BUILT_IN: ReadonlyArray<readonly [apiVersion: string, resource: string, kind: string, namespaced: boolean]> = [
  ['v1', 'pods', 'Pod', true],
  ['v1', 'services', 'Service', true],
  ['v1', 'configmaps', 'ConfigMap', true],
  ['v1', 'secrets', 'Secret', true],
  ['v1', 'serviceaccounts', 'ServiceAccount', true],
  ['v1', 'persistentvolumeclaims', 'PersistentVolumeClaim', true],
  ['v1', 'endpoints', 'Endpoints', true],
  ['v1', 'namespaces', 'Namespace', false],
  ['v1', 'persistentvolumes', 'PersistentVolume', false],
  ['v1', 'nodes', 'Node', false],
  ['apps/v1', 'deployments', 'Deployment', true],
  ['apps/v1', 'statefulsets', 'StatefulSet', true],
  ['apps/v1', 'daemonsets', 'DaemonSet', true],
  ['apps/v1', 'replicasets', 'ReplicaSet', true],
  ['apps/v1', 'controllerrevisions', 'ControllerRevision', true],
  ['batch/v1', 'jobs', 'Job', true],
  ['batch/v1', 'cronjobs', 'CronJob', true],
  ['networking.k8s.io/v1', 'ingresses', 'Ingress', true],
  ['networking.k8s.io/v1', 'networkpolicies', 'NetworkPolicy', true],
  ['policy/v1', 'poddisruptionbudgets', 'PodDisruptionBudget', true],
  ['autoscaling/v2', 'horizontalpodautoscalers', 'HorizontalPodAutoscaler', true],
  ['coordination.k8s.io/v1', 'leases', 'Lease', true],
  ['rbac.authorization.k8s.io/v1', 'roles', 'Role', true],
  ['rbac.authorization.k8s.io/v1', 'rolebindings', 'RoleBinding', true],
  ['rbac.authorization.k8s.io/v1', 'clusterroles', 'ClusterRole', false],
  ['rbac.authorization.k8s.io/v1', 'clusterrolebindings', 'ClusterRoleBinding', false],
];

/**
 * An object written by hand has no uid, which every object a hook is sent has: it gets one made from its kind,
 * namespace and name (a uuid's shape), the same each run, that ControllerRefs and generated selectors name.
 */
function withUid(o: KubeObject): KubeObject {
  if (o.metadata.uid) return o;
  const h = createHash('sha256')
    .update(`${o.kind ?? ''}/${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`)
    .digest('hex');
  const uid = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
  return { ...o, metadata: { ...o.metadata, uid } };
}

export interface Loaded {
  object: KubeObject;
  /** `<file>` or `<file> document <n>`, for messages. */
  where: string;
}

/** A file's documents, YAML or JSON, empty ones included (messages number them). */
export async function loadDocuments(file: string): Promise<unknown[]> {
  let text;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new RenderError(`${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    return loadAll(text);
  } catch (err) {
    throw new RenderError(`${file}: is not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** Every object of a file: several documents, a List's items each. */
export async function loadObjects(file: string): Promise<Loaded[]> {
  const docs = await loadDocuments(file);
  const out: Loaded[] = [];
  docs.forEach((doc, i) => {
    if (doc === null || doc === undefined) return;
    const where = docs.length > 1 ? `${file} document ${i + 1}` : file;
    const items =
      isObject(doc) && typeof doc.kind === 'string' && doc.kind.endsWith('List') && Array.isArray(doc.items) ? doc.items : [doc];
    items.forEach((item: unknown, j) => {
      const at = items.length > 1 || items[0] !== doc ? `${where} item ${j + 1}` : where;
      out.push({ object: kubeObject(item, at), where: at });
    });
  });
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function kubeObject(v: unknown, where: string): KubeObject {
  if (!isObject(v)) throw new RenderError(`${where}: is not an object`);
  const missing = [
    typeof v.apiVersion === 'string' && v.apiVersion ? undefined : 'apiVersion',
    typeof v.kind === 'string' && v.kind ? undefined : 'kind',
    isObject(v.metadata) && typeof v.metadata.name === 'string' && v.metadata.name ? undefined : 'metadata.name',
  ].filter(Boolean);
  if (missing.length) throw new RenderError(`${where}: is not a Kubernetes object: it has no ${missing.join(', ')}`);
  return withUid(v as unknown as KubeObject);
}

export interface Crd {
  group: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  versions: string[];
}

export function crdOf({ object, where }: Loaded): Crd {
  const spec = (object.spec ?? {}) as {
    group?: string;
    scope?: string;
    names?: { plural?: string; kind?: string };
    versions?: Array<{ name?: string }>;
  };
  if (!spec.group || !spec.names?.plural || !spec.names.kind)
    throw new RenderError(`${where}: CustomResourceDefinition ${object.metadata.name ?? ''} has no spec.group, names.plural or names.kind`);
  return {
    group: spec.group,
    plural: spec.names.plural,
    kind: spec.names.kind,
    namespaced: spec.scope !== 'Cluster',
    versions: (spec.versions ?? []).map((v) => v.name ?? ''),
  };
}

/** A resource rule's kind and scope, as discovery would answer, from the CRDs given or the built-in table. */
export function resolveOffline(
  rule: { apiVersion: string; resource: string },
  field: string,
  crds: readonly Crd[],
): ResolvedResource | undefined {
  const { group, version } = parseApiVersion(rule.apiVersion);
  const crd = crds.find((c) => c.group === group && c.plural === rule.resource);
  if (crd) {
    if (!crd.versions.includes(version))
      throw new RenderError(`${field}: the CustomResourceDefinition of ${rule.resource}.${group} serves no version ${version}`);
    return { group, version, resource: rule.resource, kind: crd.kind, namespaced: crd.namespaced };
  }
  const known = BUILT_IN.find(([v, r]) => v === rule.apiVersion && r === rule.resource);
  return known && { group, version, resource: rule.resource, kind: known[2], namespaced: known[3] };
}

export function unresolved(rule: { apiVersion: string; resource: string }, field: string): RenderError {
  return new RenderError(
    `${field}: ${rule.apiVersion} ${rule.resource} is neither a built-in resource render knows nor named by a CustomResourceDefinition given: pass its CRD with --crd`,
  );
}
