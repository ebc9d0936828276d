// How an object Outrigger ships compares with the cluster's copy, for `outrigger doctor` (findings.ts): a CRD's
// versions field by field, and RBAC as its authorizer reads it (the permissions a role grants, what a binding binds).
import type { KubeObject } from '../../shared/kube/index.ts';

/** An object Outrigger ships (its file, relative to the checkout) and the cluster's copy, if any. */
export interface Shipped {
  file: string;
  object: KubeObject;
  installed: KubeObject | undefined;
}

/**
 * Where an installed CRD falls short of the shipped one, or undefined when it is current: every version the
 * shipped one declares must be there with every field it sets equal (the apiserver adds fields, such as names'
 * listKind, which are left out of the comparison).
 */
export function crdDifference(shipped: KubeObject, installed: KubeObject): string | undefined {
  type Version = Record<string, unknown> & { name: string };
  const versions = (o: KubeObject) => ((o.spec as { versions?: Version[] } | undefined)?.versions ?? []) as Version[];
  const have = new Map(versions(installed).map((v) => [v.name, v]));
  for (const v of versions(shipped)) {
    const there = have.get(v.name);
    if (!there) return `spec.versions[${v.name}]: not served by the installed CRD`;
    for (const [key, value] of Object.entries(v)) {
      const path = firstDifference(value, there[key], `spec.versions[${v.name}].${key}`);
      if (path) return path;
    }
  }
  return undefined;
}

/** The first path at which `actual` differs from `expected` (both JSON), and how. */
export function firstDifference(expected: unknown, actual: unknown, path: string): string | undefined {
  if (expected === actual) return undefined;
  if (actual === undefined) return `${path}: absent in the cluster`;
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const differs = () => `${path}: ${JSON.stringify(actual)} in the cluster, ${JSON.stringify(expected)} in the manifest`;
  if (isObject(expected) && isObject(actual)) {
    for (const key of new Set([...Object.keys(expected), ...Object.keys(actual)])) {
      if (!(key in expected)) return `${path}.${key}: in the cluster, not in the manifest`;
      const d = firstDifference(expected[key], actual[key], `${path}.${key}`);
      if (d) return d;
    }
    return undefined;
  }
  if (Array.isArray(expected) && Array.isArray(actual)) {
    if (expected.length !== actual.length) return differs();
    for (const [i, e] of expected.entries()) {
      const d = firstDifference(e, actual[i], `${path}[${i}]`);
      if (d) return d;
    }
    return undefined;
  }
  return differs();
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** One permission: a verb on a resource (of a group, maybe by name) or on a non-resource URL. */
type Permission = { verb: string; group: string; resource: string; name: string | undefined } | { verb: string; url: string };

function permissions(rule: PolicyRule): Permission[] {
  const verbs = rule.verbs ?? [];
  if (rule.nonResourceURLs?.length) return rule.nonResourceURLs.flatMap((url) => verbs.map((verb) => ({ verb, url })));
  const names = rule.resourceNames?.length ? rule.resourceNames : [undefined];
  return (rule.apiGroups ?? []).flatMap((group) =>
    (rule.resources ?? []).flatMap((resource) => names.flatMap((name) => verbs.map((verb) => ({ verb, group, resource, name })))),
  );
}

const covers = (values: string[] | undefined, value: string) => (values ?? []).some((v) => v === '*' || v === value);

/** Whether `rule` grants `p`, as RBAC's authorizer decides (wildcards, resource names, URL prefixes ending in *). */
export function allows(rule: PolicyRule, p: Permission): boolean {
  if (!covers(rule.verbs, p.verb)) return false;
  if ('url' in p)
    return (rule.nonResourceURLs ?? []).some((u) => u === p.url || u === '*' || (u.endsWith('*') && p.url.startsWith(u.slice(0, -1))));
  if (!covers(rule.apiGroups, p.group) || !covers(rule.resources, p.resource)) return false;
  if (!rule.resourceNames?.length) return true;
  return p.name !== undefined && rule.resourceNames.includes(p.name);
}

/** The shipped rules' permissions that no installed rule grants, as a person reads them. */
export function missingPermissions(shipped: readonly PolicyRule[], installed: readonly PolicyRule[]): string[] {
  return shipped
    .flatMap(permissions)
    .filter((p) => !installed.some((r) => allows(r, p)))
    .map((p) =>
      'url' in p
        ? `${p.verb} ${p.url}`
        : `${p.verb} ${p.resource}${p.group ? `.${p.group}` : ''}${p.name === undefined ? '' : ` named ${p.name}`}`,
    );
}

export interface Binding {
  roleRef?: { kind?: string; name?: string };
  subjects?: Array<{ kind?: string; name?: string; namespace?: string }>;
}

export const label = (o: KubeObject) => `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;

/** What is wrong with an RBAC object (or a ServiceAccount) in the cluster, or undefined when it is as shipped. */
export function rbacProblem(r: Shipped): string | undefined {
  const o = r.object;
  if (!r.installed) return `absent (${r.file})`;
  if (o.kind === 'ClusterRole' || o.kind === 'Role') {
    const rules = (x: KubeObject) => ((x as { rules?: PolicyRule[] }).rules ?? []) as PolicyRule[];
    const missing = missingPermissions(rules(o), rules(r.installed));
    return missing.length ? `lacks ${missing.join(', ')} (${r.file})` : undefined;
  }
  if (o.kind !== 'ClusterRoleBinding' && o.kind !== 'RoleBinding') return undefined;
  const want = o as Binding;
  const have = r.installed as Binding;
  if (want.roleRef?.kind !== have.roleRef?.kind || want.roleRef?.name !== have.roleRef?.name)
    return `binds ${have.roleRef?.kind} ${have.roleRef?.name}, not ${want.roleRef?.kind} ${want.roleRef?.name}`;
  const absent = (want.subjects ?? []).filter(
    (s) => !(have.subjects ?? []).some((h) => h.kind === s.kind && h.name === s.name && (h.namespace ?? '') === (s.namespace ?? '')),
  );
  return absent.length
    ? `does not bind ${absent.map((s) => `${s.kind} ${s.namespace ? `${s.namespace}/` : ''}${s.name}`).join(', ')} (${r.file})`
    : undefined;
}
