// A definition's change reaches every parent it serves: one sync request each, on the kinds' one queue, naming the
// change's causes, so each parent's pass reads the definition afresh (docs/controllers/mapcontroller.md#lifecycle).
import type { KubeObject } from '../../shared/kube/index.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { METACONTROLLER_TARGET } from './target.ts';

/** Queues a sync of each parent (of `resource`, in `cluster`); answers how many were queued. */
export async function queueParentsOf(
  syncSink: SyncSink,
  cluster: string,
  resource: { group: string; kind: string },
  parents: readonly KubeObject[],
  causes: readonly string[],
): Promise<number> {
  const requests = parents.map((p) =>
    makeSyncRequest(
      {
        cluster,
        group: resource.group,
        kind: resource.kind,
        namespace: p.metadata.namespace,
        name: p.metadata.name ?? '',
        uid: p.metadata.uid ?? '',
      },
      [...causes],
    ),
  );
  await syncSink.send(METACONTROLLER_TARGET, requests);
  return requests.length;
}
