// One pass of a CompositeController or DecoratorController for one parent (docs/controllers/compositecontroller.md,
// docs/controllers/decoratorcontroller.md), as the definition's ServiceAccount: read the parent, keep the
// controller's finalizer, claim the children (by the parent's selector through the ownership core) or find the
// attachments (by ControllerRef), call the sync hook (or the finalize hook for a parent being deleted), then write
// the answer: children created, updated by their update method, deleted when no longer answered (Background,
// uid and resourceVersion preconditions); a decorator's labels and annotations; the status replaced. A failed hook
// call changes nothing but the parent's Synced condition.
import { HookError } from '../../shared/hooks/index.ts';
import { apiVersionOf, isKubeError, KubeError, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import {
  compositeFinalizer,
  hookVersion,
  parseCompositeAnswer,
  parseDecoratorAnswer,
  strictAnswers,
  type SyncAnswer,
} from '../../shared/composite/api.ts';
import {
  attachmentMark,
  attachmentsOf,
  ChildError,
  childMap,
  childMark,
  claimable,
  decorates,
  diffChildren,
  fieldManagerOf,
  metadataPatch,
  parentSelector,
  prepareChildren,
  statusDiffers,
  withMapStatus,
  withMark,
  type ChildKind,
} from '../../shared/composite/plan.ts';
import { hookRequest } from '../../shared/composite/request.ts';
import { identityOf } from '../../shared/map/plan/outputs.ts';
import { setCondition, type Condition } from '../../shared/metacontroller/conditions.ts';
import { claim, isBeingDeleted, SelectorError, type SyncKey } from '../../shared/ownership/index.ts';
import { anyRolling } from '../../shared/composite/rollout.ts';
import { callerOf, type ResolvedComposite, type ResolvedDecorator, type ResolvedDefinition } from './controllers.ts';
import { writeFinalizer } from '../metacontroller/finalizers.ts';
import { emptyResult, ParentChanged, problemOf, type Pass, type PassContext, type PassResult, type Problem } from './pass.ts';
import { readRelated } from './related.ts';
import { rollingAnswer } from './rollout.ts';

/** Syncs one parent of a CompositeController, or one object of a DecoratorController. */
export async function syncDefinition(ctx: PassContext, d: ResolvedDefinition, key: SyncKey): Promise<PassResult> {
  const result = emptyResult();
  const resource =
    d.kind === 'CompositeController' ? d.parentResource : d.targets.find((t) => t.group === key.group && t.kind === key.kind);
  if (!resource) return { ...result, skipped: 'not a kind of this controller' };
  const found = await ctx.kube.find(resource, { name: key.name, namespace: resource.namespaced ? key.namespace : undefined });
  if (!found || found.metadata.uid !== key.uid) return { ...result, skipped: 'parent gone' };
  let parent: KubeObject = { ...found, apiVersion: apiVersionOf(resource), kind: resource.kind };
  const finalizer = compositeFinalizer(d.kind, d.name);
  const ours = parent.metadata.finalizers?.includes(finalizer) ?? false;
  // A decorator's object that stops matching, while it has the finalizer and a finalize hook: finalized as if it
  // were being deleted, as Metacontroller does (docs/controllers/decoratorcontroller.md#a-pass-per-object).
  const selected = selects(d, resource, parent);
  const unmatched = !selected && ours && d.kind === 'DecoratorController' && Boolean(d.hooks.finalize);
  // A parent the definition no longer serves keeps none of its finalizer (docs/controllers/compositecontroller.md#finalizers-are-released).
  if (!selected && !unmatched)
    return { ...result, skipped: 'not selected', ...(ours ? await release(ctx, resource, parent, finalizer) : {}) };
  // Being deleted without our finalizer: the garbage collector takes the children, and no hook is called.
  if (isBeingDeleted(parent) && !ours) return { ...result, skipped: 'being deleted' };
  // Being deleted with it, but the definition's finalize hook is gone: nothing is left to call.
  if (isBeingDeleted(parent) && !d.hooks.finalize)
    return { ...result, skipped: 'no finalize hook', ...(await release(ctx, resource, parent, finalizer)) };
  const mark = d.kind === 'CompositeController' ? childMark(d.name, d.parentResource) : attachmentMark(d.name);
  const pass: Pass = { ctx, d, resource, result, finalizer, mark };
  try {
    if (!isBeingDeleted(parent)) parent = await setFinalizer(pass, parent, Boolean(d.hooks.finalize));
    const observed = await observedChildren(pass, parent);
    if (!observed) return result;
    const { children, adopted } = observed;
    const rel = await readRelated({ ...ctx, cluster: key.cluster }, d, resource, parent);
    if (rel.asked) result.hookCalls += 1;
    result.relatedKinds = rel.kinds;
    parent = rel.parent;
    const finalizing = isBeingDeleted(parent) || unmatched;
    const hook = finalizing ? d.hooks.finalize! : d.hooks.sync;
    // The request in the hook's version (v1 or v2), its answer read loosely or strictly as the hook says.
    const version = hookVersion(hook);
    const strict = strictAnswers(hook);
    const request = hookRequest(d.kind, d.object, parent, childMap(parent, d.kinds, children, version), finalizing, rel.related);
    // The pass's client is the definition's ServiceAccount's: Service hooks and webhook Secrets go through it.
    const call = { deadline: ctx.deadline, controller: callerOf(key.cluster, d), cluster: ctx.kube, strictAnswer: strict };
    let answer: SyncAnswer;
    let desired: KubeObject[];
    let truncate = async () => {};
    let inPlace: ReadonlySet<string> = new Set();
    if (d.kind === 'CompositeController' && !finalizing && anyRolling(d.kinds)) {
      // Rolling updates: the hook is asked once per revision a child belongs to (docs/controllers/compositecontroller.md#rolling-updates).
      const rolled = await rollingAnswer({ ...ctx, call, strict }, d, parent, children, request);
      result.hookCalls += rolled.hookCalls;
      ({ answer, desired, truncate, inPlace } = rolled);
    } else {
      result.hookCalls += 1;
      const answered = await ctx.hooks.call(hook, request, call);
      answer = d.kind === 'CompositeController' ? parseCompositeAnswer(answered, strict) : parseDecoratorAnswer(answered, strict);
      desired = prepareChildren(answer.children, {
        parent,
        kinds: d.kinds,
        generateSelector: d.kind === 'CompositeController' && d.generateSelector,
      });
    }
    result.resyncAfterSeconds = answer.resyncAfterSeconds;
    await writeChildren(pass, children, desired, inPlace, adopted);
    parent = await writeParent(pass, parent, answer);
    await truncate();
    if (finalizing && answer.finalized) {
      await setFinalizer(pass, parent, false);
      result.finalized = true;
    } else if (finalizing) result.finalized = false;
  } catch (err) {
    if (err instanceof ParentChanged) {
      ctx.log?.('info', `${d.kind} pass superseded: the parent changed while it ran`, {
        controller: d.name,
        parent: `${key.namespace ?? ''}/${key.name}`,
      });
      result.superseded = true;
      return result;
    }
    result.problems.push(problemOf(err));
    if (err instanceof HookError && err.retryAfterSeconds !== undefined) result.retryAfterSeconds = err.retryAfterSeconds;
    await failedCondition(pass, parent, result.problems.at(-1)!);
  }
  for (const p of result.problems)
    ctx.log?.('warn', `${d.kind} sync problem`, { controller: d.name, parent: `${key.namespace ?? ''}/${key.name}`, ...p });
  return result;
}

/** Takes the definition's finalizer off a parent it no longer serves, as its ServiceAccount. */
async function release(
  ctx: PassContext,
  resource: ResolvedResource,
  parent: KubeObject,
  finalizer: string,
): Promise<Pick<PassResult, 'finalized'>> {
  await writeFinalizer(ctx.kube, resource, parent, finalizer, false);
  return { finalized: true };
}

/** A CompositeController's parentResource.labelSelector, or a DecoratorController's rule's selectors. */
function selects(d: ResolvedDefinition, resource: ResolvedResource, parent: KubeObject): boolean {
  if (d.kind === 'CompositeController') return !d.parent.labelSelector || decorates({ labelSelector: d.parent.labelSelector }, parent);
  // Any of its rules for the object's kind (two rules may name one kind with different selectors).
  return (d as ResolvedDecorator).targets.some((t) => t.group === resource.group && t.kind === resource.kind && decorates(t.rule, parent));
}

/** Lists as the ServiceAccount: one it may not make is the parent's Forbidden problem. */
async function listKind(pass: Pass, k: ChildKind, namespace: string | undefined): Promise<KubeObject[]> {
  try {
    const items = await pass.ctx.kube.listAll(k, { namespace: k.namespaced ? namespace : undefined });
    return items.map((o) => ({ ...o, apiVersion: apiVersionOf(k), kind: k.kind }));
  } catch (err) {
    if (!isKubeError(err, 'Forbidden')) throw err;
    throw new KubeError('Forbidden', `the controller's ServiceAccount may not list ${k.resource}${k.group ? `.${k.group}` : ''}`);
  }
}

/**
 * The parent's children as the hook is sent them, and the uids of those this pass adopted. A CompositeController
 * claims them by the parent's selector through the ownership core (adopting matching orphans that carry its mark,
 * releasing its children that no longer match); a DecoratorController's attachments are what the object controls.
 * Either leaves a MapController's outputs alone.
 */
async function observedChildren(pass: Pass, parent: KubeObject): Promise<{ children: KubeObject[]; adopted: Set<string> } | undefined> {
  const { d, result } = pass;
  const namespace = parent.metadata.namespace;
  if (d.kind === 'DecoratorController') {
    const lists = await Promise.all(d.kinds.map((k) => listKind(pass, k, namespace)));
    return { children: attachmentsOf(parent, lists.flat(), d.name), adopted: new Set() };
  }
  let selector;
  try {
    selector = parentSelector(parent, (d as ResolvedComposite).generateSelector);
  } catch (err) {
    if (!(err instanceof SelectorError)) throw err;
    result.problems.push({ reason: 'InvalidSelector', message: err.message });
    await failedCondition(pass, parent, result.problems.at(-1)!);
    return undefined;
  }
  const owned: KubeObject[] = [];
  const adopted = new Set<string>();
  for (const k of d.kinds) {
    const claimed = await claim(
      { kube: pass.ctx.kube, parentResource: pass.resource, childResource: k },
      parent,
      selector,
      claimable(await listKind(pass, k, namespace)),
      { mark: pass.mark },
    );
    result.adopted += claimed.adopted.length;
    result.released += claimed.released.length;
    for (const o of claimed.adopted) adopted.add(o.metadata.uid ?? '');
    owned.push(...claimed.owned.map((o) => ({ ...o, apiVersion: apiVersionOf(k), kind: k.kind })));
  }
  return { children: owned, adopted };
}

/**
 * `inPlace`: children (identities) applied whatever their kind's method (a rolling child's relabel); `adopted`: the
 * uids this pass adopted, neither deleted nor recreated in it. Every child written carries the controller's mark.
 */
async function writeChildren(
  pass: Pass,
  observed: KubeObject[],
  desired: KubeObject[],
  inPlace: ReadonlySet<string>,
  adopted: ReadonlySet<string>,
): Promise<void> {
  const { ctx, d, result } = pass;
  const kindOf = (o: KubeObject) => d.kinds.find((k) => k.kind === o.kind && apiVersionOf(k) === o.apiVersion)!;
  const changes = diffChildren(observed, desired, (o) => (inPlace.has(identityOf(o)) ? 'InPlace' : kindOf(o).method), adopted);
  const marked = (o: KubeObject) => withMark(o, pass.mark);
  const manager = fieldManagerOf(d);
  const refOf = (k: ChildKind, o: KubeObject) => ({
    name: o.metadata.name ?? '',
    namespace: k.namespaced ? o.metadata.namespace : undefined,
  });
  const del = async (o: KubeObject) => {
    try {
      // Background: some kinds (batch/v1 Jobs) orphan their own dependents when no policy is named. The
      // preconditions: a child changed since it was read is the next pass's to judge.
      await ctx.kube.delete(kindOf(o), refOf(kindOf(o), o), {
        propagationPolicy: 'Background',
        preconditions: { uid: o.metadata.uid!, resourceVersion: o.metadata.resourceVersion! },
      });
      return true;
    } catch (err) {
      if (isKubeError(err, 'NotFound')) return true;
      if (isKubeError(err, 'Conflict')) return false;
      throw err;
    }
  };
  for (const c of changes.create) {
    try {
      await ctx.kube.create(kindOf(c), marked(c), { fieldManager: manager });
      result.created += 1;
    } catch (err) {
      // Someone else's object by that name: never taken over.
      if (isKubeError(err, 'AlreadyExists'))
        throw new ChildError(`child ${c.kind ?? ''} ${c.metadata.name ?? ''} exists and is not this parent's; it is left alone`);
      throw err;
    }
  }
  for (const { desired: c, observed: o } of changes.update) {
    const k = kindOf(c);
    // Server-side apply, as the definition's own field manager, conditional on the resourceVersion read.
    const m = marked(c);
    await ctx.kube.patch(k, refOf(k, c), { ...m, metadata: { ...m.metadata, resourceVersion: o.metadata.resourceVersion } }, 'apply', {
      force: true,
      fieldManager: manager,
    });
    result.updated += 1;
  }
  for (const { desired: c, observed: o } of changes.recreate) {
    // Deleted now; created by the pass its deletion event brings once it is gone (it may have finalizers).
    if (await del(o)) {
      try {
        await ctx.kube.create(kindOf(c), marked(c), { fieldManager: manager });
        result.recreated += 1;
      } catch (err) {
        if (!isKubeError(err, 'AlreadyExists')) throw err;
      }
    }
  }
  for (const o of changes.delete) if (await del(o)) result.deleted += 1;
  result.unchanged += changes.unchanged.length;
  result.held += changes.held.length;
  ctx.log?.('debug', 'children written', { children: desired.map(identityOf).length });
}

/**
 * The answer's labels and annotations (a decorator's) and its status, which replaces the parent's (none: kept);
 * each write conditional on the resourceVersion read, so a parent changed since is ParentChanged.
 */
async function writeParent(pass: Pass, parent: KubeObject, answer: SyncAnswer): Promise<KubeObject> {
  try {
    return await writeParentAsRead(pass, parent, answer);
  } catch (err) {
    if (isKubeError(err, 'Conflict')) throw new ParentChanged(err.message, { cause: err });
    throw err;
  }
}

/** writeParent's writes. */
async function writeParentAsRead(pass: Pass, parent: KubeObject, answer: SyncAnswer): Promise<KubeObject> {
  const { ctx, resource, result } = pass;
  const ref = { name: parent.metadata.name ?? '', namespace: resource.namespaced ? parent.metadata.namespace : undefined };
  let current = parent;
  const meta = metadataPatch(current, answer.labels, answer.annotations);
  if (meta) {
    const written = await ctx.kube.patch(
      resource,
      ref,
      { metadata: { ...meta.metadata, resourceVersion: current.metadata.resourceVersion } },
      'merge',
    );
    current = { ...written, apiVersion: parent.apiVersion, kind: parent.kind };
  }
  const status = answer.status && ctx.sharedWithMap ? withMapStatus(current.status, answer.status) : answer.status;
  if (status !== undefined && statusDiffers(current.status, status)) {
    current = await replaceStatus(pass, current, status);
    result.statusWritten = true;
  }
  return current;
}

/**
 * Replaces the parent's status whole (a JSON patch carrying the resourceVersion read, which the apiserver takes as
 * a precondition: a parent changed since is a 409 Conflict, where a `test` of it would be a 422 like a bad status).
 */
async function replaceStatus(pass: Pass, parent: KubeObject, status: Record<string, unknown>): Promise<KubeObject> {
  const { ctx, resource, d } = pass;
  const hasStatus = d.kind === 'CompositeController' ? d.parentStatus : (resource.status ?? false);
  const ref = { name: parent.metadata.name ?? '', namespace: resource.namespaced ? parent.metadata.namespace : undefined };
  const written = await ctx.kube.patch(
    resource,
    hasStatus ? { ...ref, subresource: 'status' } : ref,
    [
      { op: 'replace', path: '/metadata/resourceVersion', value: parent.metadata.resourceVersion },
      { op: 'add', path: '/status', value: status },
    ],
    'json',
  );
  return { ...written, apiVersion: parent.apiVersion, kind: parent.kind };
}

/**
 * A failed pass: the parent's status kept, but for a Synced=False condition naming the problem. A decorator's
 * object is another controller's, whose status it never writes (docs/controllers/decoratorcontroller.md#a-pass-per-object):
 * its problems are Events only.
 */
async function failedCondition(pass: Pass, parent: KubeObject, problem: Problem): Promise<void> {
  if (pass.d.kind === 'DecoratorController') return;
  const status = (parent.status ?? {}) as { conditions?: Condition[] };
  const conditions = setCondition(
    status.conditions,
    { type: 'Synced', status: 'False', reason: problem.reason, message: problem.message },
    new Date(),
  );
  const before = status.conditions?.find((c) => c.type === 'Synced');
  if (before?.status === 'False' && before.reason === problem.reason && before.message === problem.message) return;
  try {
    await replaceStatus(pass, parent, { ...status, conditions });
    pass.result.statusWritten = true;
  } catch (err) {
    // A parent changed or gone since: its next pass reports.
    if (!(err instanceof KubeError)) throw err;
    pass.ctx.log?.('info', 'Synced condition not written', { reason: err.kind });
  }
}

/** Adds or removes the controller's finalizer on the parent, as its ServiceAccount. */
const setFinalizer = (pass: Pass, parent: KubeObject, want: boolean) =>
  writeFinalizer(pass.ctx.kube, pass.resource, parent, pass.finalizer, want);
