import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { MAP_GROUP } from '../../shared/map/api.ts';
import { forgetMapControllers, listMapControllers, MAP_TARGET, mapControllerFor, resourceOf } from './controllers.ts';
import { hookCaller } from './environment.ts';
import { syncMap } from './sync.ts';

export const handler = syncFunction('map', async ({ key, causes }, { env, logger }) => {
  const kube = env.clusters.client(key.cluster);
  if (key.kind === 'MapController' && key.group === MAP_GROUP) {
    // The controller changed: every parent it governs syncs against the new definition.
    forgetMapControllers(key.cluster);
    const set = await listMapControllers(kube, key.cluster);
    const invalid = set.invalid.find((i) => i.name === key.name);
    if (invalid) logger.warn('MapController is invalid; its parents are left as they are', { ...invalid });
    const mc = set.valid.find((m) => m.uid === key.uid);
    if (!mc) return;
    const parents = await kube.listAll(resourceOf(mc.parent));
    const requests = parents.map((p) => makeSyncRequest({ cluster: key.cluster, group: mc.parent.group, kind: mc.parent.kind, namespace: p.metadata.namespace, name: p.metadata.name ?? '', uid: p.metadata.uid ?? '' }, causes));
    await env.syncSink.send(MAP_TARGET, requests);
    logger.info('MapController changed; parents queued', { controller: mc.name, parents: requests.length });
    return;
  }
  const mc = mapControllerFor(await listMapControllers(kube, key.cluster), key.group, key.kind);
  if (!mc) return;
  const result = await syncMap({ kube, hooks: hookCaller(), log: (level, m, f) => logger[level](m, f ?? {}) }, mc, key);
  logger.info('map synced', { controller: mc.name, parent: `${key.namespace ?? ''}/${key.name}`, ...result, problems: result.problems.length });
});
