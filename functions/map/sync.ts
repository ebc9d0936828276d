// One MapController sync pass for one parent (docs/controllers/mapcontroller.md): list the inputs and the parent's outputs, call the map
// hook once per input (in parallel, bounded), reconcile each input's outputs, hand detached outputs to the
// tombstone hook, and write the aggregated status. A failed hook call or a bad answer changes nothing for its
// input and is reported in the parent's status; the other inputs go on. A parent being deleted gets its status
// and, while it carries the controller's finalizer, its finalize hook only. Writes: create (never takes over an
// existing object), server-side apply with Outrigger's field manager (`outrigger`), conditional on the
// resourceVersion that was read, or a delete and a create for updateStrategy Recreate, delete with a uid
// precondition.
import pLimit, { type LimitFunction } from 'p-limit';
import { HookError, hookTimeoutSeconds } from '../../shared/hooks/index.ts';
import { apiVersionOf, isKubeError, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import { finalizerName, PARENT_LABEL, parseFinalizeAnswer, parseHookAnswer } from '../../shared/map/api.ts';
import {
  AFTER_ALL_KEYS,
  answerFingerprint,
  answerHolds,
  callFits,
  detachedToDelete,
  diffOutputs,
  FINALIZE_AGAIN_SECONDS,
  identityOf,
  inputSelector,
  mapKeyOf,
  OutputError,
  outputMap,
  outputsByKey,
  prepareOutputs,
  recordedAnswers,
  selectInputs,
  type AnswerRecord,
} from '../../shared/map/plan/index.ts';
import { finalizersWith } from '../../shared/metacontroller/finalizers.ts';
import { isBeingDeleted, isControlledBy, SelectorError, selectorString, type Selector } from '../../shared/ownership/index.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import type { ResolvedMapController } from './controllers.ts';
import { FinalizerError, setFinalizer } from './finalize.ts';
import { apply, release } from './outputs.ts';
import { DEFERRED, emptyResult, problemOf, type MapContext, type MapPassOptions, type MapSyncResult, type Problem } from './pass.ts';
import { writeStatus } from './status.ts';

/** Hook calls in flight per pass (a Lambda hook scales out; a webhook should take this many at once). */
export const MAP_CONCURRENCY = 32;
/** Output writes in flight per pass. */
const WRITE_CONCURRENCY = 16;

export async function syncMap(ctx: MapContext, mc: ResolvedMapController, key: SyncKey, opts: MapPassOptions = {}): Promise<MapSyncResult> {
  const result = emptyResult();
  const found = await readParent(ctx, mc, key);
  if (!found) return { ...result, skipped: 'parent gone' };
  // The controller's finalizer is on every parent while it has a finalize hook, and on none otherwise.
  const parent = await keepFinalizer(ctx, mc, found, result);
  const now = ctx.now ?? (() => new Date());
  // A pass that can go no further says why in the parent's status, its counts left as they were.
  const stop = async () => {
    await writeStatus(ctx, mc, parent, result, { now: now(), earlier: opts.continuation });
    return result;
  };
  // The parent's selector; an invalid one is the parent's problem.
  const selector = selectorFor(parent, result);
  if (!selector) return stop();
  // Its inputs and outputs, listed as the controller's ServiceAccount: a list it may not make stops the pass.
  const listed = await listObjects(ctx, mc, parent, selector, result);
  if (!listed) return stop();
  // Hook calls and output writes, each bounded, within the pass's budget.
  const pass = startPass({ ctx, mc, parent, opts, result, final: listed.final }, key.cluster);
  // A parent being deleted: its finalize hook, while it carries the controller's finalizer.
  if (isBeingDeleted(parent) && parent.metadata.finalizers?.includes(finalizerName(mc.name))) {
    await finalizeParent(pass);
    // A parent whose finalizer went is gone, or going with someone else's: nothing more is written to it.
    if (result.finalized) return result;
  }
  // Otherwise each input's hook, and the tombstone hook for each map key whose input is gone.
  if (!isBeingDeleted(parent)) await mapAll(pass, listed.inputs, listed.observed);
  // The problems to the log, the counts and conditions to the parent's status.
  await reportPass(pass, listed.inputs, now());
  return result;
}

/** The parent the request names, if it is still there (the same uid). */
async function readParent(ctx: MapContext, mc: ResolvedMapController, key: SyncKey): Promise<KubeObject | undefined> {
  const found = await ctx.kube.find(mc.parent, { name: key.name, namespace: mc.parent.namespaced ? key.namespace : undefined });
  if (!found || found.metadata.uid !== key.uid) return undefined;
  // Listed and fetched objects carry no apiVersion or kind in some clients; hooks and ControllerRefs need both.
  return { ...found, apiVersion: apiVersionOf(mc.parent), kind: mc.parent.kind };
}

/**
 * Adds or removes the controller's finalizer as the spec has a finalize hook or not
 * (docs/controllers/mapcontroller.md#lifecycle). A parent being deleted only ever loses it, once its finalize hook is done.
 */
async function keepFinalizer(ctx: MapContext, mc: ResolvedMapController, parent: KubeObject, result: MapSyncResult): Promise<KubeObject> {
  // A controller being deleted adds none: its deletion is releasing its parents.
  const want = Boolean(mc.spec.hooks.finalize) && !isBeingDeleted(mc.object);
  if (isBeingDeleted(parent) || !finalizersWith(parent.metadata.finalizers, finalizerName(mc.name), want)) return parent;
  try {
    return await setFinalizer(ctx, mc, parent, want);
  } catch (err) {
    if (!(err instanceof FinalizerError)) throw err;
    result.problems.push(err.problem);
    return parent;
  }
}

/** The parent's input selector; undefined (its problem recorded) when it is invalid and the parent is not being deleted. */
function selectorFor(parent: KubeObject, result: MapSyncResult): Selector | undefined {
  try {
    return inputSelector(parent);
  } catch (err) {
    if (!(err instanceof SelectorError)) throw err;
    if (!isBeingDeleted(parent)) {
      result.problems.push({ mapKey: '', what: 'spec.selector', reason: 'InvalidSelector', message: err.message });
      return undefined;
    }
    // A parent being deleted still gets its finalize hook: its inputs no longer matter.
    return inputSelector({ ...parent, spec: {} });
  }
}

interface Listed {
  /** The inputs selected, one list per input resource (in mc.inputs' order). */
  inputs: KubeObject[][];
  /** The parent's outputs by map key. */
  observed: ReturnType<typeof outputsByKey>;
  /** What the parent owns now, by output identity. */
  final: Map<string, KubeObject>;
}

/**
 * Inputs: objects of every input resource matching the selector, in the parent's namespace (cluster-wide for a
 * cluster-scoped parent or input resource). Outputs: the parent's, found by its label, judged by ControllerRef.
 * Lists as the controller's ServiceAccount: one it may not make is the parent's Forbidden (undefined), and nothing is done.
 */
async function listObjects(
  ctx: MapContext,
  mc: ResolvedMapController,
  parent: KubeObject,
  selector: Selector,
  result: MapSyncResult,
): Promise<Listed | undefined> {
  const namespace = parent.metadata.namespace;
  const labelSelector = selectorString(selector);
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
    return undefined;
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
  return { inputs, observed, final };
}

/** The pass its tasks share: its hook calls and writes bounded, its hook calls within the budget. */
function startPass(base: Pick<Pass, 'ctx' | 'mc' | 'parent' | 'opts' | 'result' | 'final'>, cluster: string): Pass {
  const { ctx, mc, parent, opts, result } = base;
  const wish = (seconds: number | undefined) => {
    if (seconds !== undefined) result.wakeAt = Math.min(result.wakeAt ?? Infinity, Date.now() + seconds * 1000);
  };
  // Hook calls and apiserver writes are bounded apart: a hook slot is not held while its outputs are written,
  // so a pass takes as long as the slower of the two, not their sum.
  const hookLimit = pLimit(ctx.concurrency ?? MAP_CONCURRENCY);
  const writeLimit = pLimit(WRITE_CONCURRENCY);
  // A hook call starts only while the budget has room for it, and none after a hook asked to be called later.
  const clock = Date.now;
  const mayCall = (hook: MapHook) =>
    result.retryAfterSeconds === undefined &&
    (!opts.budget || callFits(opts.budget.deadline - clock(), hookTimeoutSeconds(hook) * 1000, opts.budget.budgetMs));
  const call = (hook: MapHook, request: unknown) =>
    hookLimit(async () => {
      if (!mayCall(hook)) return DEFERRED;
      result.hookCalls += 1;
      try {
        return await ctx.hooks.call(hook, request, {
          deadline: opts.budget?.deadline,
          controller: { cluster, uid: mc.uid, kind: 'MapController', name: mc.name, namespace: mc.serviceAccount.namespace },
          // The pass's client is the controller's ServiceAccount's: Service hooks and webhook Secrets go through it.
          cluster: ctx.kube,
        });
      } catch (err) {
        if (err instanceof HookError && err.retryAfterSeconds !== undefined)
          result.retryAfterSeconds = Math.max(result.retryAfterSeconds ?? 0, err.retryAfterSeconds);
        throw err;
      }
    });
  const at = { parentGeneration: parent.metadata.generation ?? 0, controller: mc.uid, generation: mc.generation };
  return { ...base, call, writeLimit, wish, at, answers: { ...at, inputs: {}, wakes: {} }, claimed: new Map() };
}

/** Calls the finalize hook (or, with none in the spec, only removes the finalizer); `result.finalized` says whether it is done. */
async function finalizeParent(pass: Pass): Promise<void> {
  const { ctx, mc, parent, result, final } = pass;
  const finalize = mc.spec.hooks.finalize;
  try {
    if (!finalize) {
      // The hook was dropped from the spec: the finalizer goes, and the outputs are left to the garbage collector.
      await setFinalizer(ctx, mc, parent, false);
      result.finalized = true;
      return;
    }
    const outputs = [...final.values()];
    const answered = await pass.call(finalize, { controller: mc.object, parent, outputs: outputMap(outputs) });
    if (answered === DEFERRED) {
      result.deferred.push(AFTER_ALL_KEYS);
      return;
    }
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
      pass.wish(answer.resyncAfterSeconds ?? FINALIZE_AGAIN_SECONDS);
    }
  } catch (err) {
    result.problems.push(err instanceof FinalizerError ? err.problem : problemOf(err, '', 'finalize'));
  }
}

/** Maps every input and reaps every detached map key, at once within the pass's limits. */
async function mapAll(pass: Pass, inputs: KubeObject[][], observed: Listed['observed']): Promise<void> {
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
  pass.result.answers = recordedAnswers(pass.answers);
}

/** Logs the pass's problems and writes the parent's status: its inputs' and outputs' counts, and its conditions. */
async function reportPass(pass: Pass, inputs: KubeObject[][], now: Date): Promise<void> {
  const { ctx, mc, parent, result, final, opts } = pass;
  for (const p of result.problems)
    ctx.log?.('warn', 'map sync problem; nothing was deleted for it', {
      parent: `${parent.metadata.namespace ?? ''}/${parent.metadata.name ?? ''}`,
      ...p,
    });
  const inputTotals = new Map<ResolvedResource, number>(mc.inputs.map((k, i) => [k, inputs[i]!.length]));
  const outputsNow = new Map<ResolvedResource, KubeObject[]>(
    mc.outputs.map((k) => [k, [...final.values()].filter((o) => o.kind === k.kind && o.apiVersion === apiVersionOf(k))]),
  );
  await writeStatus(ctx, mc, parent, result, { counted: { inputs: inputTotals, outputs: outputsNow }, now, earlier: opts.continuation });
}

type MapHook = ResolvedMapController['spec']['hooks']['map'];

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
  call: (hook: MapHook, request: unknown) => Promise<unknown>;
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
