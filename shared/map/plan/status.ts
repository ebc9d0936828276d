// The parent's aggregated status: counts, the Synced condition, and the patch that writes them.
import type { ResolvedResource } from '../../kube/discovery.ts';
import type { KubeObject } from '../../kube/resource.ts';
import { canonicalJson, type Json } from '../../json.ts';
import type { Condition } from '../../metacontroller/conditions.ts';
import { AFTER_ALL_KEYS, type Continuation } from './budget.ts';

export interface MapStatus {
  observedGeneration?: number | undefined;
  inputs: Record<string, { total: number }>;
  outputs: Record<string, Record<string, number>>;
  conditions: Condition[];
}

/** Per input resource its total; per output resource its total and, per condition type, how many have it True. */
export function aggregate(
  inputs: ReadonlyMap<ResolvedResource, number>,
  outputs: ReadonlyMap<ResolvedResource, readonly KubeObject[]>,
): Pick<MapStatus, 'inputs' | 'outputs'> {
  const status: Pick<MapStatus, 'inputs' | 'outputs'> = { inputs: {}, outputs: {} };
  for (const [kind, total] of inputs) status.inputs[kind.resource] = { total };
  for (const [kind, objects] of outputs) {
    const counts: Record<string, number> = { total: objects.length };
    for (const o of objects) {
      const conditions = (o.status as { conditions?: Array<{ type?: unknown; status?: unknown }> } | undefined)?.conditions;
      if (!Array.isArray(conditions)) continue;
      for (const c of conditions) {
        if (typeof c.type !== 'string' || !c.type || c.type === 'total') continue;
        const name = c.type[0]!.toLowerCase() + c.type.slice(1);
        counts[name] ??= 0;
        if (c.status === 'True') counts[name] += 1;
      }
    }
    status.outputs[kind.resource] = counts;
  }
  return status;
}

/** The status fields the pass owns, compared as the apiserver stores them. */
export function statusChanged(current: Partial<MapStatus> | undefined, next: MapStatus): boolean {
  const pick = (s: Partial<MapStatus> | undefined) =>
    ({ observedGeneration: s?.observedGeneration, inputs: s?.inputs, outputs: s?.outputs, conditions: s?.conditions }) as unknown as Json;
  return canonicalJson(pick(current)) !== canonicalJson(pick(next));
}

/**
 * The merge patch that makes the status's owned fields `next`: a key of `current` that `next` lacks (an input or
 * output resource no longer listed, a condition type no output has any more) is removed with null, since a
 * merge patch keeps what it does not name, and a key left behind would differ from every later pass's status.
 */
export function statusPatch(current: Partial<MapStatus> | undefined, next: MapStatus): Record<string, unknown> {
  const removed = <T>(before: Record<string, T> | undefined, after: Record<string, T>, inner: (b: T, a: T) => unknown) => {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(before ?? {})) if (!(k in after)) out[k] = null;
    for (const [k, v] of Object.entries(after)) out[k] = before?.[k] === undefined ? v : inner(before[k] as T, v);
    return out;
  };
  const counts = (b: Record<string, number>, a: Record<string, number>) => removed(typeof b === 'object' && b ? b : {}, a, (_x, y) => y);
  return {
    ...next,
    inputs: removed(current?.inputs, next.inputs, counts),
    outputs: removed(current?.outputs, next.outputs, counts),
  };
}

/** What a pass's Synced condition is made from: its counts, problems and deferred inputs. */
export interface PassSummary {
  inputs: number;
  problems: ReadonlyArray<{ what: string; reason: string; message: string }>;
  deferred: readonly string[];
  retryAfterSeconds?: number | undefined;
  finalized?: boolean | undefined;
}

/** How many per-input problems the status condition names (the log has them all). */
const MESSAGE_PROBLEMS = 3;

/**
 * The parent's Synced condition after a pass, the first that holds of: this pass's problems, the parent being
 * deleted, the earlier passes' problems in this sync, inputs deferred to a follow-up; else Synced.
 */
export function syncedCondition(
  result: PassSummary,
  deleting: boolean,
  earlier: Continuation | undefined,
): Omit<Condition, 'lastTransitionTime'> & { status: 'True' | 'False' } {
  const deferred = result.deferred.filter((k) => k !== AFTER_ALL_KEYS).length;
  const rest = deferredNote(result, deferred);
  if (result.problems.length) {
    const first = result.problems.slice(0, MESSAGE_PROBLEMS).map((p) => `${p.what}: ${p.message}`);
    const more = result.problems.length > MESSAGE_PROBLEMS ? `; and ${result.problems.length - MESSAGE_PROBLEMS} more` : '';
    return {
      type: 'Synced',
      status: 'False',
      reason: result.problems[0]!.reason,
      message: `${result.problems.length} problem(s), nothing deleted for them: ${first.join('; ')}${more}${rest}`,
    };
  }
  if (deleting) {
    const message =
      result.finalized === false
        ? 'the parent is being deleted: its finalize hook has not finished'
        : 'the parent is being deleted: status only';
    return { type: 'Synced', status: 'False', reason: 'Deleting', message };
  }
  if (earlier?.problems)
    return {
      type: 'Synced',
      status: 'False',
      reason: earlier.reason,
      message: `${earlier.problems} problem(s) in the earlier passes of this sync, nothing deleted for them (each pass's status and the log named them)${rest}`,
    };
  if (result.deferred.length)
    return {
      type: 'Synced',
      status: 'False',
      reason: 'InProgress',
      message: `${result.inputs - deferred} of ${result.inputs} input(s) mapped${rest}`,
    };
  return { type: 'Synced', status: 'True', reason: 'Synced', message: `${result.inputs} input(s) mapped` };
}

/** What the condition adds about inputs not called in this pass, if any. */
function deferredNote(result: PassSummary, deferred: number): string {
  if (!result.deferred.length) return '';
  if (result.retryAfterSeconds !== undefined)
    return `; ${deferred} input(s) not called yet: the hook asked to be called again after ${result.retryAfterSeconds} s`;
  return `; ${deferred} input(s) not reached within the pass's time budget, continued by a follow-up pass`;
}
