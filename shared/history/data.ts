// A revision's data: the parent's target object state (the fields its generated objects are made from),
// stored as a patch that replaces each path, the shape kubectl's rollout undo applies to DaemonSets and
// StatefulSets: {"spec":{"template":{..., "$patch":"replace"}}}. Nothing else of the parent (replicas,
// strategy, status) is in it, so scaling is never a revision.
//
// Equality is semantic: both sides are normalised so that what does not change meaning (key order, a null,
// an empty map or list against an absent field, the `$patch` directive, `creationTimestamp: null`, and, given
// the kind's defaults, a field set to its default against an absent one) cannot make two equal states differ.
// Upstream shipped that bug three times (kubernetes #134773 and #78633, lws #797).

import { compileSelector, matches, SelectorError, type LabelSelector } from '../ownership/selector.ts';
import { shortHash, type Json, type JsonObject } from '../json.ts';

export type { Json, JsonObject };

export class PathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PathError';
  }
}

const PATH = /^[A-Za-z_$][A-Za-z0-9_$-]*(\.[A-Za-z_$][A-Za-z0-9_$-]*)*$/;

export function parsePath(path: string): string[] {
  if (!PATH.test(path)) throw new PathError(`field path ${JSON.stringify(path)} is not a dotted path such as spec.template`);
  const parts = path.split('.');
  if (parts[0] === 'metadata' || parts[0] === 'status' || parts[0] === 'apiVersion' || parts[0] === 'kind') {
    throw new PathError(
      `field path ${JSON.stringify(path)} is not target state: it must be under spec or another field of the object's specification`,
    );
  }
  return parts;
}

function get(obj: Json | undefined, parts: string[]): Json | undefined {
  let cur = obj;
  for (const p of parts) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur)) return undefined;
    cur = (cur as JsonObject)[p];
  }
  return cur;
}

/** The value at a dotted path of any object; undefined where the path does not lead. */
export function fieldAt(obj: unknown, path: string): unknown {
  let cur = obj;
  for (const p of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
}

/** The revision data for `parent`: each path's value, replacing what is there when applied as a patch. */
export function targetState(parent: JsonObject, paths: readonly string[]): JsonObject {
  const data: JsonObject = {};
  for (const path of paths) {
    const parts = parsePath(path);
    const value = get(parent, parts);
    let cur = data;
    for (const p of parts.slice(0, -1)) {
      const next = cur[p];
      if (next === undefined || next === null || typeof next !== 'object' || Array.isArray(next)) cur[p] = {};
      cur = cur[p] as JsonObject;
    }
    const leaf = parts[parts.length - 1]!;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) cur[leaf] = { ...value, $patch: 'replace' };
    else cur[leaf] = value === undefined ? null : value;
  }
  return data;
}

/**
 * The revision hash (a revision's name suffix): the short hash of the canonical data and the collision count
 * (shortHash, shared/json.ts). The canonical data is taken without defaults: names made before defaults were
 * known must stay reproducible.
 */
export function revisionHash(data: Json, collisionCount: number): string {
  return shortHash(data, collisionCount);
}

/**
 * `<parent>-<hash>`, with the parent part cut so that the name is a valid DNS subdomain and also fits in a
 * label value (63 characters): generated objects carry the revision name in a label (upstream's StatefulSet
 * pods cannot be created for set names over 52 characters, kubernetes #64023).
 */
export function revisionName(parentName: string, hash: string): string {
  const room = 63 - 1 - hash.length;
  const prefix = parentName.slice(0, room).replace(/[-.]+$/, '');
  return `${prefix}-${hash}`;
}

/** A label value naming the parent (names can be longer than a label value allows). */
export function parentLabelValue(parentName: string): string {
  if (parentName.length <= 63) return parentName;
  return `${parentName.slice(0, 52).replace(/[-.]+$/, '')}-${revisionHash(parentName, 0)}`.slice(0, 63);
}

/** The labels that select one parent's revisions: its name and its kind (with group). */
export function parentLabels(parent: {
  kind?: string | undefined;
  apiVersion?: string | undefined;
  metadata: { name?: string | undefined };
}): Record<string, string> {
  const group = (parent.apiVersion ?? '').includes('/') ? (parent.apiVersion ?? '').split('/')[0]! : 'core';
  return {
    'outrigger.dev/parent': parentLabelValue(parent.metadata.name ?? ''),
    'outrigger.dev/parent-kind': parentLabelValue(`${(parent.kind ?? '').toLowerCase()}.${group}`),
  };
}

/**
 * Labels under which the parent's own selector finds a revision of `data`, so that stock `kubectl rollout
 * history` and `undo` (which list revisions by the parent's selector) see it whatever form the selector takes:
 * the labels of the first template in the data whose labels the selector matches, as upstream labels
 * StatefulSet and DaemonSet history with the pod template's
 * (https://github.com/kubernetes/kubernetes/blob/v1.35.4/pkg/controller/statefulset/stateful_set_utils.go).
 * Without such a template, the selector's matchLabels (all a selector of expressions alone cannot be
 * satisfied from). Labels that are not valid label keys and values are never returned.
 */
export function selectorLabels(
  selector: LabelSelector | null | undefined,
  data: JsonObject,
  paths: readonly string[],
): Record<string, string> {
  let compiled;
  try {
    compiled = compileSelector(selector);
  } catch (err) {
    if (err instanceof SelectorError) return {};
    throw err;
  }
  for (const path of paths) {
    const labels = validLabels(get(get(data, parsePath(path)), ['metadata', 'labels']));
    if (labels && matches(compiled, labels)) return labels;
  }
  return validLabels(selector?.matchLabels ?? {}) ?? {};
}

/** A copy of `value` if it is a map of valid label keys to valid label values. */
function validLabels(value: unknown): Record<string, string> | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.values(value).every((v) => typeof v === 'string'))
    return undefined;
  const labels = { ...(value as Record<string, string>) };
  try {
    compileSelector({ matchLabels: labels }); // checks every key and value as the apiserver would
  } catch (err) {
    if (err instanceof SelectorError) return undefined;
    throw err;
  }
  return labels;
}

export function labelSelectorString(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}
