// One MapController sync pass (docs/controllers/mapcontroller.md), the decisions only: which objects are inputs, which outputs belong to
// which map key, whether a hook's answer may be applied, what to create, update and delete, and the parent's
// aggregated status. The shell (functions/map) lists, calls hooks and writes.
import { createHash } from 'node:crypto';
import type { ResolvedResource } from '../kube/discovery.ts';
import { parseApiVersion, type KubeObject } from '../kube/resource.ts';
import { canonicalJson, shortHash, type Json } from '../json.ts';
import { compileSelector, controllerOf, matches, newControllerRef, type LabelSelector, type Selector } from '../ownership/index.ts';
import { APPLIED_ANNOTATION, MAP_KEY_LABEL, PARENT_LABEL, type Definition, type OutputMap } from './api.ts';

/** The parent's duck-typed `spec.selector`; missing or empty selects every input in scope (docs/controllers/mapcontroller.md). */
export function inputSelector(parent: KubeObject): Selector {
  const raw = (parent.spec as { selector?: LabelSelector | null } | undefined)?.selector;
  return compileSelector(raw ?? {});
}

/** Inputs: the matching candidates, except those this parent controls (an output listed as an input: no recursion). */
export function selectInputs(parent: KubeObject, selector: Selector, candidates: readonly KubeObject[]): KubeObject[] {
  return candidates.filter((c) => controllerOf(c)?.uid !== parent.metadata.uid && matches(selector, c.metadata.labels));
}

/** The map key of an input: its uid, so a recreated input is a new input and the old one's outputs are detached. */
export function mapKeyOf(input: KubeObject): string {
  const uid = input.metadata.uid;
  if (!uid) throw new Error(`input ${input.metadata.namespace ?? ''}/${input.metadata.name ?? ''} has no uid`);
  return uid;
}

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
  const byId = new Map(observed.map((o) => [identityOf(o), o]));
  const changes: OutputChanges = { create: [], update: [], delete: [], unchanged: [] };
  const wanted = new Set<string>();
  for (const d of desired) {
    const id = identityOf(d);
    wanted.add(id);
    const o = byId.get(id);
    if (!o) {
      changes.create.push(d);
      continue;
    }
    const content =
      o.metadata.annotations?.[APPLIED_ANNOTATION] !== d.metadata.annotations?.[APPLIED_ANNOTATION] ||
      !contains(o as unknown as Json, d as unknown as Json);
    if (content || (manager !== undefined && appliedOwnership(o, manager, d))) changes.update.push({ desired: d, observed: o, content });
    else changes.unchanged.push(o);
  }
  for (const o of observed) if (!wanted.has(identityOf(o))) changes.delete.push(o);
  return changes;
}

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

/**
 * Whether a scheduled tick (every `tickMs`) resyncs a parent: once per resync period, at a phase fixed by the
 * parent's uid so a thousand parents with one period do not all resync in the same tick. Periods shorter than
 * the tick resync every tick. Stateless: nothing is stored per parent. Returns the period's index (a
 * deduplication cause) or undefined.
 */
export function resyncDue(uid: string, periodSeconds: number, now: Date, tickMs: number): number | undefined {
  const period = periodSeconds * 1000;
  const t = now.getTime();
  if (period <= tickMs) return Math.floor(t / tickMs);
  const phase = createHash('sha256').update(uid).digest().readUInt32BE(0) % period;
  const index = Math.floor((t - phase) / period);
  return index !== Math.floor((t - tickMs - phase) / period) ? index : undefined;
}

/** What the map handler keeps per parent: when its last clean pass started, and with which definition. */
export interface PassRecord {
  startedAt: number;
  controller?: string;
  generation?: number;
  /** What the last clean pass's answers rest on, so the next pass calls the hook only for inputs that changed. */
  answers?: AnswerRecord | undefined;
  /** When the parent's pending wake-up timer is due (ms since the epoch): a timer due at another time is stale. */
  wakeAt?: number | undefined;
}

/**
 * Per map key, the input's resourceVersion and the outputs its answer named (a hash of their identities), with
 * the parent's generation and the MapController's definition they were answered for.
 */
export interface AnswerRecord {
  parentGeneration: number;
  controller: string;
  generation: number;
  inputs: Record<string, string>;
  /** Per map key, when its hook asked to be called again (resyncAfterSeconds, ms since the epoch). */
  wakes?: Record<string, number> | undefined;
}

/** More inputs than this and a parent's answers are not recorded (a DynamoDB item holds 400 KB): every pass calls every hook. */
export const MAX_RECORDED_INPUTS = 4_000;

/** An input's resourceVersion and the identities of its outputs, as AnswerRecord.inputs keeps them. */
export function answerFingerprint(input: KubeObject, outputs: readonly KubeObject[]): string {
  const ids = outputs.map(identityOf).sort().join('\n');
  return `${input.metadata.resourceVersion ?? ''}:${createHash('sha256').update(ids).digest('hex').slice(0, 16)}`;
}

/**
 * Whether the last answer for an input still holds, so its hook need not be called: an incremental pass (not a
 * resync: hooks may depend on the clock), the same parent generation and MapController definition, the input
 * unchanged (resourceVersion) and its outputs those the answer named (one deleted or added is a change), and no
 * output of it named by the request (someone changed it: the hook's answer is what it is set back to).
 */
export function answerHolds(
  previous: AnswerRecord | undefined,
  at: { parentGeneration: number; controller: string; generation: number },
  input: KubeObject,
  outputs: readonly KubeObject[],
  touched: ReadonlySet<string>,
  now = Date.now(),
): boolean {
  if (
    !previous ||
    previous.parentGeneration !== at.parentGeneration ||
    previous.controller !== at.controller ||
    previous.generation !== at.generation
  )
    return false;
  if (outputs.some((o) => o.metadata.uid && touched.has(o.metadata.uid))) return false;
  // The hook asked to be called again by now (resyncAfterSeconds): its answer no longer holds.
  const wake = previous.wakes?.[mapKeyOf(input)];
  if (wake !== undefined && wake <= now + WAKE_EARLY_MS) return false;
  return previous.inputs[mapKeyOf(input)] === answerFingerprint(input, outputs);
}

// resyncAfterSeconds (docs/controllers/mapcontroller.md#lifecycle): a hook's wish to be called again after a while, with no
// change. Sync queues are FIFO, which take no per-message delay, and a message held back in a parent's own group
// would hold back that parent's events too. So a pass that leaves a wish sends one *timer* message in a group of
// its own (the parent's group and "/timer"): each receive before it is due holds it back (its visibility, as a
// retry's backoff is set) and, once due, it sends the parent an ordinary sync request, in the parent's group.

/** A wake this close (ms) is due: timers are held in whole seconds, and a wake a little early is harmless. */
export const WAKE_EARLY_MS = 250;
/** How long one timer message is held at most, counted from when it was sent: below the queues' oldest-message alarm. */
export const TIMER_HOLD_MAX_SECONDS = 240;
/** How a timer message's cause begins: `timer/<due, ms since the epoch>/<nonce>`. */
export const TIMER_CAUSE = 'timer/';
/** How the sync request a due timer sends begins: `wake/<due>/<nonce>`. */
export const WAKE_CAUSE = 'wake/';
/** A finalize hook that answers `finalized: false` without resyncAfterSeconds is called again after this long. */
export const FINALIZE_AGAIN_SECONDS = 10;

export function timerCause(dueAt: number, nonce: string): string {
  return `${TIMER_CAUSE}${dueAt}/${nonce}`;
}

export function wakeCause(dueAt: number, nonce: string): string {
  return `${WAKE_CAUSE}${dueAt}/${nonce}`;
}

/** The due time a timer message names, or undefined for any other request. */
export function timerOf(causes: readonly string[]): number | undefined {
  for (const c of causes) {
    if (!c.startsWith(TIMER_CAUSE)) continue;
    const due = Number(c.slice(TIMER_CAUSE.length).split('/')[0]);
    if (Number.isSafeInteger(due) && due > 0) return due;
  }
  return undefined;
}

export type TimerStep = { kind: 'fire' } | { kind: 'hold'; seconds: number } | { kind: 'renew' } | { kind: 'stale' };

/**
 * What a received timer message does: `stale` when the parent's record names another wake (a later pass replaced
 * it); `fire` when due; `hold` it back, in whole seconds, until due or until it is TIMER_HOLD_MAX_SECONDS old;
 * `renew` (a fresh timer for the same time) when it is that old.
 */
export function timerStep(t: { now: number; sentAt: number; dueAt: number; recorded: number | undefined; hasRecord: boolean }): TimerStep {
  if (t.hasRecord && t.recorded !== t.dueAt) return { kind: 'stale' };
  const remaining = t.dueAt - t.now;
  if (remaining <= WAKE_EARLY_MS) return { kind: 'fire' };
  const ageLimit = t.sentAt + TIMER_HOLD_MAX_SECONDS * 1000;
  if (t.dueAt <= ageLimit) return { kind: 'hold', seconds: Math.ceil(remaining / 1000) };
  const left = Math.floor((ageLimit - t.now) / 1000);
  return left >= 1 ? { kind: 'hold', seconds: left } : { kind: 'renew' };
}

/**
 * After a pass: the wake it leaves (the earliest its hooks asked for), and whether a timer must be sent for it. A
 * pending timer (`pending`, not yet due) due no later than what is wanted serves it: the pass it starts sends the
 * next one. With no wish, the pending timer becomes stale.
 */
export function nextWake(
  pending: number | undefined,
  wanted: number | undefined,
  now: number,
): { wakeAt: number | undefined; send: boolean } {
  if (wanted === undefined) return { wakeAt: undefined, send: false };
  if (pending !== undefined && pending > now && pending <= wanted) return { wakeAt: pending, send: false };
  return { wakeAt: wanted, send: true };
}

/** The finalizer list with `name` added (`want`) or removed, or undefined when it already is so. */
export function finalizersWith(finalizers: readonly string[] | undefined, name: string, want: boolean): string[] | undefined {
  const list = finalizers ?? [];
  if (list.includes(name) === want) return undefined;
  return want ? [...list, name] : list.filter((f) => f !== name);
}

/**
 * A kept output released from a parent that goes (the finalize hook kept it): a merge patch, conditional on the
 * resourceVersion read, that removes the parent's ControllerRef and Outrigger's labels and annotation, so the
 * garbage collector leaves it when the parent is gone and no later pass takes it for an output.
 */
export function releasePatch(o: KubeObject, parentUid: string): Record<string, unknown> {
  const refs = (o.metadata.ownerReferences ?? []).filter((r) => r.uid !== parentUid);
  return {
    metadata: {
      resourceVersion: o.metadata.resourceVersion,
      ownerReferences: refs.length ? refs : null,
      labels: { [MAP_KEY_LABEL]: null, [PARENT_LABEL]: null },
      annotations: { [APPLIED_ANNOTATION]: null },
    },
  };
}

/**
 * Whether a request must run a pass, is already served by a later clean pass, or finds this process's
 * definition of the MapController older than the request's or than the last pass's (refresh it, then ask again
 * with `refreshed`). A pass serves later requests only with the definition they would be served with: a process
 * whose cached definition is stale runs its pass, but does not make a request for the newer one look served.
 */
export function passDecision(opts: {
  last: PassRecord | undefined;
  sentAt: number;
  skewMs: number;
  current: Definition | undefined;
  requested: Definition | undefined;
  refreshed: boolean;
}): 'run' | 'served' | 'refresh' | 'no-controller' {
  const { last, current, requested } = opts;
  const behind =
    (requested && (!current || requested.uid !== current.uid || requested.generation > current.generation)) ||
    (current && last?.controller === current.uid && (last.generation ?? 0) > current.generation);
  if (behind && !opts.refreshed) return 'refresh';
  if (!current) return 'no-controller';
  const sameDefinition =
    last?.controller === current.uid &&
    last.generation === current.generation &&
    (!requested || (requested.uid === current.uid && requested.generation <= current.generation));
  return last && sameDefinition && last.startedAt > opts.sentAt + opts.skewMs ? 'served' : 'run';
}

// A pass fits its invocation (docs/design/map-pass.md#a-pass-fits-its-invocation): it gets a share of the
// invocation's remaining time, starts a hook call only while one attempt still fits, and hands the inputs it did
// not reach to a follow-up request for the same parent, which takes them in map-key order from where it stopped.

/** Kept from the invocation's remaining time for the pass's last writes (status, Events, its record, a follow-up). */
export const PASS_RESERVE_MS = 5_000;
/** Kept for each later record of the batch, unless an equal share of what remains is more. */
export const PASS_SHARE_MS = 10_000;

/**
 * A pass's time budget: what remains of the invocation, less the reserve and a share for each of the `later`
 * records of the batch (at least an equal share of it), so one slow parent leaves the rest of its batch time to run.
 */
export function passBudgetMs(remainingMs: number, later: number): number {
  const usable = Math.max(0, remainingMs - PASS_RESERVE_MS);
  return Math.max(usable / (later + 1), usable - later * PASS_SHARE_MS);
}

/**
 * Whether a hook call may start with `leftMs` of the pass's budget left: one attempt must fit (its timeout), or,
 * for a hook whose timeout is longer than half the budget, half the budget must be left, so every pass starts some.
 */
export function callFits(leftMs: number, timeoutMs: number, budgetMs: number): boolean {
  return leftMs > 0 && leftMs >= Math.min(timeoutMs, budgetMs / 2);
}

/** Sorts after every map key (a uid): a follow-up that owes only detached outputs their tombstone call. */
export const AFTER_ALL_KEYS = '~';

/** How a follow-up request's cause begins: `continue/<map key>/<problems so far>/<first reason>/<nonce>`. */
export const CONTINUE_CAUSE = 'continue/';

export interface Continuation {
  /** The first map key not reached; keys before it had their turn earlier in this sync. */
  cursor: string;
  /** Problems of the earlier passes of this sync, and the first one's reason. */
  problems: number;
  reason: string;
}

export function continuationCause(c: Continuation, nonce: string): string {
  return `${CONTINUE_CAUSE}${c.cursor}/${c.problems}/${c.reason || '-'}/${nonce}`;
}

export function continuationOf(causes: readonly string[]): Continuation | undefined {
  for (const c of causes) {
    if (!c.startsWith(CONTINUE_CAUSE)) continue;
    const [cursor, problems, reason] = c.slice(CONTINUE_CAUSE.length).split('/');
    if (cursor && Number.isSafeInteger(Number(problems)) && Number(problems) >= 0)
      return { cursor, problems: Number(problems), reason: reason === '-' ? '' : (reason ?? '') };
  }
  return undefined;
}

/** Reasons a retry cannot cure (the parent's or the MapController's spec must change, which queues a sync anyway). */
const NOT_RETRIED = new Set(['InvalidSelector', 'HookRefused']);

/**
 * A failing parent is retried with backoff this many receives at most; then its message is consumed and the next
 * change or resync tries again, so a tenant's broken hook never fills a dead-letter queue (infra's
 * MAX_RECEIVE_COUNT is higher).
 */
export const MAP_RETRY_RECEIVES = 10;

export type PassOutcome =
  | { kind: 'done' }
  | { kind: 'continue'; continuation: Continuation }
  | { kind: 'retry'; afterSeconds: number | undefined; reason: string }
  | { kind: 'give-up'; reason: string };

/**
 * What follows a pass: nothing (done), a follow-up for the inputs it did not reach, a retry of its message (after
 * the hook's Retry-After, else the message's backoff), or, past MAP_RETRY_RECEIVES, nothing more for now.
 * A hook that asked to be called later is not called again before then: the retry, not a follow-up, continues.
 */
export function passOutcome(pass: {
  deferred: readonly string[];
  problems: ReadonlyArray<{ reason: string }>;
  retryAfterSeconds: number | undefined;
  earlier: Continuation | undefined;
  receiveCount: number;
}): PassOutcome {
  const problems = (pass.earlier?.problems ?? 0) + pass.problems.length;
  const reason = pass.earlier?.problems ? pass.earlier.reason : (pass.problems[0]?.reason ?? '');
  const retry = (afterSeconds: number | undefined): PassOutcome =>
    pass.receiveCount >= MAP_RETRY_RECEIVES ? { kind: 'give-up', reason } : { kind: 'retry', afterSeconds, reason };
  if (pass.retryAfterSeconds !== undefined) return retry(pass.retryAfterSeconds);
  if (pass.deferred.length) return { kind: 'continue', continuation: { cursor: [...pass.deferred].sort()[0]!, problems, reason } };
  const retriable =
    pass.problems.some((p) => !NOT_RETRIED.has(p.reason)) ||
    (pass.earlier !== undefined && pass.earlier.problems > 0 && !NOT_RETRIED.has(pass.earlier.reason));
  return retriable ? retry(undefined) : { kind: 'done' };
}
