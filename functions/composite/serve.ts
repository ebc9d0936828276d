// Serves the sync requests of CompositeController and DecoratorController parents, in the Metacontroller-style
// controllers' function (functions/metacontroller/handler.ts), on their one queue (docs/controllers/compositecontroller.md#how-a-parent-is-synced). A definition's own change re-reads the
// definitions, writes their Ready condition and queues every parent it serves; a parent's request runs a pass of
// each definition that serves its kind, as that definition's ServiceAccount; a hook's resyncAfterSeconds becomes a
// timer message, as a MapController's (docs/design/map-pass.md#timers). A definition being deleted runs no pass: its
// finalizer is taken off its parents, then Outrigger's off it (functions/composite/finalizers.ts).
import type { HookCaller } from '../../shared/hooks/index.ts';
import { apiVersionOf, type GVR, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { RetryLater } from '../../shared/lambda/retry.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import type { Log } from '../../shared/log.ts';
import { COMPOSITE_GROUP, definitionFinalizer, retriesUnresolved } from '../../shared/composite/api.ts';
import { isBeingDeleted } from '../../shared/ownership/index.ts';
import { nextWake, timerOf } from '../../shared/metacontroller/timers.ts';
import { retryOutcome } from '../../shared/metacontroller/problems.ts';
import type { State } from '../../shared/state/index.ts';
import type { ClusterCache } from '../cluster-cache.ts';
import { warnProblems } from '../metacontroller/events.ts';
import { queueParentsOf } from '../metacontroller/fan-out.ts';
import { followRetry } from '../metacontroller/retry.ts';
import { sendTimer, serveTimer } from '../metacontroller/timers.ts';
import {
  actingAs,
  compositeControllers,
  decoratorControllers,
  definitionsFor,
  listCompositeSet,
  writeReadiness,
  type CompositeSet,
  type ResolvedDefinition,
} from './controllers.ts';
import { writeFinalizer } from '../metacontroller/finalizers.ts';
import { holdDefinition, releaseParents } from './finalizers.ts';
import { recordRelatedKinds } from './related.ts';
import type { PassResult } from './pass.ts';
import { syncDefinition } from './sync.ts';

/** Events' reportingController. */
const REPORTER = 'outrigger.dev/composite';
/** A parent's wake record lives a day past its last pass. */
const WAKE_TTL_SECONDS = 86_400;

export interface CompositeServeContext {
  kube: KubeClient;
  state: State;
  syncSink: SyncSink;
  hooks: HookCaller;
  controllers: ClusterCache<CompositeSet>;
  /** The definitions served in the cluster: its controllerSelector (functions/controller-source.ts listServedDefinitions). */
  controllerSelector?: string | undefined;
  log: Log;
  /** When the pass must be over (ms since the epoch). */
  deadline?: number | undefined;
  /** How many times this request has been received (1: the first time). */
  receiveCount?: number | undefined;
  /** Whether a MapController serves the parent kind too (docs/controllers/compositecontroller.md#mix-and-match). */
  sharedWithMap?: ((key: SyncRequest['key']) => Promise<boolean>) | undefined;
}

interface WakeRecord {
  wakeAt?: number | undefined;
}
const wakeKey = (key: SyncRequest['key']) => ({ cluster: key.cluster, kind: 'composite-wake', name: key.uid });

export async function serveCompositeRequest(request: SyncRequest, sentAt: number, ctx: CompositeServeContext): Promise<void> {
  const { key, causes } = request;
  if (key.group === COMPOSITE_GROUP && (key.kind === 'CompositeController' || key.kind === 'DecoratorController'))
    return queueParents(request, ctx);
  // The map queue carries MapController parents too: a kind no definition of these serves is not ours.
  const set = await listCompositeSet(ctx.kube, key.cluster, ctx.controllers, ctx.controllerSelector);
  // A definition being deleted serves nothing more: its deletion's request releases its parents.
  const definitions = definitionsFor(set, key.group, key.kind).filter((d) => !isBeingDeleted(d.object));
  if (!definitions.length) return;
  const recorded = (await ctx.state.records.get<WakeRecord>(wakeKey(key)))?.value;
  const timer = timerOf(causes);
  if (timer !== undefined) return serveTimer(ctx, 'composite', { key, dueAt: timer, sentAt }, recorded);
  const sharedWithMap = (await ctx.sharedWithMap?.(key)) ?? false;
  // Each definition's pass side by side, with the request's whole budget: one's hook never waits for another's
  // (docs/operations/security.md#one-definitions-hook-and-anothers-pass).
  const settled = await Promise.allSettled(definitions.map((d) => serveDefinition(ctx, d, key, sharedWithMap)));
  const results = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  // The earliest wish of this request's passes, as a timer in a group of its own.
  const wishes = results.flatMap(({ result }) =>
    result.resyncAfterSeconds && !result.finalized ? [Date.now() + result.resyncAfterSeconds * 1000] : [],
  );
  const wake = nextWake(recorded?.wakeAt, wishes.length ? Math.min(...wishes) : undefined, Date.now());
  if (wake.wakeAt !== recorded?.wakeAt)
    await ctx.state.records.put(wakeKey(key), { wakeAt: wake.wakeAt }, 'any', { ttlSeconds: WAKE_TTL_SECONDS });
  if (wake.send && wake.wakeAt !== undefined) await sendTimer(ctx.syncSink, key, wake.wakeAt);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
  // A problem a retry may cure is retried with backoff (a hook's Retry-After when it gave one), by the rules every
  // kind shares: then the next change or resync tries again, and a tenant's broken hook never fills the dead-letter queue.
  const asked = results.flatMap(({ result }) => (result.retryAfterSeconds ? [result.retryAfterSeconds] : []));
  const outcome = retryOutcome({
    problems: results.flatMap(({ result }) => result.problems),
    retryAfterSeconds: asked.length ? Math.max(...asked) : undefined,
    receiveCount: ctx.receiveCount ?? 1,
  });
  followRetry(outcome, { what: 'composite', parent: `${key.namespace ?? ''}/${key.name}`, receiveCount: ctx.receiveCount }, ctx.log);
}

/** One definition's pass for the parent, as its ServiceAccount, with its related kinds recorded and its problems warned. */
async function serveDefinition(
  ctx: CompositeServeContext,
  d: ResolvedDefinition,
  key: SyncRequest['key'],
  sharedWithMap: boolean,
): Promise<{ d: ResolvedDefinition; result: PassResult }> {
  // Outrigger's finalizer on the definition first: a pass may put the definition's on this parent.
  if (await holdDefinition(ctx.kube, d)) ctx.controllers.forget(key.cluster);
  const result = await syncDefinition(
    { kube: actingAs(ctx.kube, d), hooks: ctx.hooks, log: ctx.log, deadline: ctx.deadline, records: ctx.state.records, sharedWithMap },
    d,
    key,
  );
  // The kinds its customize answer reads, for the forwarder to watch (as Outrigger: the definition is its object).
  const kindOf = d.kind === 'CompositeController' ? compositeControllers : decoratorControllers;
  if (result.relatedKinds?.length && (await recordRelatedKinds(ctx.kube, kindOf, d, result.relatedKinds)))
    ctx.controllers.forget(key.cluster);
  ctx.log('info', `${d.kind} synced`, {
    controller: d.name,
    parent: `${key.namespace ?? ''}/${key.name}`,
    ...result,
    problems: result.problems.length,
  });
  const regarding = {
    apiVersion: apiVersionOf(resourceOf(d, key)),
    kind: key.kind,
    metadata: { name: key.name, namespace: key.namespace, uid: key.uid },
  };
  // A decorator's every problem: its object's status is not its to write (failedCondition).
  await warnProblems(ctx, regarding, result.problems, {
    reporter: { controller: REPORTER, instance: d.name },
    note: (_count, first) => first.message,
    every: d.kind === 'DecoratorController',
  });
  return { d, result };
}

const resourceOf = (d: ResolvedDefinition, key: SyncRequest['key']) =>
  d.kind === 'CompositeController' ? d.parentResource : d.targets.find((t) => t.group === key.group && t.kind === key.kind)!;

/**
 * A definition changed: the definitions read afresh, their Ready written, and every parent it serves queued; one
 * being deleted releases its parents instead.
 */
async function queueParents({ key, causes }: SyncRequest, ctx: CompositeServeContext): Promise<void> {
  ctx.controllers.forget(key.cluster);
  const set = await listCompositeSet(ctx.kube, key.cluster, ctx.controllers, ctx.controllerSelector);
  await writeReadiness(ctx.kube, set);
  const d = [...set.composites, ...set.decorators].find((x) => x.uid === key.uid);
  const listed = set.objects.find((o) => o.object.metadata.uid === key.uid);
  if (listed && isBeingDeleted(listed.object)) return releaseDefinition(ctx, listed, d);
  // A kind it names not served yet (its CRD applied with it): asked again within seconds, not at the next resync.
  const invalid = listed && set.invalid.find((i) => i.kind === key.kind && i.name === listed.object.metadata.name);
  if (invalid && retriesUnresolved(invalid.reason, ctx.receiveCount ?? 1))
    throw new RetryLater(`${key.kind} ${invalid.name}: ${invalid.error}`);
  if (!d) return;
  const resources = d.kind === 'CompositeController' ? [d.parentResource] : d.targets;
  for (const r of resources) {
    const parents = await actingAs(ctx.kube, d).listAll(r);
    await queueParentsOf(ctx.syncSink, key.cluster, r, parents, causes);
  }
}

/**
 * A definition being deleted (docs/controllers/compositecontroller.md#finalizers-are-released): its finalizer comes
 * off every parent, as its ServiceAccount, then Outrigger's off the definition, which then goes. One that cannot run
 * (its ServiceAccount gone or refusing, say) keeps Outrigger's finalizer, so that it never leaves its own on objects
 * nobody may then update: it goes once it can run, or when an admin removes Outrigger's finalizer by hand.
 */
async function releaseDefinition(
  ctx: CompositeServeContext,
  { resource, object }: { resource: GVR; object: KubeObject },
  d: ResolvedDefinition | undefined,
): Promise<void> {
  const kind = resource === compositeControllers ? 'CompositeController' : 'DecoratorController';
  const finalizer = definitionFinalizer(kind);
  if (!object.metadata.finalizers?.includes(finalizer)) return;
  const controller = object.metadata.name;
  if (!d) {
    ctx.log('warn', `${kind} deleted while it cannot run: it stays, and its parents keep its finalizer, until it runs again`, {
      controller,
    });
    return;
  }
  const released = await releaseParents(actingAs(ctx.kube, d), d);
  await writeFinalizer(ctx.kube, resource, object, finalizer, false);
  ctx.log('info', `${kind} deleted; its parents released`, { controller, released });
}
