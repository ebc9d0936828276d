// Server-side apply's field ownership of an output: the fields Outrigger holds become its applied ones.
import type { KubeObject } from '../../kube/resource.ts';
import { canonicalJson, type Json } from '../../json.ts';

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  apiVersion?: string;
  fieldsType?: string;
  fieldsV1?: Record<string, unknown>;
  subresource?: string;
  time?: string;
}

/**
 * The managedFields that make `manager` own, as an applier, every field it holds through an update (a create
 * is an update to server-side apply), or undefined when it holds none that way. Server-side apply removes a
 * field only when the applier alone owns it, and an update's fields are never removed by an apply: an output
 * created with a POST would keep for ever every field its hook later drops. A create cannot itself be an
 * apply without taking over an object of that name that is someone else's, so the create is followed by this
 * rewrite (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
 */
export function appliedOwnership(o: KubeObject, manager: string, desired?: KubeObject): ManagedFieldsEntry[] | undefined {
  const entries = (o.metadata.managedFields ?? []) as ManagedFieldsEntry[];
  const mine = (e: ManagedFieldsEntry) => e.manager === manager && !e.subresource;
  const updates = entries.filter((e) => mine(e) && e.operation === 'Update');
  if (!updates.length) return undefined;
  const applied = entries.find((e) => mine(e) && e.operation === 'Apply');
  // Field sets are tries of objects: their union is a deep merge. An update also owns what the apiserver filled
  // in (defaults, a Job's generated selector): of those, only the fields the hook answered become applied, or the
  // next apply would remove the rest, and an immutable one would fail every apply after.
  const fieldsV1 = [...(applied ? [applied] : []), ...updates].reduce<Record<string, unknown>>(
    (set, e) =>
      unionFields(set, e === applied || !desired ? (e.fieldsV1 ?? {}) : fieldsWithin(e.fieldsV1 ?? {}, desired as unknown as Json)),
    {},
  );
  const apiVersion = applied?.apiVersion ?? updates[0]!.apiVersion;
  return [
    ...entries.filter((e) => !mine(e) || (e.operation !== 'Update' && e.operation !== 'Apply')),
    { manager, operation: 'Apply', apiVersion, fieldsType: 'FieldsV1', fieldsV1 },
  ];
}

/**
 * The part of a field set (FieldsV1: `f:<name>`, `k:<keys>` for an item of a keyed list, `v:<value>` of a set,
 * `i:<index>`, `.` for the node itself) that `value` has. https://kubernetes.io/docs/reference/using-api/server-side-apply/
 */
export function fieldsWithin(set: Record<string, unknown>, value: Json | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const sub = (v: unknown) => (v ?? {}) as Record<string, unknown>;
  const list = Array.isArray(value) ? value : undefined;
  for (const [k, v] of Object.entries(set)) {
    if (k === '.') out[k] = v;
    else if (k.startsWith('f:')) {
      const name = k.slice(2);
      if (value !== null && typeof value === 'object' && !Array.isArray(value) && value[name] !== undefined)
        out[k] = fieldsWithin(sub(v), value[name]);
    } else if (k.startsWith('k:') && list) {
      const keys = parseJson(k.slice(2));
      const item =
        keys && typeof keys === 'object' && !Array.isArray(keys)
          ? list.find(
              (it) =>
                it !== null &&
                typeof it === 'object' &&
                !Array.isArray(it) &&
                Object.entries(keys).every(([kk, kv]) => canonicalJson(it[kk]) === canonicalJson(kv)),
            )
          : undefined;
      if (item !== undefined) out[k] = fieldsWithin(sub(v), item);
    } else if (k.startsWith('v:') && list) {
      const member = parseJson(k.slice(2));
      if (list.some((it) => canonicalJson(it) === canonicalJson(member))) out[k] = v;
    } else if (k.startsWith('i:') && list) {
      const i = Number(k.slice(2));
      if (Number.isInteger(i) && i >= 0 && i < list.length) out[k] = fieldsWithin(sub(v), list[i]);
    }
  }
  return out;
}

function parseJson(text: string): Json | undefined {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return undefined;
  }
}

function unionFields(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b))
    out[k] = unionFields((out[k] ?? {}) as Record<string, unknown>, (v ?? {}) as Record<string, unknown>);
  return out;
}
