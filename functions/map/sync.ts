// One MapController sync pass for one parent (docs/controllers/mapcontroller.md): list the inputs and the parent's outputs, call the map
// hook once per input (in parallel, bounded), reconcile each input's outputs, hand detached outputs to the
// tombstone hook, and write the aggregated status. A failed hook call or a bad answer changes nothing for its
// input and is reported in the parent's status; the other inputs go on. A parent being deleted gets its status
// and, while it carries the controller's finalizer, its finalize hook only. Writes: create (never takes over an
// existing object), server-side apply with Outrigger's field manager (`outrigger`), conditional on the
// resourceVersion that was read, or a delete and a create for updateStrategy Recreate, delete with a uid
// precondition.
import pLimit, { type LimitFunction } from 'p-limit';
import { HookError } from '../../shared/hooks/index.ts';
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
  finalizersWith,
  identityOf,
  inputSelector,
  mapKeyOf,
  OutputError,
  outputMap,
  outputsByKey,
  prepareOutputs,
  selectInputs,
  MAX_RECORDED_INPUTS,
  type AnswerRecord,
} from '../../shared/map/plan/index.ts';
import { isBeingDeleted, isControlledBy, SelectorError, selectorString } from '../../shared/ownership/index.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import type { ResolvedMapController } from './controllers.ts';
import { FinalizerError, setFinalizer } from './finalize.ts';
import { apply, release } from './outputs.ts';
import { DEFERRED, problemOf, type MapContext, type MapPassOptions, type MapSyncResult, type Problem } from './pass.ts';
import { writeStatus } from './status.ts';

/** Hook calls in flight per pass (a Lambda hook scales out; a webhook should take this many at once). */
export const MAP_CONCURRENCY = 32;
/** Output writes in flight per pass. */
const WRITE_CONCURRENCY = 16;

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

  // The controller's finalizer is on every parent while it has a finalize hook, and on none otherwise
  // (docs/controllers/mapcontroller.md#lifecycle). A parent being deleted only ever loses it, once its finalize hook is done.
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
        return await ctx.hooks.call(hook, request, { deadline: opts.budget?.deadline, controller: { cluster: key.cluster, uid: mc.uid } });
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
