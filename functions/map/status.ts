// The parent's status after a pass: its counts and its Synced condition, written only when they changed.
import type { KubeObject, ResolvedResource } from '../../shared/kube/index.ts';
import { aggregate, statusChanged, statusPatch, syncedCondition, type Continuation, type MapStatus } from '../../shared/map/plan/index.ts';
import { setCondition } from '../../shared/metacontroller/conditions.ts';
import { isBeingDeleted } from '../../shared/ownership/index.ts';
import type { ResolvedMapController } from './controllers.ts';
import type { MapContext, MapSyncResult } from './pass.ts';

/** How a pass ended, as the parent's status tells it. */
export interface PassEnd {
  /** The inputs and outputs the pass saw; without them the status keeps its counts as they were. */
  counted?: { inputs: ReadonlyMap<ResolvedResource, number>; outputs: ReadonlyMap<ResolvedResource, KubeObject[]> };
  now: Date;
  earlier: Continuation | undefined;
}

export async function writeStatus(
  ctx: MapContext,
  mc: ResolvedMapController,
  parent: KubeObject,
  result: MapSyncResult,
  { counted, now, earlier }: PassEnd,
): Promise<void> {
  const current = parent.status as Partial<MapStatus> | undefined;
  const counts = counted ? aggregate(counted.inputs, counted.outputs) : { inputs: current?.inputs ?? {}, outputs: current?.outputs ?? {} };
  const synced = syncedCondition(result, isBeingDeleted(parent), earlier);
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
