// A rollback as a JSON Patch (RFC 6902), which custom resources take (they take no strategic merge patch): it
// makes the parent's target state what a revision holds, as `kubectl rollout undo` does with the revision's data
// as a strategic merge patch, where `$patch: replace` replaces a path and a null removes it
// (https://github.com/kubernetes/community/blob/master/contributors/devel/sig-api-machinery/strategic-merge-patch.md).
import { isDeepStrictEqual } from 'node:util';
import { type Json, type JsonObject } from './data.ts';
import { semanticallyEqual } from '../json.ts';

export type JsonPatchOp = { op: 'add' | 'test'; path: string; value: Json } | { op: 'remove'; path: string };

/** The value without `$patch` directives, which are for strategic merge patches only. */
export function withoutDirectives(value: Json | undefined): Json | undefined {
  if (Array.isArray(value)) return value.map((v) => withoutDirectives(v) ?? null);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => k !== '$patch')
        .map(([k, v]) => [k, withoutDirectives(v) ?? null]),
    );
  return value;
}

/**
 * The value without `$patch` directives and null fields; undefined for an object of nulls only (as normalize has
 * it). An empty map, as written, stays: it is a value.
 */
function present(value: Json | undefined): Json | undefined {
  if (value === null || value === undefined) return undefined;
  if (Array.isArray(value)) return withoutDirectives(value);
  if (typeof value !== 'object') return value;
  const out: JsonObject = {};
  let nulled = false;
  for (const [k, v] of Object.entries(value)) {
    if (k === '$patch') continue;
    const p = present(v);
    if (p === undefined) nulled = true;
    else out[k] = p;
  }
  return Object.keys(out).length === 0 && nulled ? undefined : out;
}

const pointer = (path: readonly string[]) => `/${path.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;

/**
 * The operations that put each path of the revision's `data` back on `parent` (as read now), after a test of
 * its uid: a path the revision holds is added, replacing what is there; a path that was absent when the
 * revision was taken (stored as null) is removed where the parent has it, after a test of its current value,
 * so that a change made since `parent` was read fails the patch instead of being lost.
 */
export function rollbackPatch(data: Json | undefined, parent: JsonObject): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [{ op: 'test', path: '/metadata/uid', value: (parent.metadata as JsonObject | undefined)?.uid ?? null }];
  const walk = (value: Json | undefined, current: Json | undefined, path: string[]) => {
    const isMap = (v: Json | undefined): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);
    if (isMap(value) && !('$patch' in value) && (path.length === 0 || isMap(current))) {
      for (const [k, v] of Object.entries(value)) walk(v, isMap(current) ? current[k] : undefined, [...path, k]);
      return;
    }
    if (value === null || value === undefined) {
      if (current !== undefined) ops.push({ op: 'test', path: pointer(path), value: current }, { op: 'remove', path: pointer(path) });
      return;
    }
    // Where the parent lacks an enclosing field, the whole subtree goes in at once (an add needs its parent).
    const added = present(value);
    if (added !== undefined) ops.push({ op: 'add', path: pointer(path), value: added });
  };
  walk(data, parent, []);
  return ops;
}

/**
 * The patch applied to `doc` (RFC 6902's add, remove and test, which is all rollbackPatch makes), without I/O:
 * what the apiserver would make of it. Throws as the apiserver would refuse: a failed test, a missing parent.
 */
export function applyRollback(doc: JsonObject, ops: readonly JsonPatchOp[]): JsonObject {
  const out = JSON.parse(JSON.stringify(doc)) as JsonObject;
  for (const op of ops) {
    const parts = op.path
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const leaf = parts.pop()!;
    let at: Json = out;
    for (const p of parts) {
      if (at === null || typeof at !== 'object' || Array.isArray(at) || !(p in at)) throw new Error(`${op.path}: no parent`);
      at = at[p]!;
    }
    if (at === null || typeof at !== 'object' || Array.isArray(at)) throw new Error(`${op.path}: parent is not an object`);
    if (op.op === 'add') at[leaf] = op.value;
    else if (!(leaf in at)) throw new Error(`${op.path}: absent`);
    else if (op.op === 'remove') delete at[leaf];
    else if (!isDeepStrictEqual(at[leaf], op.value)) throw new Error(`${op.path}: test failed`);
  }
  return out;
}

/**
 * Whether `parent` already holds the revision's target state: a rollback to it would change nothing (compared as
 * a sync compares). The CLI marks that revision current, and refuses to write a rollback to it.
 */
export function matchesRevision(data: Json | undefined, parent: JsonObject): boolean {
  return semanticallyEqual(applyRollback(parent, rollbackPatch(data, parent)), parent);
}
