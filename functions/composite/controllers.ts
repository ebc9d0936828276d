// The CompositeControllers and DecoratorControllers of a cluster, resolved against discovery, checked for the
// ServiceAccount each acts as, and what they mean to the router: a CompositeController makes its parent kind a
// controller kind whose children route by ControllerRef and whose orphans route by the parent's selector; a
// DecoratorController makes each of its resources one whose attachments route by ControllerRef
// (docs/controllers/compositecontroller.md).
import {
  gvr,
  hasSubresource,
  isKubeError,
  resolveResource,
  type GVR,
  type KubeApi,
  type KubeClient,
  type KubeObject,
  type ResolvedResource,
} from '../../shared/kube/index.ts';
import {
  COMPOSITE_GROUP,
  COMPOSITE_VERSION,
  compositeFinalizer,
  CONTROLLER_UID_LABEL,
  DefinitionError,
  parseCompositeController,
  parseDecoratorController,
  type CompositeController,
  type DecoratorController,
  type ResourceSelectorRule,
} from '../../shared/composite/api.ts';
import { decorates, type ChildKind } from '../../shared/composite/plan.ts';
import { parentAsks, recordedKinds } from '../../shared/composite/related.ts';
import { SelectorError, type ControllerKind, type LabelSelector } from '../../shared/ownership/index.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';
import type { CallOptions } from '../../shared/hooks/index.ts';
import { firstHolderFirst } from '../../shared/identity.ts';
import { clusterCache, type ClusterCache } from '../cluster-cache.ts';
import { METACONTROLLER_TARGET } from '../metacontroller/target.ts';
import { listServedDefinitions, specChanged, writeDefinitionReady, type ControllerSource } from '../controller-source.ts';
import { actingAs as actingAsAccount, IdentityProblem, refusedNeeds, resourceName } from '../identity.ts';

export const compositeControllers = gvr(COMPOSITE_GROUP, COMPOSITE_VERSION, 'compositecontrollers');
export const decoratorControllers = gvr(COMPOSITE_GROUP, COMPOSITE_VERSION, 'decoratorcontrollers');
/**
 * Its parents' requests go to the map function's queue, served there beside MapController parents (a sync target
 * of its own would add a queue, a dead-letter queue and an access entry per cluster: docs/controllers/compositecontroller.md#what-is-left).
 */
export const COMPOSITE_TARGET = METACONTROLLER_TARGET;

interface Resolved {
  serviceAccount: { namespace: string; name: string };
  /** The child (attachment) kinds, each with its update method. */
  kinds: ChildKind[];
}
export type ResolvedComposite = CompositeController &
  Resolved & {
    parentResource: ResolvedResource;
    /** Whether the parent kind has a status subresource; without one, status is written on the object. */
    parentStatus: boolean;
  };
export type ResolvedDecorator = DecoratorController &
  Resolved & { targets: Array<ResolvedResource & { rule: ResourceSelectorRule; status: boolean }> };
export type ResolvedDefinition = ResolvedComposite | ResolvedDecorator;

export interface CompositeSet {
  composites: ResolvedComposite[];
  decorators: ResolvedDecorator[];
  invalid: Array<{ kind: string; name: string; reason: string; error: string }>;
  /** Every definition as listed, for its Ready condition. */
  objects: Array<{ resource: GVR; object: KubeObject }>;
}

/** The process's definitions per cluster; tests make caches of their own. */
// Every definition acts as a ServiceAccount, whose consent is not watched: only the empty set is kept until the
// resync where the definitions are watched (functions/cluster-cache.ts), as the MapControllers' is.
export const compositeCache = clusterCache<CompositeSet>(5_000, { watchable: (set) => set.objects.length === 0 });

/**
 * The cluster's CompositeControllers and DecoratorControllers this deployment serves: those its `controllerSelector`
 * matches, or every one without it (listServedDefinitions; docs/reference/configuration.md#clustersjson).
 */
export async function listCompositeSet(
  kube: KubeClient,
  cluster: string,
  cache: ClusterCache<CompositeSet> = compositeCache,
  controllerSelector?: string | undefined,
): Promise<CompositeSet> {
  return cache.get(cluster, async () => {
    const [cs, ds] = await Promise.all([
      listOrNone(kube, compositeControllers, controllerSelector),
      listOrNone(kube, decoratorControllers, controllerSelector),
    ]);
    const out: CompositeSet = {
      composites: [],
      decorators: [],
      invalid: [],
      objects: [
        ...cs.map((object) => ({ resource: compositeControllers, object })),
        ...ds.map((object) => ({ resource: decoratorControllers, object })),
      ],
    };
    const failed = (kind: string, o: KubeObject, err: unknown) =>
      out.invalid.push({
        kind,
        name: o.metadata.name ?? '',
        reason: err instanceof DefinitionError ? err.reason : 'InvalidSpec',
        error: (err as Error).message,
      });
    for (const o of cs.sort(firstHolderFirst)) {
      try {
        const cc = await resolveComposite(kube, parseCompositeController(o));
        // The first created holds a parent kind: a second would fight it over the same children.
        const earlier = out.composites.find(
          (v) => v.parentResource.group === cc.parentResource.group && v.parentResource.kind === cc.parentResource.kind,
        );
        if (earlier)
          throw new DefinitionError(
            cc.kind,
            cc.name,
            `parent kind ${cc.parentResource.kind} is already controlled by CompositeController ${earlier.name}, created before it`,
            'ParentKindTaken',
          );
        out.composites.push(cc);
      } catch (err) {
        failed('CompositeController', o, err);
      }
    }
    for (const o of ds.sort(firstHolderFirst)) {
      try {
        out.decorators.push(await resolveDecorator(kube, parseDecoratorController(o)));
      } catch (err) {
        failed('DecoratorController', o, err);
      }
    }
    return out;
  });
}

/** A cluster without the CRD has none (the CRDs are optional until a definition is applied). */
async function listOrNone(kube: KubeClient, r: GVR, controllerSelector: string | undefined): Promise<KubeObject[]> {
  try {
    return await listServedDefinitions(kube, r, controllerSelector);
  } catch (err) {
    if (isKubeError(err, 'NotFound')) return [];
    throw err;
  }
}

/** The client a definition's reads and writes go through: its ServiceAccount's. */
export function actingAs(kube: KubeClient, d: ResolvedDefinition): KubeClient {
  return actingAsAccount(kube, d.serviceAccount);
}

/** Whom a hook call is for: its signing key's, and what a Lambda hook's binding is matched against. */
export function callerOf(cluster: string, d: ResolvedDefinition): NonNullable<CallOptions['controller']> {
  return { cluster, uid: d.uid, kind: d.kind, name: d.name, namespace: d.serviceAccount.namespace };
}

async function resolveCommon(kube: KubeClient, d: CompositeController | DecoratorController): Promise<Resolved> {
  if (!d.serviceAccount)
    throw new DefinitionError(
      d.kind,
      d.name,
      `spec.serviceAccount is not set: a ${d.kind} acts only as a ServiceAccount of its own`,
      'NoServiceAccount',
    );
  const field = d.kind === 'CompositeController' ? 'spec.childResources' : 'spec.attachments';
  const kinds = await Promise.all(
    d.children.map(async (c, i) => ({
      ...(await one(kube, d, c, `${field}[${i}]`)),
      method: c.method,
      ...(c.rolling ? { rolling: c.rolling } : {}),
    })),
  );
  return { serviceAccount: d.serviceAccount, kinds };
}

async function one(
  kube: KubeClient,
  d: CompositeController | DecoratorController,
  r: { apiVersion: string; resource: string },
  field: string,
): Promise<ResolvedResource> {
  try {
    return await resolveResource(kube, r.apiVersion, r.resource);
  } catch (err) {
    throw new DefinitionError(d.kind, d.name, `${field}: ${(err as Error).message}`, 'UnresolvableResource');
  }
}

async function resolveComposite(kube: KubeClient, cc: CompositeController): Promise<ResolvedComposite> {
  const common = await resolveCommon(kube, cc);
  const parentResource = await one(kube, cc, cc.parent, 'spec.parentResource');
  if (!parentResource.namespaced && common.kinds.some((k) => k.rolling))
    throw new DefinitionError(
      cc.kind,
      cc.name,
      `rolling updates need a namespaced parent (its revisions are ControllerRevisions, namespaced); ${parentResource.kind} is cluster-scoped`,
      'UnsupportedUpdateStrategy',
    );
  const resolved: ResolvedComposite = {
    ...cc,
    ...common,
    parentResource,
    parentStatus: await hasSubresource(kube, parentResource, 'status'),
  };
  await checkIdentity(kube, resolved, [parentResource]);
  return resolved;
}

async function resolveDecorator(kube: KubeClient, dc: DecoratorController): Promise<ResolvedDecorator> {
  const common = await resolveCommon(kube, dc);
  const targets = await Promise.all(
    dc.resources.map(async (rule, i) => {
      const r = await one(kube, dc, rule, `spec.resources[${i}]`);
      return { ...r, rule, status: await hasSubresource(kube, r, 'status') };
    }),
  );
  const resolved: ResolvedDecorator = { ...dc, ...common, targets };
  await checkIdentity(kube, resolved, targets);
  return resolved;
}

/**
 * Whether Outrigger may act as the definition's ServiceAccount (a cluster admin's grant and the account's consent,
 * as for a MapController: docs/operations/security.md#serviceaccounts-a-definition-names), and whether the account
 * may list the kinds a resync lists cluster-wide (the parents, or the decorated resources) and get them (each pass
 * reads its parent: without it every pass would fail).
 */
async function checkIdentity(kube: KubeClient, d: ResolvedDefinition, listed: readonly ResolvedResource[]): Promise<void> {
  const who = `ServiceAccount ${d.serviceAccount.namespace}/${d.serviceAccount.name}`;
  let refused;
  try {
    refused = await refusedNeeds(
      kube,
      d.serviceAccount,
      { kind: d.kind, name: d.name },
      listed.flatMap((resource) => ['list', 'get'].map((verb) => ({ resource, verb }))),
    );
  } catch (err) {
    if (err instanceof IdentityProblem) throw new DefinitionError(d.kind, d.name, err.message, err.reason);
    throw err;
  }
  if (refused.length)
    throw new DefinitionError(
      d.kind,
      d.name,
      `${who} may not ${refused.map((r) => `${r.verb} ${resourceName(r.resource)}`).join(', ')}`,
      'Forbidden',
    );
}

/** The definitions that serve a parent kind: its CompositeController and every DecoratorController of the kind. */
export function definitionsFor(set: CompositeSet, group: string, kind: string): ResolvedDefinition[] {
  return [
    ...set.composites.filter((c) => c.parentResource.group === group && c.parentResource.kind === kind),
    ...set.decorators.filter((d) => d.targets.some((t) => t.group === group && t.kind === kind)),
  ];
}

/** Writes each definition's Ready condition where it changed (writeDefinitionReady). */
export async function writeReadiness(kube: KubeApi, set: CompositeSet, now: Date = new Date()): Promise<void> {
  await Promise.all(
    set.objects.map(({ resource, object: o }) => {
      const kind = resource === compositeControllers ? 'CompositeController' : 'DecoratorController';
      return writeDefinitionReady(
        kube,
        resource,
        o,
        set.invalid.find((i) => i.kind === kind && i.name === o.metadata.name),
        now,
      );
    }),
  );
}

const definitionKind = (resource: GVR, kind: string): ControllerKind => ({
  resource,
  kind,
  namespaced: false,
  selectorOf: () => null,
  // A parent of its own, with no children: no child's event lists the definitions.
  owns: [],
  ownChangeSyncs: specChanged,
  target: COMPOSITE_TARGET,
});
export const compositeControllerKind = definitionKind(compositeControllers, 'CompositeController');
export const decoratorControllerKind = definitionKind(decoratorControllers, 'DecoratorController');

async function kinds(kube: KubeClient, cluster: ClusterConfig): Promise<ControllerKind[]> {
  return routedKinds(await listCompositeSet(kube, cluster.id, compositeCache, cluster.controllerSelector));
}

/**
 * Whether a parent's own event may concern its definition: the labels its selector asks for
 * (docs/controllers/ownership-and-routing.md#one-definition-cannot-stop-anothers-routing). An annotationSelector is
 * the handler's to judge (the forwarder sends no annotations); an invalid selector routes, for the handler to report.
 */
function labelsSelect(selector: LabelSelector | undefined, o: KubeObject): boolean {
  try {
    return decorates({ labelSelector: selector }, o);
  } catch (err) {
    if (err instanceof SelectorError) return true;
    throw err;
  }
}

/** Whether the object carries the definition's finalizer. */
const holds = (d: ResolvedDefinition, o: KubeObject): boolean =>
  o.metadata.finalizers?.includes(compositeFinalizer(d.kind, d.name)) ?? false;

/** What the definitions mean to the router, one controller kind per parent kind (a decorator's: per target). */
export function routedKinds(set: CompositeSet): ControllerKind[] {
  const owns = (d: ResolvedDefinition) => d.kinds.map((k) => ({ group: k.group, kind: k.kind }));
  // Related objects reach the parents whose recorded customize answer asks for them (docs/controllers/compositecontroller.md#related-objects).
  const related = (d: ResolvedDefinition): Pick<ControllerKind, 'related'> =>
    d.hooks.customize
      ? {
          related: {
            kinds: recordedKinds(d.object).map((k) => ({ group: k.group, kind: k.kind })),
            asks: (parent, o) => parentAsks(parent, d.uid, o),
          },
        }
      : {};
  return [
    compositeControllerKind,
    decoratorControllerKind,
    ...set.composites.map((c): ControllerKind => ({
      resource: c.parentResource,
      kind: c.parentResource.kind,
      namespaced: c.parentResource.namespaced,
      // Orphans reach the parent whose selector matches them, to be adopted.
      selectorOf: (p) =>
        c.generateSelector
          ? { matchLabels: { [CONTROLLER_UID_LABEL]: p.metadata.uid ?? '' } }
          : (p.spec as { selector?: LabelSelector | null } | undefined)?.selector,
      owns: owns(c),
      ...related(c),
      definition: `CompositeController/${c.name}`,
      // Metacontroller syncs on any change of a parent it serves, its status too unless told not to; one it no
      // longer selects that carries its finalizer, to release it (docs/controllers/compositecontroller.md#finalizers-are-released).
      ownChangeSyncs: (p) => (labelsSelect(c.parent.labelSelector, p) && (!c.parent.ignoreStatusChanges || specChanged(p))) || holds(c, p),
      // The pass reads the parent as the ServiceAccount and drops a key whose uid is not its own: the router
      // reads no parent for a child's event (Outrigger's group may only list and watch it).
      checksRefUid: true,
      target: COMPOSITE_TARGET,
    })),
    ...set.decorators.flatMap((d) =>
      d.targets.map((t): ControllerKind => ({
        resource: t,
        kind: t.kind,
        namespaced: t.namespaced,
        // Attachments are the target's by ControllerRef alone: nothing is adopted.
        selectorOf: () => null,
        owns: owns(d),
        ...related(d),
        definition: `DecoratorController/${d.name}`,
        // Only the objects its rule selects are its parents (and one that still carries its finalizer, to release).
        ownChangeSyncs: (o) => (labelsSelect(t.rule.labelSelector, o) && (!t.rule.ignoreStatusChanges || specChanged(o))) || holds(d, o),
        checksRefUid: true,
        target: COMPOSITE_TARGET,
      })),
    ),
  ];
}

async function watches(kube: KubeClient, cluster: ClusterConfig): Promise<GVR[]> {
  const set = await listCompositeSet(kube, cluster.id, compositeCache, cluster.controllerSelector);
  return [
    compositeControllers,
    decoratorControllers,
    ...set.composites.flatMap((c) => [c.parentResource, ...c.kinds, ...relatedWatched(c)]),
    ...set.decorators.flatMap((d) => [...d.targets, ...d.kinds, ...relatedWatched(d)]),
  ];
}

/** The kinds its parents' customize answers read, as its status records them (functions/composite/related.ts). */
const relatedWatched = (d: ResolvedDefinition): GVR[] =>
  d.hooks.customize ? recordedKinds(d.object).map((k) => gvr(k.group, k.version, k.resource)) : [];

export const compositeSource: ControllerSource = {
  target: COMPOSITE_TARGET,
  kinds: (cluster, kube) => kinds(kube, cluster),
  watches: (cluster, kube) => watches(kube, cluster),
  // Metacontroller syncs a parent on any change of a child, its status too: a hook reads its children's status
  // (a Job's succeeded count, a Pod's readiness).
  statusChanges: async (cluster, kube) => {
    const set = await listCompositeSet(kube, cluster.id, compositeCache, cluster.controllerSelector);
    return [...set.composites, ...set.decorators].flatMap((d) => d.kinds);
  },
  forget: (cluster) => compositeCache.forget(cluster),
};
