// What a Metacontroller CompositeController or DecoratorController needs beside it to run under Outrigger
// (docs/getting-started/from-metacontroller.md#moving-one-controller-at-a-time): the ServiceAccount it acts as, with
// its consent; the cluster admin's grant to impersonate it; the account's RBAC over the parent, child and related
// kinds for the verbs a pass uses; list and watch on those kinds for the forwarder and the router. Pure: manifests
// in, manifests out; printed by `outrigger migrate` (cli/migrate.ts).
import { ALLOWED_CONTROLLERS_ANNOTATION, consumerRef, type Consumer } from './identity.ts';
import {
  COMPOSITE_GROUP,
  COMPOSITE_VERSION,
  parseCompositeController,
  parseDecoratorController,
  type CompositeController,
  type DecoratorController,
  type MetaHook,
} from './composite/api.ts';
import { parseApiVersion, type KubeObject } from './kube/resource.ts';
import { webhookTarget, WebhookTargetError } from './hooks/target.ts';

/** The group Outrigger's controllers act in (cluster/rbac.yaml): it impersonates, lists for routing and watches. */
export const CONTROLLERS_GROUP = 'outrigger:controllers';

export interface MigrateOptions {
  /** The namespace of the ServiceAccount made for a definition that names none. */
  namespace: string;
  /** The in-cluster forwarder's ServiceAccount (deploy/forwarder/base). */
  forwarder: { namespace: string; name: string };
  /** Kinds a customize hook relates (the definition cannot say which): read by the account, watched by the forwarder. */
  related: ReadonlyArray<{ apiVersion: string; resource: string }>;
}

export const DEFAULT_MIGRATE_OPTIONS: MigrateOptions = {
  namespace: 'outrigger-system',
  forwarder: { namespace: 'outrigger-system', name: 'outrigger-forwarder' },
  related: [],
};

export interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** What a pass does to each kind (docs/controllers/compositecontroller.md, decoratorcontroller.md). */
export const VERBS = {
  /** Read each pass, listed by the resync, patched for the finalizer, labels, annotations and the related copy. */
  parent: ['get', 'list', 'watch', 'patch'],
  /** The answer's status, written as a JSON patch of the status subresource. */
  status: ['patch'],
  /**
   * Children name their parent with blockOwnerDeletion, which a cluster running the OwnerReferencesPermissionEnforcement
   * admission plugin allows only to whoever may update the parent's finalizers.
   */
  finalizers: ['update'],
  /** Listed, created, written (server-side apply or patch), adopted and released by patch, deleted. */
  child: ['get', 'list', 'watch', 'create', 'patch', 'delete'],
  /** A rolling update's revisions (apps/v1 ControllerRevisions in the parents' namespaces). */
  revisions: ['get', 'list', 'create', 'patch', 'delete'],
  /** A customize hook's rules: listed, or read by name. */
  related: ['get', 'list', 'watch'],
  /** Forwarder and router: the kinds' events, and the parents an orphan's or related object's change concerns. */
  watch: ['list', 'watch'],
  /** A hook inside the cluster is called through the apiserver's service proxy as the account. */
  proxy: ['create'],
} as const;

type Definition = CompositeController | DecoratorController;
type Account = { namespace: string; name: string };

/** The definitions among `docs` (other documents are left alone); a DefinitionError names a bad one. */
export function definitionsIn(docs: readonly unknown[]): KubeObject[] {
  return docs.filter(
    (d): d is KubeObject =>
      typeof d === 'object' &&
      d !== null &&
      (d as KubeObject).apiVersion === `${COMPOSITE_GROUP}/${COMPOSITE_VERSION}` &&
      ['CompositeController', 'DecoratorController'].includes((d as KubeObject).kind ?? ''),
  );
}

const parse = (o: KubeObject): Definition => (o.kind === 'CompositeController' ? parseCompositeController(o) : parseDecoratorController(o));

/** `pods`, `statefulsets.apps`: a resource as RBAC and kubectl name it. */
const groupOf = (apiVersion: string) => parseApiVersion(apiVersion).group;

/** Rules of the same group and verbs merged, in a stable order. */
export function mergeRules(rules: readonly Rule[]): Rule[] {
  const byKey = new Map<string, Rule>();
  for (const r of rules)
    for (const g of r.apiGroups) {
      const verbs = [...new Set(r.verbs)];
      const key = `${g}|${verbs.join(',')}`;
      const into = byKey.get(key) ?? { apiGroups: [g], resources: [], verbs };
      for (const res of r.resources) if (!into.resources.includes(res)) into.resources.push(res);
      byKey.set(key, into);
    }
  return [...byKey.values()];
}

const rule = (r: { apiVersion: string; resource: string }, verbs: readonly string[], sub = ''): Rule => ({
  apiGroups: [groupOf(r.apiVersion)],
  resources: [`${r.resource}${sub}`],
  verbs: [...verbs],
});

/** The kinds a definition serves (its parents, or the objects it decorates). */
function servedKinds(d: Definition): Array<{ apiVersion: string; resource: string }> {
  return d.kind === 'CompositeController' ? [d.parent] : d.resources;
}

/** The account's rules: what each pass of the definition does, as that account. */
export function accountRules(d: Definition, related: MigrateOptions['related']): Rule[] {
  const rolling = d.children.some((c) => c.rolling);
  return mergeRules([
    ...servedKinds(d).flatMap((k) => [rule(k, VERBS.parent), rule(k, VERBS.status, '/status'), rule(k, VERBS.finalizers, '/finalizers')]),
    ...d.children.map((c) => rule(c, VERBS.child)),
    ...(rolling ? [rule({ apiVersion: 'apps/v1', resource: 'controllerrevisions' }, VERBS.revisions)] : []),
    ...related.map((r) => rule(r, VERBS.related)),
  ]);
}

/** What the forwarder watches and the router lists for the definition, as Outrigger. */
export function watchRules(d: Definition, related: MigrateOptions['related']): Rule[] {
  return mergeRules([...servedKinds(d), ...d.children, ...related].map((k) => rule(k, VERBS.watch)));
}

/** The namespaces of the Services the definition's hooks call (each needs `create` on `services/proxy` there). */
export function hookNamespaces(d: Definition): string[] {
  const hooks = [d.hooks.sync, d.hooks.finalize, d.hooks.customize].filter((h): h is MetaHook => h !== undefined);
  const out = new Set<string>();
  for (const h of hooks) {
    if (!h.webhook) continue;
    try {
      const target = webhookTarget(h.webhook);
      if (target.kind === 'service') out.add(target.namespace);
    } catch (err) {
      // A hook Outrigger cannot call is the definition's own condition (HookRefused) once applied: nothing to grant.
      if (!(err instanceof WebhookTargetError)) throw err;
    }
  }
  return [...out].sort();
}

/** A name for the RBAC objects of one definition: `outrigger-compositecontroller-<name>`. */
const roleName = (d: Definition, what: string) => `outrigger-${what}-${d.kind.toLowerCase()}-${d.name}`.slice(0, 253);

const clusterRole = (name: string, rules: Rule[]): KubeObject => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name },
  rules,
});

type Subject = { kind: 'ServiceAccount'; name: string; namespace: string } | { apiGroup: string; kind: 'Group'; name: string };
const accountSubject = (a: Account): Subject => ({ kind: 'ServiceAccount', name: a.name, namespace: a.namespace });
const controllersSubject: Subject = { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: CONTROLLERS_GROUP };

const binding = (
  kind: 'ClusterRoleBinding' | 'RoleBinding',
  name: string,
  namespace: string | undefined,
  subjects: Subject[],
): KubeObject => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind,
  metadata: { name, ...(namespace ? { namespace } : {}) },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: kind === 'ClusterRoleBinding' ? 'ClusterRole' : 'Role', name },
  subjects,
});

const accountKey = (a: Account) => `${a.namespace}/${a.name}`;

/**
 * Everything Outrigger needs beside the definitions in `docs`, in the order `kubectl apply` takes it: each
 * definition that names no `serviceAccount` again, naming the one made for it (apply it after the definition
 * itself); each ServiceAccount once, consenting to every definition that acts as it; the impersonation grant per
 * account; per definition, the account's ClusterRole, the Role for its hooks' Service proxies, and list and watch
 * for the forwarder and the router. Throws a DefinitionError for a definition Outrigger would refuse.
 */
export function migration(docs: readonly unknown[], options: Partial<MigrateOptions> = {}): KubeObject[] {
  const opts = { ...DEFAULT_MIGRATE_OPTIONS, ...options };
  const found = definitionsIn(docs);
  if (!found.length) throw new Error('no CompositeController or DecoratorController (metacontroller.k8s.io/v1alpha1) in the input');
  const definitions = found.map((o) => ({ object: o, d: parse(o) }));
  const accountOf = (d: Definition): Account => d.serviceAccount ?? { namespace: opts.namespace, name: d.name };
  const consents = new Map<string, { account: Account; consumers: Consumer[] }>();
  for (const { d } of definitions) {
    const account = accountOf(d);
    const entry = consents.get(accountKey(account)) ?? { account, consumers: [] };
    entry.consumers.push({ kind: d.kind, name: d.name });
    consents.set(accountKey(account), entry);
  }
  const out: KubeObject[] = [];
  for (const { object, d } of definitions) if (!d.serviceAccount) out.push(withAccount(object, accountOf(d)));
  for (const { account, consumers } of consents.values()) out.push(...accountObjects(account, consumers));
  for (const { d } of definitions) out.push(...definitionGrants(d, accountOf(d), opts));
  return out;
}

/** The definition as written, naming its ServiceAccount: only what the manifest holds, nothing a server set. */
function withAccount(object: KubeObject, account: Account): KubeObject {
  const { status: _status, ...rest } = object as KubeObject & { status?: unknown };
  const { uid: _uid, resourceVersion: _rv, generation: _g, creationTimestamp: _c, managedFields: _m, ...metadata } = rest.metadata;
  return { ...rest, metadata, spec: { ...(rest.spec as object), serviceAccount: account } } as KubeObject;
}

/** The ServiceAccount with its consent, and the cluster admin's grant that lets Outrigger act as it. */
function accountObjects(account: Account, consumers: readonly Consumer[]): KubeObject[] {
  const name = `outrigger-impersonate-${account.name}`;
  return [
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: {
        name: account.name,
        namespace: account.namespace,
        annotations: { [ALLOWED_CONTROLLERS_ANNOTATION]: consumers.map(consumerRef).join(', ') },
      },
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace: account.namespace },
      rules: [{ apiGroups: [''], resources: ['serviceaccounts'], resourceNames: [account.name], verbs: ['get', 'impersonate'] }],
    },
    binding('RoleBinding', name, account.namespace, [controllersSubject]),
  ];
}

/** The account's grants for one definition, its hooks' Service proxies, and what Outrigger watches for it. */
function definitionGrants(d: Definition, account: Account, opts: MigrateOptions): KubeObject[] {
  const acts = roleName(d, 'account');
  const watches = roleName(d, 'watch');
  const proxies = hookNamespaces(d).flatMap((namespace) => {
    const name = roleName(d, 'hooks');
    return [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name, namespace },
        rules: [{ apiGroups: [''], resources: ['services/proxy'], verbs: [...VERBS.proxy] }],
      },
      binding('RoleBinding', name, namespace, [accountSubject(account)]),
    ];
  });
  return [
    clusterRole(acts, accountRules(d, opts.related)),
    binding('ClusterRoleBinding', acts, undefined, [accountSubject(account)]),
    ...proxies,
    clusterRole(watches, watchRules(d, opts.related)),
    binding('ClusterRoleBinding', watches, undefined, [controllersSubject, { kind: 'ServiceAccount', ...opts.forwarder }]),
  ];
}
