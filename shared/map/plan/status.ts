// The parent's aggregated status: counts, the Synced condition, and the patch that writes them.
import type { ResolvedResource } from '../../kube/discovery.ts';
import type { KubeObject } from '../../kube/resource.ts';
import { canonicalJson, type Json } from '../../json.ts';

export interface MapStatus {
  observedGeneration?: number | undefined;
  inputs: Record<string, { total: number }>;
  outputs: Record<string, Record<string, number>>;
  conditions: Condition[];
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number | undefined;
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

/** The condition list with `next` set, keeping its transition time when its status did not change. */
export function setCondition(
  current: readonly Condition[] | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const before = current?.find((c) => c.type === next.type);
  const lastTransitionTime = before && before.status === next.status ? before.lastTransitionTime : `${now.toISOString().slice(0, 19)}Z`;
  return [...(current ?? []).filter((c) => c.type !== next.type), { ...next, lastTransitionTime }];
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
