// The parent's status after a pass: its counts and its Synced condition, written only when they changed.
import type { KubeObject, ResolvedResource } from '../../shared/kube/index.ts';
import {
  AFTER_ALL_KEYS,
  aggregate,
  setCondition,
  statusChanged,
  statusPatch,
  type Continuation,
  type MapStatus,
} from '../../shared/map/plan/index.ts';
import { isBeingDeleted } from '../../shared/ownership/index.ts';
import type { ResolvedMapController } from './controllers.ts';
import type { MapContext, MapSyncResult } from './pass.ts';

/** How many per-input problems the status condition names (the log has them all). */
const MESSAGE_PROBLEMS = 3;

export async function writeStatus(
  ctx: MapContext,
  mc: ResolvedMapController,
  parent: KubeObject,
  inputs: ReadonlyMap<ResolvedResource, number> | undefined,
  outputs: ReadonlyMap<ResolvedResource, KubeObject[]> | undefined,
  result: MapSyncResult,
  now: Date,
  earlier: Continuation | undefined,
): Promise<void> {
  const current = parent.status as Partial<MapStatus> | undefined;
  const counts = inputs && outputs ? aggregate(inputs, outputs) : { inputs: current?.inputs ?? {}, outputs: current?.outputs ?? {} };
  const first = result.problems.slice(0, MESSAGE_PROBLEMS).map((p) => `${p.what}: ${p.message}`);
  const more = result.problems.length > MESSAGE_PROBLEMS ? `; and ${result.problems.length - MESSAGE_PROBLEMS} more` : '';
  const deferred = result.deferred.filter((k) => k !== AFTER_ALL_KEYS).length;
  const rest = !result.deferred.length
    ? ''
    : result.retryAfterSeconds !== undefined
      ? `; ${deferred} input(s) not called yet: the hook asked to be called again after ${result.retryAfterSeconds} s`
      : `; ${deferred} input(s) not reached within the pass's time budget, continued by a follow-up pass`;
  const synced = result.problems.length
    ? {
        type: 'Synced',
        status: 'False' as const,
        reason: result.problems[0]!.reason,
        message: `${result.problems.length} problem(s), nothing deleted for them: ${first.join('; ')}${more}${rest}`,
      }
    : isBeingDeleted(parent)
      ? {
          type: 'Synced',
          status: 'False' as const,
          reason: 'Deleting',
          message:
            result.finalized === false
              ? 'the parent is being deleted: its finalize hook has not finished'
              : 'the parent is being deleted: status only',
        }
      : earlier?.problems
        ? {
            type: 'Synced',
            status: 'False' as const,
            reason: earlier.reason,
            message: `${earlier.problems} problem(s) in the earlier passes of this sync, nothing deleted for them (each pass's status and the log named them)${rest}`,
          }
        : result.deferred.length
          ? {
              type: 'Synced',
              status: 'False' as const,
              reason: 'InProgress',
              message: `${result.inputs - deferred} of ${result.inputs} input(s) mapped${rest}`,
            }
          : { type: 'Synced', status: 'True' as const, reason: 'Synced', message: `${result.inputs} input(s) mapped` };
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
