// Resyncs of CompositeController parents and DecoratorController objects without events (resyncPeriodSeconds), run
// by the map-resync function on its schedule with the map's phase rule (docs/design/map-pass.md#resync); it also
// keeps the definitions' Ready condition current.
import type { ClusterConfig } from '../../shared/clusters.ts';
import { COMPOSITE_GROUP, definitionFinalizer } from '../../shared/composite/api.ts';
import type { KubeClient } from '../../shared/kube/index.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { RESYNC_CAUSE } from '../../shared/map/api.ts';
import { resyncDue } from '../../shared/metacontroller/timers.ts';
import { isBeingDeleted } from '../../shared/ownership/index.ts';
import { actingAs, COMPOSITE_TARGET, compositeCache, compositeControllers, listCompositeSet, writeReadiness } from './controllers.ts';

/** Queues the parents whose resync falls in this tick; answers how many. */
export async function queueCompositeResyncs(
  kube: KubeClient,
  cluster: Pick<ClusterConfig, 'id' | 'controllerSelector'>,
  now: Date,
  tickMs: number,
  sink: SyncSink,
): Promise<number> {
  const set = await listCompositeSet(kube, cluster.id, compositeCache, cluster.controllerSelector);
  await writeReadiness(kube, set, now);
  let queued = 0;
  // A definition still being deleted (its parents not all released: docs/controllers/compositecontroller.md#finalizers-are-released): tried again.
  const deleting = set.objects.flatMap(({ resource, object: o }) => {
    const kind = resource === compositeControllers ? 'CompositeController' : 'DecoratorController';
    if (!isBeingDeleted(o) || !o.metadata.finalizers?.includes(definitionFinalizer(kind))) return [];
    return [
      makeSyncRequest({ cluster: cluster.id, group: COMPOSITE_GROUP, kind, name: o.metadata.name ?? '', uid: o.metadata.uid ?? '' }, [
        RESYNC_CAUSE,
      ]),
    ];
  });
  if (deleting.length) await sink.send(COMPOSITE_TARGET, deleting);
  queued += deleting.length;
  for (const d of [...set.composites, ...set.decorators]) {
    if (isBeingDeleted(d.object)) continue;
    const period = d.resyncPeriodSeconds;
    if (!period) continue;
    for (const r of d.kind === 'CompositeController' ? [d.parentResource] : d.targets) {
      const requests = [];
      for (const p of await actingAs(kube, d).listAll(r)) {
        const index = resyncDue(p.metadata.uid ?? '', period, now, tickMs);
        if (index === undefined) continue;
        const key = {
          cluster: cluster.id,
          group: r.group,
          kind: r.kind,
          namespace: p.metadata.namespace,
          name: p.metadata.name ?? '',
          uid: p.metadata.uid ?? '',
        };
        requests.push(makeSyncRequest(key, [`${RESYNC_CAUSE}${period}/${index}`]));
      }
      await sink.send(COMPOSITE_TARGET, requests);
      queued += requests.length;
    }
  }
  return queued;
}
