import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { MAP_GROUP } from '../../shared/map/api.ts';
import { forgetMapControllers, listMapControllers, MAP_TARGET, mapControllerFor } from './controllers.ts';
import { hookCaller } from './environment.ts';
import { syncMap } from './sync.ts';

/** Clock skew allowed between SQS's SentTimestamp and this function's clock. */
const SKEW_MS = 1_000;
/** Pass records expire with the parent's activity: a parent not synced for a day has its record dropped. */
const PASS_TTL_SECONDS = 86_400;

export const handler = syncFunction('map', async ({ key, causes }, { env, logger, sentAt }) => {
  const kube = env.clusters.client(key.cluster);
  if (key.kind === 'MapController' && key.group === MAP_GROUP) {
    // The controller changed: every parent it governs syncs against the new definition.
    forgetMapControllers(key.cluster);
    const set = await listMapControllers(kube, key.cluster);
    const invalid = set.invalid.find((i) => i.name === key.name);
    if (invalid) logger.warn('MapController is invalid; its parents are left as they are', { ...invalid });
    const mc = set.valid.find((m) => m.uid === key.uid);
    if (!mc) return;
    const parents = await kube.listAll(mc.parent);
    const requests = parents.map((p) => makeSyncRequest({ cluster: key.cluster, group: mc.parent.group, kind: mc.parent.kind, namespace: p.metadata.namespace, name: p.metadata.name ?? '', uid: p.metadata.uid ?? '' }, causes));
    await env.syncSink.send(MAP_TARGET, requests);
    logger.info('MapController changed; parents queued', { controller: mc.name, parents: requests.length });
    return;
  }
  const mc = mapControllerFor(await listMapControllers(kube, key.cluster), key.group, key.kind);
  if (!mc) return;
  // A pass that started after this request was queued read everything after the change that caused it: the
  // request is already served. This keeps a pass's own output writes (whose events come back as requests)
  // from starting one full pass each; at most one follow-up pass runs.
  const passKey = { cluster: key.cluster, kind: 'map-pass', name: key.uid };
  const last = await env.state.records.get<{ startedAt: number }>(passKey);
  if (last && last.value.startedAt > sentAt + SKEW_MS) {
    logger.info('map sync already served by a later pass', { parent: `${key.namespace ?? ''}/${key.name}`, sentAt, passStartedAt: last.value.startedAt });
    return;
  }
  const startedAt = Date.now();
  const result = await syncMap({ kube, hooks: hookCaller(), log: (level, m, f) => logger[level](m, f ?? {}) }, mc, key);
  // Only a clean pass serves later requests: after a problem, the next trigger tries again.
  if (!result.problems.length && !result.skipped) await env.state.records.put(passKey, { startedAt }, 'any', { ttlSeconds: PASS_TTL_SECONDS });
  logger.info('map synced', { controller: mc.name, parent: `${key.namespace ?? ''}/${key.name}`, ...result, problems: result.problems.length });
});
