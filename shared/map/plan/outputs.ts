// A map key's outputs: their identities, the hook's answer made ready to write, and what to create, update and delete.
import type { ResolvedResource } from '../../kube/discovery.ts';
import { parseApiVersion, type KubeObject } from '../../kube/resource.ts';
import { canonicalJson, shortHash, type Json } from '../../json.ts';
import { controllerOf, newControllerRef } from '../../ownership/controller-ref.ts';
import { APPLIED_ANNOTATION, MAP_KEY_LABEL, PARENT_LABEL, type OutputMap } from '../api.ts';
import { appliedOwnership } from './managed-fields.ts';

/** `<group>/<Kind>/<namespace>/<name>`: one object, whatever version it was read or written in. */
export function identityOf(o: KubeObject): string {
  return `${parseApiVersion(o.apiVersion ?? '').group}/${o.kind ?? ''}/${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;
}

/** The parent's outputs, by map key. Objects controlled by anyone else are not outputs, whatever their labels. */
export function outputsByKey(parent: KubeObject, objects: readonly KubeObject[]): Map<string, KubeObject[]> {
  const out = new Map<string, KubeObject[]>();
  for (const o of objects) {
    if (controllerOf(o)?.uid !== parent.metadata.uid) continue;
    const key = o.metadata.labels?.[MAP_KEY_LABEL];
    if (!key) continue; // owned, but not made by a map pass: counted in status, never changed
    out.set(key, [...(out.get(key) ?? []), o]);
  }
  return out;
}

/** The hook's `outputs` argument: `<Kind>.<apiVersion>` -> `<namespace>/<name>` (or `<name>`) -> object. */
export function outputMap(objects: readonly KubeObject[]): OutputMap {
  const out: OutputMap = {};
  for (const o of objects) {
    const type = `${o.kind ?? ''}.${o.apiVersion ?? ''}`;
    const name = o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name ?? ''}` : (o.metadata.name ?? '');
    (out[type] ??= {})[name] = o;
  }
  return out;
}

export class OutputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutputError';
  }
}

/**
 * A hook's desired outputs made ready to write: each of a listed output kind, in the parent's namespace (a
 * namespaced parent owns nothing elsewhere), named once, with the parent's ControllerRef, the map key and
 * parent labels and the hash of what is applied. Throws OutputError, naming the output, for anything else.
 */
export function prepareOutputs(
  desired: readonly KubeObject[],
  ctx: { parent: KubeObject; mapKey: string; outputKinds: readonly ResolvedResource[] },
): KubeObject[] {
  const parentNs = ctx.parent.metadata.namespace;
  const seen = new Set<string>();
  return desired.map((d) => {
    const what = `output ${d.kind ?? '?'} ${d.metadata.namespace ? `${d.metadata.namespace}/` : ''}${d.metadata.name ?? '?'}`;
    const { group, version } = parseApiVersion(d.apiVersion ?? '');
    const kind = ctx.outputKinds.find((k) => k.group === group && k.kind === d.kind);
    if (!kind) throw new OutputError(`${what}: ${d.apiVersion ?? ''} ${d.kind ?? ''} is not one of the controller's outputResources`);
    if (kind.version !== version)
      throw new OutputError(
        `${what}: written as ${d.apiVersion ?? ''}, but outputResources names ${group ? `${group}/` : ''}${kind.version}`,
      );
    let namespace = d.metadata.namespace;
    if (!kind.namespaced && namespace) throw new OutputError(`${what}: ${d.kind ?? ''} is cluster-scoped and takes no namespace`);
    if (kind.namespaced && parentNs) {
      if (namespace && namespace !== parentNs)
        throw new OutputError(`${what}: is in namespace ${namespace}, but a parent in ${parentNs} may own outputs in ${parentNs} only`);
      namespace = parentNs;
    }
    if (kind.namespaced && !namespace) throw new OutputError(`${what}: a namespaced output of a cluster-scoped parent needs a namespace`);
    const ours = d.metadata.ownerReferences?.find((r) => r.controller === true && r.uid !== ctx.parent.metadata.uid);
    if (ours) throw new OutputError(`${what}: names another controller; outputs are owned by the parent`);
    const {
      uid: _uid,
      resourceVersion: _rv,
      generation: _g,
      creationTimestamp: _c,
      managedFields: _m,
      deletionTimestamp: _d,
      selfLink: _s,
      ...meta
    } = d.metadata;
    const { status: _status, ...body } = d;
    const object: KubeObject = {
      ...body,
      metadata: {
        ...meta,
        ...(namespace ? { namespace } : {}),
        labels: { ...meta.labels, [MAP_KEY_LABEL]: ctx.mapKey, [PARENT_LABEL]: ctx.parent.metadata.uid ?? '' },
        ownerReferences: [...(meta.ownerReferences ?? []).filter((r) => r.controller !== true), newControllerRef(ctx.parent)],
      },
    };
    const id = identityOf(object);
    if (seen.has(id)) throw new OutputError(`${what}: answered twice`);
    seen.add(id);
    object.metadata.annotations = { ...meta.annotations, [APPLIED_ANNOTATION]: shortHash(object as unknown as Json, 0) };
    return object;
  });
}

export interface OutputChanges {
  create: KubeObject[];
  /** `content`: what was applied or a field the hook sets differs; otherwise only the field ownership is rewritten. */
  update: Array<{ desired: KubeObject; observed: KubeObject; content: boolean }>;
  delete: KubeObject[];
  unchanged: KubeObject[];
}

/**
 * What makes the observed outputs of one map key the desired ones. An output is rewritten when what was
 * applied changed (its hash), when someone changed a field it sets (drift), or when `manager` still holds
 * fields of it through an update (appliedOwnership); fields the apiserver or others added are not a difference.
 */
export function diffOutputs(observed: readonly KubeObject[], desired: readonly KubeObject[], manager?: string): OutputChanges {
  const changes: OutputChanges = { create: [], update: [], delete: [], unchanged: [] };
  const { pairs, unwanted } = pairByIdentity(observed, desired);
  for (const { desired: d, observed: o } of pairs) {
    if (!o) {
      changes.create.push(d);
      continue;
    }
    const content = appliedDiffers(o, d, APPLIED_ANNOTATION);
    if (content || (manager !== undefined && appliedOwnership(o, manager, d))) changes.update.push({ desired: d, observed: o, content });
    else changes.unchanged.push(o);
  }
  changes.delete.push(...unwanted);
  return changes;
}

/** Each desired object with the observed one of its identity (identityOf), and the observed ones none names. */
export function pairByIdentity(
  observed: readonly KubeObject[],
  desired: readonly KubeObject[],
): { pairs: Array<{ desired: KubeObject; observed: KubeObject | undefined }>; unwanted: KubeObject[] } {
  const byId = new Map(observed.map((o) => [identityOf(o), o]));
  const wanted = new Set(desired.map(identityOf));
  return {
    pairs: desired.map((d) => ({ desired: d, observed: byId.get(identityOf(d)) })),
    unwanted: observed.filter((o) => !wanted.has(identityOf(o))),
  };
}

/** What was applied changed (the hash in `annotation`), or someone changed a field the desired object sets. */
export function appliedDiffers(o: KubeObject, d: KubeObject, annotation: string): boolean {
  return (
    o.metadata.annotations?.[annotation] !== d.metadata.annotations?.[annotation] || !contains(o as unknown as Json, d as unknown as Json)
  );
}

/** Every field of `expected` is in `actual` with the same value (lists item by item, same length). */
export function contains(actual: Json | undefined, expected: Json | undefined): boolean {
  if (expected === null || typeof expected !== 'object') return canonicalJson(actual) === canonicalJson(expected);
  if (Array.isArray(expected))
    return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => contains(actual[i], e));
  if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return canonicalJson(expected) === canonicalJson(undefined);
  return Object.entries(expected).every(([k, v]) => contains(actual[k], v));
}

/**
 * The tombstone hook's answer: which detached outputs to keep (or the finalize hook's: which of the outputs of a
 * parent being deleted). Answering an object that is not one of them is an error (it would otherwise be silently
 * ignored, or mistaken for a request to create it). With `namespace` (the finalize hook's, a namespaced
 * parent's), an answer that names no namespace means the parent's, as in a map hook's answer.
 */
export function detachedToDelete(
  detached: readonly KubeObject[],
  keep: readonly KubeObject[],
  opts: { hook?: string; namespace?: string | undefined } = {},
): KubeObject[] {
  const ids = new Set(detached.map(identityOf));
  const keepIds = keep.map((k) =>
    identityOf(opts.namespace && !k.metadata.namespace ? { ...k, metadata: { ...k.metadata, namespace: opts.namespace } } : k),
  );
  keep.forEach((k, i) => {
    if (!ids.has(keepIds[i]!))
      throw new OutputError(
        `the ${opts.hook ?? 'tombstone'} hook answered ${k.kind ?? '?'} ${k.metadata.name ?? '?'}, which is not one of the ${opts.hook ? 'parent' : 'detached'} outputs`,
      );
  });
  const kept = new Set(keepIds);
  return detached.filter((d) => !kept.has(identityOf(d)));
}
