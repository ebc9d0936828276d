// The decisions of a CompositeController or DecoratorController pass, pure: which objects are the parent's
// children (claimed by its selector, or attached by ControllerRef alone), what the hook is sent, what its answer
// makes ready to write, and what to create, update, recreate and delete
// (docs/controllers/compositecontroller.md#a-pass-per-parent).
import type { ResolvedResource } from '../kube/discovery.ts';
import { apiVersionOf, parseApiVersion, type KubeObject } from '../kube/resource.ts';
import { canonicalJson, shortHash, type Json } from '../json.ts';
import { MAP_KEY_LABEL } from '../map/api.ts';
import { appliedDiffers, identityOf, pairByIdentity } from '../map/plan/outputs.ts';
import { planClaim, type ClaimMark, type ClaimPlan } from '../ownership/claim.ts';
import { controllerOf, isBeingDeleted, newControllerRef } from '../ownership/controller-ref.ts';
import { compileSelector, matches, SelectorError, type LabelSelector, type Selector } from '../ownership/selector.ts';
import {
  APPLIED_ANNOTATION,
  CONTROLLER_UID_LABEL,
  DECORATOR_ANNOTATION,
  MADE_BY_ANNOTATION,
  type ChildMap,
  type HookVersion,
  type ResourceSelectorRule,
  type RollingRule,
  type UpdateMethod,
} from './api.ts';

/** A child resource as resolved, with its update method (and its rolling update, if it rolls). */
export type ChildKind = ResolvedResource & { method: UpdateMethod; rolling?: RollingRule | undefined };

export class ChildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChildError';
  }
}

/**
 * A child's key in the hook's map. v1: its name, or `namespace/name` for a namespaced child of a cluster-scoped
 * parent (relative to the parent); v2, the uniform map: `namespace/name` for every namespaced child, the name of a
 * cluster-scoped one, whatever the parent's scope (docs/controllers/compositecontroller.md#hook-versions).
 */
export function childKey(parent: KubeObject, child: KubeObject, version: HookVersion = 'v1'): string {
  return child.metadata.namespace && (version === 'v2' || !parent.metadata.namespace)
    ? `${child.metadata.namespace}/${child.metadata.name ?? ''}`
    : (child.metadata.name ?? '');
}

/** The children as the hook is sent them, in its version's keys: one entry per child rule, even when it has none. */
export function childMap(
  parent: KubeObject,
  kinds: ReadonlyArray<Pick<ChildKind, 'group' | 'version' | 'kind'>>,
  children: readonly KubeObject[],
  version: HookVersion = 'v1',
): ChildMap {
  const out: ChildMap = {};
  for (const k of kinds) out[`${k.kind}.${apiVersionOf(k)}`] = {};
  for (const c of children) {
    const entry = out[`${c.kind ?? ''}.${c.apiVersion ?? ''}`];
    if (entry) entry[childKey(parent, c, version)] = c;
  }
  return out;
}

/**
 * The parent's selector over its children: with generateSelector, the label its uid is put in (its spec.selector
 * ignored); otherwise its spec.selector, which it must have (SelectorError).
 */
export function parentSelector(parent: KubeObject, generateSelector: boolean): Selector {
  if (generateSelector) return compileSelector({ matchLabels: { [CONTROLLER_UID_LABEL]: parent.metadata.uid ?? '' } });
  const selector = (parent.spec as { selector?: LabelSelector | null } | undefined)?.selector;
  if (!selector) throw new SelectorError('the parent has no spec.selector (or set generateSelector on the controller)');
  return compileSelector(selector);
}

/**
 * The mark a CompositeController writes on every child it creates, updates or releases, and the only orphans its
 * parents adopt (docs/controllers/compositecontroller.md#adoption): the parent's selector is its author's choice,
 * and must not hand the controller objects it never made.
 */
export function childMark(name: string, parent: { group: string; resource: string }): ClaimMark {
  return {
    annotation: MADE_BY_ANNOTATION,
    value: `compositecontroller/${name}/${parent.resource}${parent.group ? `.${parent.group}` : ''}`,
  };
}

/** The field manager of every write a definition makes: one per definition, as `kubectl` shows it. */
export function fieldManagerOf(d: { kind: 'CompositeController' | 'DecoratorController'; name: string }): string {
  return `outrigger-${d.kind === 'CompositeController' ? 'composite' : 'decorator'}/${d.name}`.slice(0, 128);
}

/** The mark a DecoratorController writes on every attachment (Metacontroller's annotation, naming it). */
export function attachmentMark(name: string): ClaimMark {
  return { annotation: DECORATOR_ANNOTATION, value: name };
}

const managers = (o: KubeObject): string[] =>
  ((o.metadata.managedFields ?? []) as Array<{ manager?: string }>).flatMap((e) => (e.manager ? [e.manager] : []));

/**
 * Whether a DecoratorController named `name` attached the object: its annotation names it, or (an attachment
 * Outrigger wrote before it marked them) the decorator's own field manager wrote it.
 */
export function attachedBy(o: KubeObject, name: string): boolean {
  const marked = o.metadata.annotations?.[DECORATOR_ANNOTATION];
  if (marked !== undefined) return marked === name;
  return managers(o).includes(fieldManagerOf({ kind: 'DecoratorController', name }));
}

/** Whether any DecoratorController attached the object (attachedBy, whoever it names). */
const attachedByAny = (o: KubeObject): boolean =>
  o.metadata.annotations?.[DECORATOR_ANNOTATION] !== undefined || managers(o).some((m) => m.startsWith('outrigger-decorator/'));

/** The object with the mark, as it is written. */
export function withMark<T extends KubeObject>(o: T, mark: ClaimMark): T {
  return { ...o, metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [mark.annotation]: mark.value } } };
}

/**
 * A CompositeController's claim (the Three Laws, shared/ownership/claim.ts): the children it controls that match,
 * the orphans carrying its mark that it adopts, those it releases. Objects a MapController made for the same parent
 * (its map key label) are the MapController's: never claimed, released or sent, so the two may share a parent kind.
 */
export function claimChildren<T extends KubeObject>(
  parent: KubeObject,
  selector: Selector,
  candidates: readonly T[],
  mark: ClaimMark,
): ClaimPlan<T> {
  const plan = planClaim(parent, selector, claimable(candidates), { mark });
  plan.ignored.push(...candidates.filter((c) => !claimable([c]).length));
  return plan;
}

/**
 * The candidates a CompositeController may claim: all but a MapController's outputs (its map key label) and a
 * DecoratorController's attachments (its mark), which a parent of both kinds controls too.
 */
export function claimable<T extends KubeObject>(candidates: readonly T[]): T[] {
  return candidates.filter((c) => c.metadata.labels?.[MAP_KEY_LABEL] === undefined && !attachedByAny(c));
}

/**
 * A DecoratorController's attachments: the objects the target controls that this decorator attached (attachedBy),
 * never a MapController's outputs; nothing adopted. What the target's own controller, or another decorator, made
 * for it is not among them (docs/controllers/decoratorcontroller.md#attachments).
 */
export function attachmentsOf<T extends KubeObject>(target: KubeObject, candidates: readonly T[], name: string): T[] {
  return candidates.filter(
    (c) => controllerOf(c)?.uid === target.metadata.uid && c.metadata.labels?.[MAP_KEY_LABEL] === undefined && attachedBy(c, name),
  );
}

/** Whether a decorator's resource rule selects the object: its label and annotation selectors both (absent: all). */
export function decorates(rule: Pick<ResourceSelectorRule, 'labelSelector' | 'annotationSelector'>, o: KubeObject): boolean {
  const all = (s: LabelSelector | undefined, values: Record<string, string> | undefined) => !s || matches(compileSelector(s), values ?? {});
  const annotations = rule.annotationSelector
    ? { matchLabels: rule.annotationSelector.matchAnnotations, matchExpressions: rule.annotationSelector.matchExpressions }
    : undefined;
  return all(rule.labelSelector, o.metadata.labels) && all(annotations, o.metadata.annotations);
}

/**
 * The hook's children made ready to write: each of a listed child kind and version, in the parent's namespace (a
 * namespaced parent owns nothing elsewhere), named once, with the parent's ControllerRef, the generated selector's
 * label when the controller generates it, and the hash of what is applied. Throws ChildError naming the child.
 */
export function prepareChildren(
  desired: readonly KubeObject[],
  ctx: { parent: KubeObject; kinds: readonly ChildKind[]; generateSelector: boolean },
): KubeObject[] {
  const parentNs = ctx.parent.metadata.namespace;
  const seen = new Set<string>();
  return desired.map((d) => {
    const what = `child ${d.kind ?? '?'} ${d.metadata.namespace ? `${d.metadata.namespace}/` : ''}${d.metadata.name ?? '?'}`;
    const { group, version } = parseApiVersion(d.apiVersion ?? '');
    const kind = ctx.kinds.find((k) => k.group === group && k.kind === d.kind);
    if (!kind) throw new ChildError(`${what}: ${d.apiVersion ?? ''} ${d.kind ?? ''} is not one of the controller's child resources`);
    if (kind.version !== version)
      throw new ChildError(`${what}: written as ${d.apiVersion ?? ''}, but the controller names ${apiVersionOf(kind)}`);
    let namespace = d.metadata.namespace;
    if (!kind.namespaced && namespace) throw new ChildError(`${what}: ${d.kind ?? ''} is cluster-scoped and takes no namespace`);
    if (kind.namespaced && parentNs) {
      if (namespace && namespace !== parentNs)
        throw new ChildError(`${what}: is in namespace ${namespace}, but a parent in ${parentNs} may own children in ${parentNs} only`);
      namespace = parentNs;
    }
    if (kind.namespaced && !namespace) throw new ChildError(`${what}: a namespaced child of a cluster-scoped parent needs a namespace`);
    if (!kind.namespaced && parentNs) throw new ChildError(`${what}: a namespaced parent may not own a cluster-scoped child`);
    if (d.metadata.ownerReferences?.some((r) => r.controller === true && r.uid !== ctx.parent.metadata.uid))
      throw new ChildError(`${what}: names another controller; children are owned by the parent`);
    const { name, labels, annotations, ownerReferences, generateName: _gn, ...rest } = d.metadata;
    const meta = Object.fromEntries(
      Object.entries(rest).filter(
        ([k]) =>
          !['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields', 'deletionTimestamp', 'selfLink'].includes(k),
      ),
    );
    const { status: _status, ...body } = d;
    const object: KubeObject = {
      ...body,
      metadata: {
        ...meta,
        name,
        ...(namespace ? { namespace } : {}),
        labels: { ...labels, ...(ctx.generateSelector ? { [CONTROLLER_UID_LABEL]: ctx.parent.metadata.uid ?? '' } : {}) },
        ...(annotations ? { annotations } : {}),
        ownerReferences: [...(ownerReferences ?? []).filter((r) => r.controller !== true), newControllerRef(ctx.parent)],
      },
    };
    const id = identityOf(object);
    if (seen.has(id)) throw new ChildError(`${what}: answered twice`);
    seen.add(id);
    object.metadata.annotations = { ...annotations, [APPLIED_ANNOTATION]: shortHash(object as unknown as Json, 0) };
    return object;
  });
}

export interface ChildChanges {
  create: KubeObject[];
  /** InPlace: server-side applied. */
  update: Array<{ desired: KubeObject; observed: KubeObject }>;
  /** Recreate: deleted, then created from the answer. */
  recreate: Array<{ desired: KubeObject; observed: KubeObject }>;
  /** Children the answer no longer names. */
  delete: KubeObject[];
  unchanged: KubeObject[];
  /** Adopted by this pass and differing from the answer: neither deleted nor recreated before a later pass. */
  held: KubeObject[];
}

/**
 * What makes the observed children the desired ones. A child differs when what was applied changed (its hash) or
 * someone changed a field the answer sets; it is then written by its kind's update method (OnDelete: not at all).
 * A child already being deleted is neither updated nor deleted again. A child `adopted` (uids) by this very pass is
 * never deleted in it, nor recreated: the adoption is there to see before anything of it is lost
 * (docs/controllers/compositecontroller.md#adoption).
 */
export function diffChildren(
  observed: readonly KubeObject[],
  desired: readonly KubeObject[],
  methodOf: (o: KubeObject) => UpdateMethod,
  adopted: ReadonlySet<string> = new Set(),
): ChildChanges {
  const changes: ChildChanges = { create: [], update: [], recreate: [], delete: [], unchanged: [], held: [] };
  const { pairs, unwanted } = pairByIdentity(observed, desired);
  const justAdopted = (o: KubeObject) => adopted.has(o.metadata.uid ?? '');
  for (const { desired: d, observed: o } of pairs) {
    if (!o) {
      changes.create.push(d);
      continue;
    }
    const method = methodOf(d);
    if (!appliedDiffers(o, d, APPLIED_ANNOTATION) || method === 'OnDelete' || isBeingDeleted(o)) changes.unchanged.push(o);
    else if (method === 'InPlace') changes.update.push({ desired: d, observed: o });
    else if (justAdopted(o)) changes.held.push(o);
    else changes.recreate.push({ desired: d, observed: o });
  }
  for (const o of unwanted.filter((u) => !isBeingDeleted(u))) (justAdopted(o) ? changes.held : changes.delete).push(o);
  return changes;
}

/** The merge patch of a decorator's labels and annotations onto its object, or undefined when nothing changes. */
export function metadataPatch(
  o: KubeObject,
  labels: Record<string, string | null> | undefined,
  annotations: Record<string, string | null> | undefined,
): { metadata: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> } } | undefined {
  const changed = (want: Record<string, string | null> | undefined, have: Record<string, string> | undefined) => {
    const out = Object.fromEntries(Object.entries(want ?? {}).filter(([k, v]) => (v === null ? have?.[k] !== undefined : have?.[k] !== v)));
    return Object.keys(out).length ? out : undefined;
  };
  const l = changed(labels, o.metadata.labels);
  const a = changed(annotations, o.metadata.annotations);
  if (!l && !a) return undefined;
  return { metadata: { ...(l ? { labels: l } : {}), ...(a ? { annotations: a } : {}) } };
}

/** Whether the answer's status differs from the parent's (a status write only when it does). */
export function statusDiffers(current: unknown, next: Record<string, unknown>): boolean {
  return canonicalJson((current ?? null) as Json) !== canonicalJson(next as Json);
}

/**
 * The status a composite pass writes on a parent kind a MapController serves too: the answer's, with the map
 * pass's own fields kept (`observedGeneration`, `inputs`, `outputs`, and its `Synced` condition unless the answer
 * has one), so that neither pass's write undoes the other's and each write's event brings no further write
 * (docs/controllers/compositecontroller.md#mix-and-match).
 */
export function withMapStatus(current: unknown, answered: Record<string, unknown>): Record<string, unknown> {
  const have = (current !== null && typeof current === 'object' ? current : {}) as Record<string, unknown>;
  const kept = Object.fromEntries(
    ['observedGeneration', 'inputs', 'outputs'].filter((k) => have[k] !== undefined && !(k in answered)).map((k) => [k, have[k]]),
  );
  // Either status is whatever was written there: only a list of objects is read as conditions.
  const typeOf = (c: unknown) => (c !== null && typeof c === 'object' ? (c as { type?: unknown }).type : undefined);
  const synced = Array.isArray(have.conditions) ? (have.conditions as unknown[]).find((c) => typeOf(c) === 'Synced') : undefined;
  const answeredConditions = answered.conditions ?? [];
  if (!synced || !Array.isArray(answeredConditions) || answeredConditions.some((c) => typeOf(c) === 'Synced'))
    return { ...answered, ...kept };
  return { ...answered, ...kept, conditions: [...(answeredConditions as unknown[]), synced] };
}
