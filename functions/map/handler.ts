import type { ClusterCache } from '../cluster-cache.ts';
import type { HookCaller } from '../../shared/hooks/index.ts';
import type { KubeClient } from '../../shared/kube/index.ts';
import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest, parseSyncCause, type SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { controllerCause, definitionOf, MAP_GROUP, RESYNC_CAUSE } from '../../shared/map/api.ts';
import { passDecision, type PassRecord } from '../../shared/map/plan.ts';
import type { State } from '../../shared/state/index.ts';
import { recordEvent } from '../../shared/events/index.ts';
import { apiVersionOf } from '../../shared/kube/index.ts';
import { actingAs, listMapControllers, MAP_TARGET, mapControllerCache, mapControllerFor, writeReadiness, type MapControllerSet } from './controllers.ts';
import { hookCaller } from './environment.ts';
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
  log: (level: 'info' | 'warn', message: string, fields?: Record<string, unknown>) => void;
}

/** One sync request: a MapController's change queues its parents; a parent's runs a pass unless already served. */
export async function serveMapRequest({ key, causes }: SyncRequest, sentAt: number, ctx: MapServeContext): Promise<void> {
  const { kube } = ctx;
  if (key.kind === 'MapController' && key.group === MAP_GROUP) {
    // The controller changed: every parent it governs syncs against the new definition, which its requests name.
    ctx.controllers.forget(key.cluster);
    const set = await listMapControllers(kube, key.cluster, ctx.controllers);
    const invalid = set.invalid.find((i) => i.name === key.name);
    if (invalid) ctx.log('warn', 'MapController is invalid; its parents are left as they are', { ...invalid });
    await writeReadiness(kube, set);
    const mc = set.valid.find((m) => m.uid === key.uid);
    if (!mc) return;
    const parents = await actingAs(kube, mc).listAll(mc.parent);
    const requests = parents.map((p) =>
      makeSyncRequest({ cluster: key.cluster, group: mc.parent.group, kind: mc.parent.kind, namespace: p.metadata.namespace, name: p.metadata.name ?? '', uid: p.metadata.uid ?? '' }, [controllerCause(mc), ...causes]),
    );
    await ctx.syncSink.send(MAP_TARGET, requests);
    ctx.log('info', 'MapController changed; parents queued', { controller: mc.name, generation: mc.generation, parents: requests.length });
    return;
  }
  // A pass that started after this request was queued, with the same definition, read everything after the
  // change that caused it: the request is already served. This keeps a pass's own output writes (whose events
  // come back as requests) from starting one full pass each; at most one follow-up pass runs.
  const passKey = { cluster: key.cluster, kind: 'map-pass', name: key.uid };
  const last = (await ctx.state.records.get<PassRecord>(passKey))?.value;
  const requested = definitionOf(causes);
  let mc = mapControllerFor(await listMapControllers(kube, key.cluster, ctx.controllers), key.group, key.kind);
  const decide = (refreshed: boolean) => passDecision({ last, sentAt, skewMs: SKEW_MS, current: mc, requested, refreshed });
  let decision = decide(false);
  if (decision === 'refresh') {
    ctx.controllers.forget(key.cluster);
    mc = mapControllerFor(await listMapControllers(kube, key.cluster, ctx.controllers), key.group, key.kind);
    decision = decide(true);
  }
  if (!mc || decision === 'no-controller') return;
  if (decision === 'served') {
    ctx.log('info', 'map sync already served by a later pass', { parent: `${key.namespace ?? ''}/${key.name}`, sentAt, passStartedAt: last?.startedAt, generation: mc.generation });
    return;
  }
  const startedAt = Date.now();
  // An event-driven pass calls the hook only for inputs whose last answer no longer holds. A resync calls every
  // hook (a hook may depend on the clock), and so does a request whose causes may have been cut short.
  const incremental = !causes.some((c) => c.startsWith(RESYNC_CAUSE)) && causes.length < MAX_CAUSES;
  const touched = new Set(causes.map((c) => parseSyncCause(c).uid).filter((u): u is string => Boolean(u)));
  // Every read and write of parents, inputs and outputs is the ServiceAccount's (README "MapController", identity).
  const { answers, ...result } = await syncMap({ kube: actingAs(kube, mc), hooks: ctx.hooks, log: ctx.log }, mc, key, { reuse: incremental ? { previous: last?.answers, touched } : undefined });
  // One Warning per hook failure reason per pass, as Outrigger (whose role may create events), not one per input.
  const hookProblems = new Map<string, { count: number; first: string }>();
  for (const p of result.problems.filter((q) => q.reason.startsWith('Hook'))) {
    const seen = hookProblems.get(p.reason);
    hookProblems.set(p.reason, { count: (seen?.count ?? 0) + 1, first: seen?.first ?? `${p.what}: ${p.message}` });
  }
  const regarding = { apiVersion: apiVersionOf(mc.parent), kind: mc.parent.kind, metadata: { name: key.name, namespace: key.namespace, uid: key.uid } };
  for (const [reason, { count, first }] of hookProblems)
    await recordEvent(kube, regarding, { type: 'Warning', reason, action: 'Sync', note: `${count} input(s) failed, nothing deleted for them: ${first}` }, { controller: MAP_CONTROLLER, instance: mc.name }, (m, f) => ctx.log('warn', m, f));
  // Only a clean pass serves later requests: after a problem, the next trigger tries again.
  const record: PassRecord = { startedAt, controller: mc.uid, generation: mc.generation, answers };
  if (!result.problems.length && !result.skipped) await ctx.state.records.put(passKey, record, 'any', { ttlSeconds: PASS_TTL_SECONDS });
  ctx.log('info', 'map synced', { controller: mc.name, generation: mc.generation, parent: `${key.namespace ?? ''}/${key.name}`, incremental, ...result, problems: result.problems.length });
}

export const handler = syncFunction('map', (request, { env, logger, sentAt }) =>
  serveMapRequest(request, sentAt, {
    kube: env.clusters.client(request.key.cluster),
    state: env.state,
    syncSink: env.syncSink,
    hooks: hookCaller(),
    controllers: mapControllerCache,
    log: (level, m, f) => logger[level](m, f ?? {}),
  }),
);
