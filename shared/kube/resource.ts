// Resources are addressed by group/version/resource so that custom resources and built-ins go through the
// same code. Paths follow the apiserver's REST layout: core ("" group) under /api, every other under /apis.

export interface GVR {
  readonly group: string;
  readonly version: string;
  /** Lower-case plural, e.g. `controllerrevisions`. */
  readonly resource: string;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string | null;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  [field: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface KubeList<T extends KubeObject = KubeObject> {
  apiVersion?: string;
  kind?: string;
  metadata: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  items: T[];
}

export function gvr(group: string, version: string, resource: string): GVR {
  return { group, version, resource };
}

export function apiVersionOf(r: Pick<GVR, 'group' | 'version'>): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}

/** Splits `apps/v1` or `v1` into group and version. */
export function parseApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? { group: '', version: apiVersion } : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

export function groupVersionPath(r: Pick<GVR, 'group' | 'version'>): string {
  return r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
}

/**
 * The REST path of a collection (no name) or an object. `namespace` undefined means cluster-scoped, or, for a
 * collection of a namespaced resource, all namespaces.
 */
export function resourcePath(
  r: GVR,
  opts: { namespace?: string | undefined; name?: string | undefined; subresource?: string | undefined } = {},
): string {
  let path = groupVersionPath(r);
  if (opts.namespace) path += `/namespaces/${encodeURIComponent(opts.namespace)}`;
  path += `/${r.resource}`;
  if (opts.name !== undefined) {
    if (opts.name === '') throw new Error(`an object of ${r.resource} needs a name`);
    path += `/${encodeURIComponent(opts.name)}`;
    if (opts.subresource) path += `/${opts.subresource}`;
  }
  return path;
}

export function gvrString(r: GVR): string {
  return r.group === '' ? `${r.resource}.${r.version}` : `${r.resource}.${r.version}.${r.group}`;
}

// Well-known resources used across Outrigger.
export const Resources = {
  namespaces: gvr('', 'v1', 'namespaces'),
  pods: gvr('', 'v1', 'pods'),
  serviceAccounts: gvr('', 'v1', 'serviceaccounts'),
  controllerRevisions: gvr('apps', 'v1', 'controllerrevisions'),
  leases: gvr('coordination.k8s.io', 'v1', 'leases'),
  customResourceDefinitions: gvr('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'),
} as const;

/**
 * Orders two resourceVersions of objects of one resource, as apimachinery's CompareResourceVersion does
 * (https://github.com/kubernetes/kubernetes/blob/v1.35.4/staging/src/k8s.io/apimachinery/pkg/util/resourceversion/resourceversion.go):
 * both must be positive decimal integers without leading zeros, then the longer is the greater and equal lengths
 * compare by their digits. Undefined when either is not of that form: nothing is known of their order.
 */
export function compareResourceVersions(a: string | undefined, b: string | undefined): -1 | 0 | 1 | undefined {
  const wellFormed = (v: string | undefined): v is string => v !== undefined && /^[1-9][0-9]*$/.test(v);
  if (!wellFormed(a) || !wellFormed(b)) return undefined;
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
