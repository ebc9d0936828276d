import type { ClusterCache } from '../cluster-cache.ts';
import type { HookCaller } from '../../shared/hooks/index.ts';
import type { KubeClient } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import type { SyncTools } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest, parseSyncCause, type SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { CONTROLLER_FINALIZER, controllerCause, definitionOf, finalizerName, MAP_GROUP, RESYNC_CAUSE } from '../../shared/map/api.ts';
import {
  CONTINUE_CAUSE,
  continuationCause,
  continuationOf,
  passBudgetMs,
  passDecision,
  passOutcome,
  type Continuation,
  type PassOutcome,
  type PassRecord,
} from '../../shared/map/plan/index.ts';
import { nextWake, timerOf, WAKE_CAUSE } from '../../shared/metacontroller/timers.ts';
import type { State } from '../../shared/state/index.ts';
import { apiVersionOf, type KubeObject } from '../../shared/kube/index.ts';
import { isBeingDeleted } from '../../shared/ownership/index.ts';
import { warnProblems } from '../metacontroller/events.ts';
import { writeFinalizer } from '../metacontroller/finalizers.ts';
import { queueParentsOf } from '../metacontroller/fan-out.ts';
import { followRetry } from '../metacontroller/retry.ts';
import { sendTimer, serveTimer } from '../metacontroller/timers.ts';
import {
  actingAs,
  listMapControllers,
  MAP_TARGET,
  mapControllerFor,
  mapControllers,
  writeReadiness,
  type MapControllerSet,
  type ResolvedMapController,
} from './controllers.ts';
import type { MapSyncResult } from './pass.ts';
import { setFinalizer } from './finalize.ts';
import { syncMap } from './sync.ts';

/** Events' reportingController. */
const MAP_CONTROLLER = 'outrigger.dev/map';
/** Clock skew allowed between SQS's SentTimestamp and this function's clock. */
const SKEW_MS = 1_000;
/** A request carries at most this many causes (makeSyncRequest): one with that many may have lost some. */
const MAX_CAUSES = 10;
/** Pass records expire with the parent's activity: a parent not synced for a day has its record dropped. */
const PASS_TTL_SECONDS = 86_400;

export interface MapServeContext {
  kube: KubeClient;
  state: State;
  syncSink: SyncSink;
  hooks: HookCaller;
  controllers: ClusterCache<MapControllerSet>;
  log: Log;
  /** The pass's time budget (passBudgetMs of the invocation's remaining time); without it a pass calls every hook. */
  budget?: { deadline: number; budgetMs: number } | undefined;
  /** How many times this request has been received (1: the first time). */
  receiveCount?: number | undefined;
  /** Hook calls in flight per pass (functions/map/sync.ts, MAP_CONCURRENCY by default). */
  concurrency?: number | undefined;
  /** The MapControllers served in the cluster: its controllerSelector (functions/controller-source.ts listServedDefinitions). */
  controllerSelector?: string | undefined;
}

/** Where a parent's last pass is recorded. */
const passKeyOf = (key: SyncRequest['key']) => ({ cluster: key.cluster, kind: 'map-pass', name: key.uid });

/** One sync request: a MapController's change queues its parents; a parent's runs a pass unless already served. */
export async function serveMapRequest(request: SyncRequest, sentAt: number, ctx: MapServeContext): Promise<void> {
  const { key, causes } = request;
  // The controller changed: every parent it governs syncs against the new definition, which its requests name.
  if (key.kind === 'MapController' && key.group === MAP_GROUP) return queueParents(request, ctx);
  const passKey = passKeyOf(key);
  const timer = timerOf(causes);
  if (timer !== undefined)
    return serveTimer(ctx, 'map', { key, dueAt: timer, sentAt }, (await ctx.state.records.get<PassRecord>(passKey))?.value);
  // The last pass's record, and the controller, unless a later pass already served the request.
  const last = (await ctx.state.records.get<PassRecord>(passKey))?.value;
  const mc = await controllerToRun(request, sentAt, ctx, last);
  if (!mc) return;
  const startedAt = Date.now();
  // The pass, as the controller's ServiceAccount.
  const pass = await runPass(request, ctx, mc, last);
  const { result, continuation, receiveCount } = pass;
  // One Warning per warned reason, as Outrigger.
  const regarding = {
    apiVersion: apiVersionOf(mc.parent),
    kind: mc.parent.kind,
    metadata: { name: key.name, namespace: key.namespace, uid: key.uid },
  };
  await warnProblems(ctx, regarding, result.problems, {
    reporter: { controller: MAP_CONTROLLER, instance: mc.name },
    note: (count, first) => `${count} input(s) failed, nothing deleted for them: ${first.what}: ${first.message}`,
  });
  const outcome = passOutcome({
    deferred: result.deferred,
    problems: result.problems,
    retryAfterSeconds: result.retryAfterSeconds,
    earlier: continuation,
    receiveCount,
  });
  // The pass's record, for the next request, and the timer a hook's wish asks for.
  const wake = await recordPass(ctx, key, { mc, last, pass, outcome, startedAt });
  ctx.log('info', 'map synced', {
    controller: mc.name,
    generation: mc.generation,
    parent: `${key.namespace ?? ''}/${key.name}`,
    incremental: pass.incremental,
    ...result,
    deferred: result.deferred.length,
    problems: result.problems.length,
    durationMs: Date.now() - startedAt,
    budgetMs: ctx.budget?.budgetMs,
    outcome: outcome.kind,
    wakeAt: wake.wakeAt,
    timerSent: wake.send,
  });
  // A follow-up for what is left, a retry for what failed, or a warning that retries ran out.
  await followUp(request, ctx, outcome, receiveCount);
}

/** Forgets the cluster's MapControllers, writes their readiness and queues every parent of the one that changed. */
async function queueParents({ key, causes }: SyncRequest, ctx: MapServeContext): Promise<void> {
  const { kube } = ctx;
  ctx.controllers.forget(key.cluster);
  const set = await listMapControllers(kube, key.cluster, ctx.controllers, ctx.controllerSelector);
  const invalid = set.invalid.find((i) => i.name === key.name);
  if (invalid) ctx.log('warn', 'MapController is invalid; its parents are left as they are', { ...invalid });
  await writeReadiness(kube, set);
  const object = set.objects.find((o) => o.metadata.uid === key.uid);
  const mc = set.valid.find((m) => m.uid === key.uid);
  // Being deleted: its finalizer goes from every parent, then its own; no parent is queued.
  if (object && isBeingDeleted(object)) return releaseParents(ctx, object, mc);
  if (!mc) return;
  if (object && mc.spec.hooks.finalize) await writeFinalizer(kube, mapControllers, object, CONTROLLER_FINALIZER, true);
  const parents = await actingAs(kube, mc).listAll(mc.parent);
  const queued = await queueParentsOf(ctx.syncSink, key.cluster, mc.parent, parents, [controllerCause(mc), ...causes]);
  ctx.log('info', 'MapController changed; parents queued', { controller: mc.name, generation: mc.generation, parents: queued });
}

/**
 * A MapController being deleted (docs/controllers/mapcontroller.md#lifecycle): its finalizer is removed
 * from each of its parents, as its ServiceAccount, and then Outrigger's from the MapController, which then goes.
 * A controller that cannot run (its ServiceAccount gone, say) cannot release them: that is logged, and it goes.
 */
async function releaseParents(ctx: MapServeContext, object: KubeObject, mc: ResolvedMapController | undefined): Promise<void> {
  if (!object.metadata.finalizers?.includes(CONTROLLER_FINALIZER)) return;
  if (mc) {
    const pass = { kube: actingAs(ctx.kube, mc), hooks: ctx.hooks, log: ctx.log };
    const parents = await pass.kube.listAll(mc.parent);
    for (const p of parents.filter((o) => o.metadata.finalizers?.includes(finalizerName(mc.name))))
      await setFinalizer(pass, mc, { ...p, apiVersion: apiVersionOf(mc.parent), kind: mc.parent.kind }, false);
    ctx.log('info', 'MapController deleted; its parents released', { controller: mc.name, parents: parents.length });
  } else ctx.log('warn', 'MapController deleted while it cannot run; its parents keep its finalizer', { controller: object.metadata.name });
  await writeFinalizer(ctx.kube, mapControllers, object, CONTROLLER_FINALIZER, false);
}

/**
 * The parent's MapController, when a pass is to run. A pass that started after this request was queued, with the
 * same definition, read everything after the change that caused it: the request is already served. This keeps a
 * pass's own output writes (whose events come back as requests) from starting one full pass each; at most one
 * follow-up pass runs.
 */
async function controllerToRun(
  { key, causes }: SyncRequest,
  sentAt: number,
  ctx: MapServeContext,
  last: PassRecord | undefined,
): Promise<ResolvedMapController | undefined> {
  const requested = definitionOf(causes);
  let mc = mapControllerFor(await listMapControllers(ctx.kube, key.cluster, ctx.controllers, ctx.controllerSelector), key.group, key.kind);
  const request = { causes, parentUid: key.uid };
  const decide = (refreshed: boolean) => passDecision({ last, sentAt, skewMs: SKEW_MS, current: mc, requested, refreshed, request });
  let decision = decide(false);
  if (decision === 'refresh') {
    ctx.controllers.forget(key.cluster);
    mc = mapControllerFor(await listMapControllers(ctx.kube, key.cluster, ctx.controllers, ctx.controllerSelector), key.group, key.kind);
    decision = decide(true);
  }
  if (!mc || decision === 'no-controller') return undefined;
  if (decision === 'served') {
    ctx.log('info', 'map sync already served by a later pass', {
      parent: `${key.namespace ?? ''}/${key.name}`,
      sentAt,
      passStartedAt: last?.startedAt,
      generation: mc.generation,
    });
    return undefined;
  }
  return mc;
}

interface PassRun {
  answers: MapSyncResult['answers'];
  result: Omit<MapSyncResult, 'answers'>;
  incremental: boolean;
  /** The uids the request named, which an incremental pass re-answered. */
  touched: ReadonlySet<string>;
  continuation: Continuation | undefined;
  receiveCount: number;
}

/** Runs the pass: incremental or whole, from the start or a continuation's cursor. */
async function runPass(
  { key, causes }: SyncRequest,
  ctx: MapServeContext,
  mc: ResolvedMapController,
  last: PassRecord | undefined,
): Promise<PassRun> {
  // An event-driven pass calls the hook only for inputs whose last answer no longer holds. A resync calls every
  // hook (a hook may depend on the clock), and so does a request whose causes may have been cut short.
  const incremental = !causes.some((c) => c.startsWith(RESYNC_CAUSE)) && causes.length < MAX_CAUSES;
  const touched = new Set(
    causes
      .filter((c) => !c.startsWith(CONTINUE_CAUSE) && !c.startsWith(WAKE_CAUSE))
      .map((c) => parseSyncCause(c).uid)
      .filter((u): u is string => Boolean(u)),
  );
  // A follow-up goes on from where its pass stopped; a retried one (its message failed) is a whole pass again.
  const receiveCount = ctx.receiveCount ?? 1;
  const continuation = receiveCount > 1 ? undefined : continuationOf(causes);
  // Every read and write of parents, inputs and outputs is the ServiceAccount's (docs/controllers/mapcontroller.md#identity-each-mapcontroller-acts-as-its-own-serviceaccount).
  const { answers, ...result } = await syncMap(
    { kube: actingAs(ctx.kube, mc), hooks: ctx.hooks, log: ctx.log, ...(ctx.concurrency ? { concurrency: ctx.concurrency } : {}) },
    mc,
    key,
    {
      reuse: incremental ? { previous: last?.answers, touched } : undefined,
      budget: ctx.budget,
      continuation,
    },
  );
  return { answers, result, incremental, touched, continuation, receiveCount };
}

/** Writes the pass's record and sends the timer for the earliest wake a hook asked for; returns that wake. */
async function recordPass(
  ctx: MapServeContext,
  key: SyncRequest['key'],
  {
    mc,
    last,
    pass,
    outcome,
    startedAt,
  }: { mc: ResolvedMapController; last: PassRecord | undefined; pass: PassRun; outcome: PassOutcome; startedAt: number },
): Promise<{ wakeAt: number | undefined; send: boolean }> {
  const { answers, result, continuation } = pass;
  const passKey = passKeyOf(key);
  // Only a clean pass (of a whole sync) serves later requests: after a problem or with inputs left, the next
  // request runs a pass. A follow-up that left inputs to its sync's earlier pass did not look at them: it serves
  // nothing. The answers are kept either way, so a follow-up or retry calls only what is still owed.
  const clean = outcome.kind === 'done' && !result.problems.length && !continuation?.problems && !result.left;
  // What it looked at: a pass that kept answers serves only requests about what it did look at.
  const looked = pass.incremental && result.reused ? { outputs: [...pass.touched] } : ('all' as const);
  // The earliest wake a hook asked for: a timer is sent for it unless one already pending is due no later.
  const wake = result.skipped || result.finalized ? { wakeAt: undefined, send: false } : nextWake(last?.wakeAt, result.wakeAt, Date.now());
  const record: PassRecord = {
    startedAt: clean ? startedAt : 0,
    controller: mc.uid,
    generation: mc.generation,
    answers,
    looked,
    ...(wake.wakeAt === undefined ? {} : { wakeAt: wake.wakeAt }),
  };
  if (!result.skipped && (clean || answers || wake.wakeAt !== undefined || last?.wakeAt !== undefined))
    await ctx.state.records.put(passKey, record, 'any', { ttlSeconds: PASS_TTL_SECONDS });
  // The record names the timer before it is sent, or a timer received at once (another invocation) would find its
  // time unnamed and be dropped as stale. A send that fails takes the name back, so the retried pass sends it.
  if (wake.send && wake.wakeAt !== undefined) {
    try {
      await sendTimer(ctx.syncSink, key, wake.wakeAt);
    } catch (err) {
      await ctx.state.records.put(passKey, { ...record, wakeAt: undefined }, 'any', { ttlSeconds: PASS_TTL_SECONDS });
      throw err;
    }
  }
  return wake;
}

/** What the pass's outcome asks for next: a follow-up, a retry, or (retries spent) a warning. */
async function followUp({ key, causes }: SyncRequest, ctx: MapServeContext, outcome: PassOutcome, receiveCount: number): Promise<void> {
  const parent = `${key.namespace ?? ''}/${key.name}`;
  if (outcome.kind === 'continue') {
    // The rest in a follow-up for the same parent (its FIFO group, behind what is queued): each pass fits its
    // invocation, and other parents of the batch keep their time. The nonce keeps SQS from taking it for a copy.
    const definition = causes.filter((c) => c.startsWith('MapController-definition/'));
    await ctx.syncSink.send(MAP_TARGET, [
      makeSyncRequest(key, [continuationCause(outcome.continuation, String(Date.now())), ...definition]),
    ]);
  } else followRetry(outcome, { what: 'map', parent, receiveCount }, ctx.log);
}

/** What a pass is given of the invocation: its budget from the remaining time, shared with the batch's later records. */
export function passTiming(tools: Pick<SyncTools, 'context' | 'later' | 'receiveCount'>): Pick<MapServeContext, 'budget' | 'receiveCount'> {
  const budgetMs = passBudgetMs(tools.context.getRemainingTimeInMillis(), tools.later);
  return { budget: { deadline: Date.now() + budgetMs, budgetMs }, receiveCount: tools.receiveCount };
}
