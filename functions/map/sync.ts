// One MapController sync pass for one parent (README, "MapController"): list the inputs and the parent's outputs, call the map
// hook once per input (in parallel, bounded), reconcile each input's outputs, hand detached outputs to the
// tombstone hook, and write the aggregated status. A failed hook call or a bad answer changes nothing for its
// input and is reported in the parent's status; the other inputs go on. A parent being deleted gets its status
// and, while it carries the controller's finalizer, its finalize hook only. Writes: create (never takes over an
// existing object), server-side apply with Outrigger's field manager (`outrigger`), conditional on the
// resourceVersion that was read, or a delete and a create for updateStrategy Recreate, delete with a uid
// precondition.
import pLimit, { type LimitFunction } from 'p-limit';
import { HookError, type HookCaller } from '../../shared/hooks/index.ts';
import { apiVersionOf, isKubeError, KubeError, type KubeApi, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import { finalizerName, HookResponseError, PARENT_LABEL, parseFinalizeAnswer, parseHookAnswer } from '../../shared/map/api.ts';
import {
  AFTER_ALL_KEYS,
  aggregate,
  answerFingerprint,
  answerHolds,
  appliedOwnership,
  callFits,
  detachedToDelete,
  diffOutputs,
  FINALIZE_AGAIN_SECONDS,
  finalizersWith,
  identityOf,
  inputSelector,
  mapKeyOf,
  OutputError,
  outputMap,
  outputsByKey,
  prepareOutputs,
  releasePatch,
  selectInputs,
  setCondition,
  statusChanged,
  statusPatch,
  MAX_RECORDED_INPUTS,
  type AnswerRecord,
  type Continuation,
  type MapStatus,
} from '../../shared/map/plan/index.ts';
import { isBeingDeleted, isControlledBy, SelectorError, selectorString } from '../../shared/ownership/index.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import type { ResolvedMapController, ResolvedOutput } from './controllers.ts';

/** Hook calls in flight per pass (a Lambda hook scales out; a webhook should take this many at once). */
export const MAP_CONCURRENCY = 32;
/** Output writes in flight per pass. */
const WRITE_CONCURRENCY = 16;
/** How many per-input problems the status condition names (the log has them all). */
const MESSAGE_PROBLEMS = 3;

export interface MapContext {
  kube: KubeApi;
  hooks: HookCaller;
  concurrency?: number;
  now?: () => Date;
  log?: Log;
}

export interface Problem {
  mapKey: string;
  /** The input (kind namespace/name), or "detached" for a tombstone group. */
  what: string;
  reason: string;
  /** What the parent's status says: never text of the hook's answer. */
  message: string;
  /** For the log only: what the hook or the apiserver answered. */
  detail?: string | undefined;
}

export interface MapSyncResult {
  skipped?: string;
  inputs: number;
  hookCalls: number;
  created: number;
  updated: number;
  deleted: number;
  unchanged: number;
  detachedKept: number;
  problems: Problem[];
  statusWritten: boolean;
  /** Inputs whose last answer still held: no hook call (answerHolds). */
  reused: number;
  /** What this pass's answers rest on, for the next incremental pass (none past MAX_RECORDED_INPUTS). */
  answers?: AnswerRecord | undefined;
  /** Map keys whose hook was not called for want of time or because the hook asked to wait (AFTER_ALL_KEYS: a detached group's). */
  deferred: string[];
  /** Inputs before the continuation's cursor that needed a call: they had their turn earlier in this sync. */
  left: number;
  /** The longest wait a hook asked for (Retry-After); no call of that hook was started after it asked. */
  retryAfterSeconds?: number | undefined;
  /** Outputs deleted and created again for a changed answer (updateStrategy Recreate). */
  recreated: number;
  /** Outputs a finalize hook kept, released from the parent before it goes. */
  released: number;
  /** For a parent being deleted with our finalizer: whether the finalize hook finished, and the finalizer went. */
  finalized?: boolean | undefined;
  /** The earliest time (ms since the epoch) a hook of this pass asked to be called again (resyncAfterSeconds). */
  wakeAt?: number | undefined;
}

export interface MapPassOptions {
  /**
   * An incremental pass: the last clean pass's answers, and the uids the request names (its causes' objects).
   * Without it every input's hook is called (a resync, or nothing recorded).
   */
  reuse?: { previous: AnswerRecord | undefined; touched: ReadonlySet<string> } | undefined;
  /**
   * The pass's time budget: hook calls start only while one fits (callFits), each clamped to `deadline` (ms since
   * the epoch); the inputs not reached are `deferred`, for a follow-up. Without it, a pass calls every hook.
   */
  budget?: { deadline: number; budgetMs: number } | undefined;
  /** A follow-up's continuation: inputs whose map key sorts before its cursor are not called again in this sync. */
  continuation?: Continuation | undefined;
}

/** What a hook slot answers when the call was not started (no time left, or the hook asked to wait). */
const DEFERRED = Symbol('deferred');

export async function syncMap(ctx: MapContext, mc: ResolvedMapController, key: SyncKey, opts: MapPassOptions = {}): Promise<MapSyncResult> {
  const result: MapSyncResult = {
    inputs: 0,
    hookCalls: 0,
    created: 0,
    updated: 0,
    deleted: 0,
    unchanged: 0,
    detachedKept: 0,
    problems: [],
    statusWritten: false,
    reused: 0,
    deferred: [],
    left: 0,
    recreated: 0,
    released: 0,
  };
  const found = await ctx.kube.find(mc.parent, { name: key.name, namespace: mc.parent.namespaced ? key.namespace : undefined });
  if (!found || found.metadata.uid !== key.uid) return { ...result, skipped: 'parent gone' };
  // Listed and fetched objects carry no apiVersion or kind in some clients; hooks and ControllerRefs need both.
  let parent: KubeObject = { ...found, apiVersion: apiVersionOf(mc.parent), kind: mc.parent.kind };
  const namespace = parent.metadata.namespace;
  const now = ctx.now ?? (() => new Date());
  const wish = (seconds: number | undefined) => {
    if (seconds !== undefined) result.wakeAt = Math.min(result.wakeAt ?? Infinity, Date.now() + seconds * 1000);
  };

  // The controller's finalizer is on every parent while it has a finalize hook, and on none otherwise (README
  // "MapController", lifecycle). A parent being deleted only ever loses it, once its finalize hook is done.
  if (!isBeingDeleted(parent) && finalizersWith(parent.metadata.finalizers, finalizerName(mc.name), Boolean(mc.spec.hooks.finalize))) {
    try {
      parent = await setFinalizer(ctx, mc, parent, Boolean(mc.spec.hooks.finalize));
    } catch (err) {
      if (!(err instanceof FinalizerError)) throw err;
      result.problems.push(err.problem);
    }
  }

  let selector;
  try {
    selector = inputSelector(parent);
  } catch (err) {
    if (!(err instanceof SelectorError)) throw err;
    if (!isBeingDeleted(parent)) {
      result.problems.push({ mapKey: '', what: 'spec.selector', reason: 'InvalidSelector', message: err.message });
      await writeStatus(ctx, mc, parent, undefined, undefined, result, now(), opts.continuation);
      return result;
    }
    // A parent being deleted still gets its finalize hook: its inputs no longer matter.
    selector = inputSelector({ ...parent, spec: {} });
  }

  // Inputs: objects of every input resource matching the selector, in the parent's namespace (cluster-wide for
  // a cluster-scoped parent or input resource). Outputs: the parent's, found by its label, judged by ControllerRef.
  const labelSelector = selectorString(selector);
  // Lists as the controller's ServiceAccount: one it may not make is the parent's Forbidden, and nothing is done.
  const forbidden: Problem[] = [];
  const list = async (k: ResolvedResource, labels: string | undefined, role: string): Promise<KubeObject[]> => {
    const ns = k.namespaced ? namespace : undefined;
    try {
      return typed(k, await ctx.kube.listAll(k, { namespace: ns, labelSelector: labels }));
    } catch (err) {
      if (!isKubeError(err, 'Forbidden')) throw err;
      const where = ns ? `in namespace ${ns}` : 'in every namespace';
      forbidden.push({
        mapKey: '',
        what: role,
        reason: 'Forbidden',
        message: `the controller's ServiceAccount may not list ${k.resource}${k.group ? `.${k.group}` : ''} ${where}`,
      });
      return [];
    }
  };
  const [inputLists, outputLists] = await Promise.all([
    Promise.all(mc.inputs.map((k) => list(k, labelSelector, 'inputResources'))),
    Promise.all(mc.outputs.map((k) => list(k, `${PARENT_LABEL}=${parent.metadata.uid ?? ''}`, 'outputResources'))),
  ]);
  if (forbidden.length) {
    result.problems.push(...forbidden);
    await writeStatus(ctx, mc, parent, undefined, undefined, result, now(), opts.continuation);
    return result;
  }
  const inputs = inputLists.map((list) => selectInputs(parent, selector, list));
  result.inputs = inputs.reduce((n, l) => n + l.length, 0);
  const observed = outputsByKey(parent, outputLists.flat());
  // What the parent owns now (the list already selected its label; ownership is the ControllerRef's).
  const final = new Map<string, KubeObject>(
    outputLists
      .flat()
      .filter((o) => isControlledBy(o, parent))
      .map((o) => [identityOf(o), o]),
  );

  // Hook calls and apiserver writes are bounded apart: a hook slot is not held while its outputs are written,
  // so a pass takes as long as the slower of the two, not their sum.
  const hookLimit = pLimit(ctx.concurrency ?? MAP_CONCURRENCY);
  const writeLimit = pLimit(WRITE_CONCURRENCY);
  // A hook call starts only while the budget has room for it, and none after a hook asked to be called later.
  const clock = Date.now;
  const mayCall = (hook: typeof mc.spec.hooks.map) =>
    result.retryAfterSeconds === undefined &&
    (!opts.budget || callFits(opts.budget.deadline - clock(), hook.timeoutSeconds * 1000, opts.budget.budgetMs));
  const call = (hook: typeof mc.spec.hooks.map, request: unknown) =>
    hookLimit(async () => {
      if (!mayCall(hook)) return DEFERRED;
      result.hookCalls += 1;
      try {
        return await ctx.hooks.call(hook, request, { deadline: opts.budget?.deadline });
      } catch (err) {
        if (err instanceof HookError && err.retryAfterSeconds !== undefined)
          result.retryAfterSeconds = Math.max(result.retryAfterSeconds ?? 0, err.retryAfterSeconds);
        throw err;
      }
    });

  if (isBeingDeleted(parent) && parent.metadata.finalizers?.includes(finalizerName(mc.name))) {
    const finalize = mc.spec.hooks.finalize;
    try {
      if (!finalize) {
        // The hook was dropped from the spec: the finalizer goes, and the outputs are left to the garbage collector.
        await setFinalizer(ctx, mc, parent, false);
        result.finalized = true;
      } else {
        const outputs = [...final.values()];
        const answered = await call(finalize, { controller: mc.object, parent, outputs: outputMap(outputs) });
        if (answered === DEFERRED) result.deferred.push(AFTER_ALL_KEYS);
        else {
          const answer = parseFinalizeAnswer(answered);
          // The outputs it does not keep are deleted now, whether or not it is done; those it keeps stay the
          // parent's until it is, then are released so they outlive the parent.
          const doomed = detachedToDelete(outputs, answer.outputs, {
            hook: 'finalize',
            namespace: mc.parent.namespaced ? parent.metadata.namespace : undefined,
          });
          if (doomed.length) await apply(ctx, mc, { create: [], update: [], delete: doomed, unchanged: [] }, final, result);
          if (answer.finalized) {
            for (const kept of final.values()) await release(ctx, mc, parent, kept, result);
            await setFinalizer(ctx, mc, parent, false);
            result.finalized = true;
          } else {
            result.finalized = false;
            wish(answer.resyncAfterSeconds ?? FINALIZE_AGAIN_SECONDS);
          }
        }
      }
    } catch (err) {
      result.problems.push(err instanceof FinalizerError ? err.problem : problemOf(err, '', 'finalize'));
    }
    // A parent whose finalizer went is gone, or going with someone else's: nothing more is written to it.
    if (result.finalized) return result;
  }

  if (!isBeingDeleted(parent)) {
    const at = { parentGeneration: parent.metadata.generation ?? 0, controller: mc.uid, generation: mc.generation };
    const pass: Pass = {
      ctx,
      mc,
      parent,
      opts,
      result,
      final,
      call,
      writeLimit,
      wish,
      at,
      answers: { ...at, inputs: {}, wakes: {} },
      claimed: new Map(),
    };
    for (const [k, objs] of observed) for (const o of objs) pass.claimed.set(identityOf(o), k);
    // In map-key order, so a follow-up goes on from the first key its pass did not reach.
    const ordered = inputs
      .flat()
      .map((input) => ({ input, mapKey: mapKeyOf(input) }))
      .sort((a, b) => (a.mapKey < b.mapKey ? -1 : a.mapKey > b.mapKey ? 1 : 0));
    const liveKeys = new Set(ordered.map(({ mapKey }) => mapKey));
    await Promise.all([
      ...ordered.map(({ input, mapKey }) => mapInput(pass, input, mapKey, observed.get(mapKey) ?? [])),
      // Detached outputs: their input is gone (or no longer matches).
      ...[...observed].filter(([mapKey]) => !liveKeys.has(mapKey)).map(([mapKey, objs]) => reapDetached(pass, mapKey, objs)),
    ]);
    if (Object.keys(pass.answers.inputs).length <= MAX_RECORDED_INPUTS) result.answers = pass.answers;
  }

  for (const p of result.problems)
    ctx.log?.('warn', 'map sync problem; nothing was deleted for it', { parent: `${namespace ?? ''}/${parent.metadata.name ?? ''}`, ...p });
  const inputTotals = new Map<ResolvedResource, number>(mc.inputs.map((k, i) => [k, inputs[i]!.length]));
  const outputsNow = new Map<ResolvedResource, KubeObject[]>(
    mc.outputs.map((k) => [k, [...final.values()].filter((o) => o.kind === k.kind && o.apiVersion === apiVersionOf(k))]),
  );
  await writeStatus(ctx, mc, parent, inputTotals, outputsNow, result, now(), opts.continuation);
  return result;
}

/** What one pass's tasks, one per input and one per detached map key, share. */
interface Pass {
  ctx: MapContext;
  mc: ResolvedMapController;
  parent: KubeObject;
  opts: MapPassOptions;
  result: MapSyncResult;
  /** What the parent owns now, by output identity: updated by every write, counted in the status. */
  final: Map<string, KubeObject>;
  /** Calls a hook within the pass's limits, or answers DEFERRED. */
  call: (hook: ResolvedMapController['spec']['hooks']['map'], request: unknown) => Promise<unknown>;
  writeLimit: LimitFunction;
  /** Records a hook's resyncAfterSeconds. */
  wish: (seconds: number | undefined) => void;
  at: Omit<AnswerRecord, 'inputs' | 'wakes'>;
  /** This pass's answers, for the next incremental pass. */
  answers: AnswerRecord;
  /** Which map key each output identity belongs to, so two inputs never fight over one output. */
  claimed: Map<string, string>;
}

/** Maps one input: its hook's answer (or its last one, while that still holds) made into its outputs. */
async function mapInput(pass: Pass, input: KubeObject, mapKey: string, mine: KubeObject[]): Promise<void> {
  const { ctx, mc, parent, opts, result, answers, at } = pass;
  const wakeFor = (dueAt: number) => {
    answers.wakes![mapKey] = dueAt;
    result.wakeAt = Math.min(result.wakeAt ?? Infinity, dueAt);
  };
  if (opts.reuse && answerHolds(opts.reuse.previous, at, input, mine, opts.reuse.touched)) {
    result.reused += 1;
    result.unchanged += mine.length;
    answers.inputs[mapKey] = opts.reuse.previous!.inputs[mapKey]!;
    // A wish not yet due still holds.
    const wake = opts.reuse.previous!.wakes?.[mapKey];
    if (wake !== undefined) wakeFor(wake);
    return;
  }
  // Earlier in this sync: left as it is (its problem, if it had one, was reported then).
  const from = opts.continuation?.cursor;
  if (from !== undefined && mapKey < from) {
    result.left += 1;
    result.unchanged += mine.length;
    return;
  }
  const what = `${input.kind ?? ''} ${input.metadata.namespace ? `${input.metadata.namespace}/` : ''}${input.metadata.name ?? ''}`;
  try {
    const answered = await pass.call(mc.spec.hooks.map, { controller: mc.object, parent, mapKey, input, outputs: outputMap(mine) });
    if (answered === DEFERRED) {
      result.deferred.push(mapKey);
      result.unchanged += mine.length;
      return;
    }
    const answer = parseHookAnswer(answered);
    if (answer.resyncAfterSeconds !== undefined) wakeFor(Date.now() + answer.resyncAfterSeconds * 1000);
    const desired = prepareOutputs(answer.outputs, { parent, mapKey, outputKinds: mc.outputs });
    for (const d of desired) {
      const owner = pass.claimed.get(identityOf(d));
      if (owner !== undefined && owner !== mapKey)
        throw new OutputError(`output ${d.kind ?? ''} ${d.metadata.name ?? ''} already belongs to map key ${owner}`);
      pass.claimed.set(identityOf(d), mapKey);
    }
    const changes = diffOutputs(mine, desired, ctx.kube.fieldManager);
    if (changes.create.length || changes.update.length || changes.delete.length)
      await pass.writeLimit(() => apply(ctx, mc, changes, pass.final, result));
    else result.unchanged += changes.unchanged.length;
    answers.inputs[mapKey] = answerFingerprint(input, desired);
  } catch (err) {
    result.problems.push(problemOf(err, mapKey, what));
  }
}

/** Reaps the outputs of a map key whose input is gone: deleted, but for those the tombstone hook keeps. */
async function reapDetached(pass: Pass, mapKey: string, objs: KubeObject[]): Promise<void> {
  const { ctx, mc, parent, result } = pass;
  try {
    let doomed = objs;
    const tombstone = mc.spec.hooks.tombstone;
    if (tombstone) {
      const answered = await pass.call(tombstone, { controller: mc.object, parent, mapKey, outputs: outputMap(objs) });
      if (answered === DEFERRED) {
        result.deferred.push(AFTER_ALL_KEYS);
        result.unchanged += objs.length;
        return;
      }
      const answer = parseHookAnswer(answered);
      pass.wish(answer.resyncAfterSeconds);
      doomed = detachedToDelete(objs, answer.outputs);
      result.detachedKept += objs.length - doomed.length;
    }
    if (doomed.length)
      await pass.writeLimit(() => apply(ctx, mc, { create: [], update: [], delete: doomed, unchanged: [] }, pass.final, result));
  } catch (err) {
    result.problems.push(problemOf(err, mapKey, 'detached outputs'));
  }
}

/** Listed items carry no apiVersion or kind: they come from the resource they were listed from. */
function typed(k: ResolvedResource, objects: KubeObject[]): KubeObject[] {
  return objects.map((o) => ({ ...o, apiVersion: apiVersionOf(k), kind: k.kind }));
}

/** Creates an output, then makes Outrigger's fields its applied ones. */
async function createOutput(ctx: MapContext, k: ResolvedOutput, d: KubeObject, final: Map<string, KubeObject>): Promise<void> {
  const made: KubeObject = { ...(await ctx.kube.create(k, d)), apiVersion: d.apiVersion, kind: d.kind };
  final.set(identityOf(d), made);
  // The create made Outrigger the owner of every field by an update; it becomes their applier, so the next
  // apply removes what the hook stops answering. Should this write be lost (someone wrote the output
  // first), the next pass makes it: the output is still owned by update.
  try {
    final.set(identityOf(d), { ...(await toApplied(ctx, k, made, d)), apiVersion: d.apiVersion, kind: d.kind });
  } catch (err) {
    if (!isKubeError(err, 'Conflict')) throw err;
  }
}

async function apply(
  ctx: MapContext,
  mc: ResolvedMapController,
  changes: ReturnType<typeof diffOutputs>,
  final: Map<string, KubeObject>,
  result: MapSyncResult,
): Promise<void> {
  const kindOf = (o: KubeObject) => mc.outputs.find((k) => k.kind === o.kind && apiVersionOf(k) === o.apiVersion)!;
  for (const d of changes.create) {
    try {
      await createOutput(ctx, kindOf(d), d, final);
      result.created += 1;
    } catch (err) {
      // Someone else's object by that name: never taken over.
      if (isKubeError(err, 'AlreadyExists'))
        throw new OutputError(`output ${d.kind ?? ''} ${d.metadata.name ?? ''} exists and is not this parent's; it is left alone`);
      throw err;
    }
  }
  for (const { desired, observed, content } of changes.update) {
    const k = kindOf(desired);
    if (k.updateMethod === 'Recreate' && content) {
      await recreate(ctx, k, observed, desired, final, result);
      continue;
    }
    const current = await toApplied(ctx, k, observed, desired);
    // Conditional on what was read: an output whose owner changed since is not written.
    const body = { ...desired, metadata: { ...desired.metadata, resourceVersion: current.metadata.resourceVersion } };
    const written = await ctx.kube.patch(
      k,
      { name: desired.metadata.name ?? '', namespace: k.namespaced ? desired.metadata.namespace : undefined },
      body,
      'apply',
      { force: true },
    );
    final.set(identityOf(desired), { ...written, apiVersion: desired.apiVersion, kind: desired.kind });
    result.updated += 1;
  }
  result.unchanged += changes.unchanged.length;
  for (const o of changes.delete) {
    const k = kindOf(o);
    try {
      await ctx.kube.delete(
        k,
        { name: o.metadata.name ?? '', namespace: k.namespaced ? o.metadata.namespace : undefined },
        {
          preconditions: { uid: o.metadata.uid! },
        },
      );
    } catch (err) {
      if (!isKubeError(err, 'NotFound') && !isKubeError(err, 'Conflict')) throw err;
    }
    final.delete(identityOf(o));
    result.deleted += 1;
  }
}

/**
 * updateStrategy Recreate: the output as read is deleted (conditional on its uid and resourceVersion: one changed
 * since is left for the next pass) and created anew from the answer. One that is still going (a finalizer of its
 * own) is created by the pass its deletion event brings.
 */
async function recreate(
  ctx: MapContext,
  k: ResolvedOutput,
  observed: KubeObject,
  desired: KubeObject,
  final: Map<string, KubeObject>,
  result: MapSyncResult,
): Promise<void> {
  const ns = k.namespaced ? observed.metadata.namespace : undefined;
  if (!isBeingDeleted(observed)) {
    try {
      await ctx.kube.delete(
        k,
        { name: observed.metadata.name ?? '', namespace: ns },
        {
          preconditions: { uid: observed.metadata.uid!, resourceVersion: observed.metadata.resourceVersion! },
        },
      );
    } catch (err) {
      if (!isKubeError(err, 'NotFound')) throw err;
    }
  }
  final.delete(identityOf(observed));
  try {
    await createOutput(ctx, k, desired, final);
    result.recreated += 1;
  } catch (err) {
    if (!isKubeError(err, 'AlreadyExists')) throw err;
    ctx.log?.('info', 'output being deleted for its recreation; the pass its deletion brings creates it', {
      output: `${ns ?? ''}/${observed.metadata.name ?? ''}`,
    });
  }
}

/** A write of the parent's finalizer refused: the parent's problem, named as such. */
class FinalizerError extends Error {
  readonly problem: Problem;
  constructor(problem: Problem) {
    super(problem.message);
    this.name = 'FinalizerError';
    this.problem = problem;
  }
}

/**
 * Adds or removes the controller's finalizer on the parent (a merge patch conditional on the resourceVersion read,
 * re-read on a conflict). Throws FinalizerError when the apiserver refuses it.
 */
async function setFinalizer(ctx: MapContext, mc: ResolvedMapController, parent: KubeObject, want: boolean): Promise<KubeObject> {
  try {
    return await writeFinalizer(ctx, mc, parent, want);
  } catch (err) {
    if (err instanceof KubeError) throw new FinalizerError(finalizerProblem(err, mc));
    throw err;
  }
}

async function writeFinalizer(ctx: MapContext, mc: ResolvedMapController, parent: KubeObject, want: boolean): Promise<KubeObject> {
  const name = finalizerName(mc.name);
  const ns = mc.parent.namespaced ? parent.metadata.namespace : undefined;
  let current = parent;
  for (let attempt = 0; ; attempt += 1) {
    const finalizers = finalizersWith(current.metadata.finalizers, name, want);
    if (!finalizers) return current;
    try {
      const written = await ctx.kube.patch(
        mc.parent,
        { name: current.metadata.name ?? '', namespace: ns },
        { metadata: { resourceVersion: current.metadata.resourceVersion, finalizers: finalizers.length ? finalizers : null } },
        'merge',
      );
      return { ...written, apiVersion: parent.apiVersion, kind: parent.kind };
    } catch (err) {
      if (!isKubeError(err, 'Conflict') || attempt >= 4) throw err;
      const fresh = await ctx.kube.find(mc.parent, { name: current.metadata.name ?? '', namespace: ns });
      // Gone, or another object of that name: nothing to add or remove any more.
      if (!fresh || fresh.metadata.uid !== parent.metadata.uid) return current;
      current = { ...fresh, apiVersion: parent.apiVersion, kind: parent.kind };
    }
  }
}

function finalizerProblem(err: KubeError, mc: ResolvedMapController): Problem {
  if (isKubeError(err, 'Forbidden'))
    return {
      mapKey: '',
      what: 'finalizer',
      reason: 'Forbidden',
      message: `the controller's ServiceAccount may not patch ${mc.parent.resource}${mc.parent.group ? `.${mc.parent.group}` : ''} to set its finalizer`,
      detail: err.message,
    };
  return problemOf(err, '', 'finalizer');
}

/** An output the finalize hook kept: no longer the parent's, so it outlives it. */
async function release(
  ctx: MapContext,
  mc: ResolvedMapController,
  parent: KubeObject,
  o: KubeObject,
  result: MapSyncResult,
): Promise<void> {
  const k = mc.outputs.find((r) => r.kind === o.kind && apiVersionOf(r) === o.apiVersion);
  if (!k) return;
  try {
    await ctx.kube.patch(
      k,
      { name: o.metadata.name ?? '', namespace: k.namespaced ? o.metadata.namespace : undefined },
      releasePatch(o, parent.metadata.uid ?? ''),
      'merge',
    );
    result.released += 1;
  } catch (err) {
    if (!isKubeError(err, 'NotFound')) throw err;
  }
}

/** The output with Outrigger's fields owned by its applies only (appliedOwnership), conditional on what was read. */
async function toApplied(ctx: MapContext, k: ResolvedResource, o: KubeObject, desired: KubeObject): Promise<KubeObject> {
  const managedFields = appliedOwnership(o, ctx.kube.fieldManager, desired);
  if (!managedFields) return o;
  // Only managedFields change: no field changes owner to this patch's own update.
  return ctx.kube.patch(
    k,
    { name: o.metadata.name ?? '', namespace: k.namespaced ? o.metadata.namespace : undefined },
    { metadata: { resourceVersion: o.metadata.resourceVersion, managedFields } },
    'merge',
  );
}

function problemOf(err: unknown, mapKey: string, what: string): Problem {
  if (err instanceof HookError) return { mapKey, what, reason: `Hook${err.reason}`, message: err.message, detail: err.detail };
  if (err instanceof HookResponseError) return { mapKey, what, reason: 'HookMalformedAnswer', message: err.message };
  if (err instanceof OutputError) return { mapKey, what, reason: 'InvalidOutput', message: err.message };
  // The apiserver's message may quote the output (an invalid value): it goes to the log, the status gets its kind.
  if (err instanceof KubeError)
    return {
      mapKey,
      what,
      reason: 'WriteFailed',
      message: `the apiserver refused a write: HTTP ${err.status} ${err.kind}`,
      detail: err.message,
    };
  throw err;
}

async function writeStatus(
  ctx: MapContext,
  mc: ResolvedMapController,
  parent: KubeObject,
  inputs: ReadonlyMap<ResolvedResource, number> | undefined,
  outputs: ReadonlyMap<ResolvedResource, KubeObject[]> | undefined,
  result: MapSyncResult,
  now: Date,
  earlier: Continuation | undefined,
): Promise<void> {
  const current = parent.status as Partial<MapStatus> | undefined;
  const counts = inputs && outputs ? aggregate(inputs, outputs) : { inputs: current?.inputs ?? {}, outputs: current?.outputs ?? {} };
  const first = result.problems.slice(0, MESSAGE_PROBLEMS).map((p) => `${p.what}: ${p.message}`);
  const more = result.problems.length > MESSAGE_PROBLEMS ? `; and ${result.problems.length - MESSAGE_PROBLEMS} more` : '';
  const deferred = result.deferred.filter((k) => k !== AFTER_ALL_KEYS).length;
  const rest = !result.deferred.length
    ? ''
    : result.retryAfterSeconds !== undefined
      ? `; ${deferred} input(s) not called yet: the hook asked to be called again after ${result.retryAfterSeconds} s`
      : `; ${deferred} input(s) not reached within the pass's time budget, continued by a follow-up pass`;
  const synced = result.problems.length
    ? {
        type: 'Synced',
        status: 'False' as const,
        reason: result.problems[0]!.reason,
        message: `${result.problems.length} problem(s), nothing deleted for them: ${first.join('; ')}${more}${rest}`,
      }
    : isBeingDeleted(parent)
      ? {
          type: 'Synced',
          status: 'False' as const,
          reason: 'Deleting',
          message:
            result.finalized === false
              ? 'the parent is being deleted: its finalize hook has not finished'
              : 'the parent is being deleted: status only',
        }
      : earlier?.problems
        ? {
            type: 'Synced',
            status: 'False' as const,
            reason: earlier.reason,
            message: `${earlier.problems} problem(s) in the earlier passes of this sync, nothing deleted for them (each pass's status and the log named them)${rest}`,
          }
        : result.deferred.length
          ? {
              type: 'Synced',
              status: 'False' as const,
              reason: 'InProgress',
              message: `${result.inputs - deferred} of ${result.inputs} input(s) mapped${rest}`,
            }
          : { type: 'Synced', status: 'True' as const, reason: 'Synced', message: `${result.inputs} input(s) mapped` };
  const next: MapStatus = {
    observedGeneration: parent.metadata.generation,
    ...counts,
    conditions: setCondition(current?.conditions, synced, now),
  };
  if (!statusChanged(current, next)) return;
  const name = parent.metadata.name ?? '';
  const ns = mc.parent.namespaced ? parent.metadata.namespace : undefined;
  if (mc.parentStatus) {
    await ctx.kube.patch(mc.parent, { name, namespace: ns, subresource: 'status' }, { status: statusPatch(current, next) }, 'merge');
  } else {
    // Without a status subresource the write itself moves the generation by one: the status names the generation
    // it makes (exact, being conditional on the object read), or the parent would look unsynced for ever.
    const written = { ...next, observedGeneration: (parent.metadata.generation ?? 0) + 1 };
    await ctx.kube.patch(
      mc.parent,
      { name, namespace: ns },
      { metadata: { resourceVersion: parent.metadata.resourceVersion }, status: statusPatch(current, written) },
      'merge',
    );
  }
  result.statusWritten = true;
}
