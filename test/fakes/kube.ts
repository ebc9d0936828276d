// An in-memory KubeApi for fast unit tests of the shells' branches (docs/contributing/test-beds.md#tests). It keeps only what the
// shells rely on: objects per resource, one resourceVersion counter, uids, generateName, label selectors,
// JSON merge patches (RFC 7386) with their resourceVersion and uid preconditions, delete preconditions, finalizers
// holding a deletion, and the apiserver's error kinds as the real client's KubeErrors. What it leaves out, the
// integration tests cover against a real apiserver: server-side apply is a whole replacement of what was applied
// (no field ownership, no managedFields), no garbage collector, no defaulting or validation, no admission, and no
// strategic merge or JSON patches. Discovery serves the kinds `served` names (a few built-in ones to start
// with); `as` acts as another identity over the same store, and says whom in `beforeRequest`, but enforces no
// RBAC.
import { randomUUID } from 'node:crypto';
import {
  KubeError,
  RequestStats,
  gvrString,
  type CreateOptions,
  type DeleteOptions,
  type APIResourceList,
  type GVR,
  type Impersonation,
  type KubeApi,
  type KubeList,
  type KubeObject,
  type ListOptions,
  type ObjectRef,
  type PatchOptions,
  type PatchType,
  type ResolvedResource,
  type Stored,
  type WatchEvent,
  type WatchOptions,
  groupVersionPath,
  unlessNotFound,
} from '../../shared/kube/index.ts';
import { compileSelector, matches, parseSelector } from '../../shared/ownership/index.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * Called before each request is served: a test changes the store there to stage a race, or throws to refuse it.
 * `as` is the user the request acts as (`as`), undefined for the client's own identity.
 */
export type BeforeRequest = (verb: string, r: GVR, ref: ObjectRef | undefined, as: string | undefined) => void | Promise<void>;

/** What discovery serves to start with: the kinds the controllers' shells read and write in most tests. */
const BUILTIN_KINDS: ResolvedResource[] = [
  { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true },
  { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true },
  { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false },
  { group: 'apps', version: 'v1', resource: 'statefulsets', kind: 'StatefulSet', namespaced: true },
  { group: 'apps', version: 'v1', resource: 'daemonsets', kind: 'DaemonSet', namespaced: true },
  { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', namespaced: true },
  { group: 'apps', version: 'v1', resource: 'controllerrevisions', kind: 'ControllerRevision', namespaced: true },
  { group: 'events.k8s.io', version: 'v1', resource: 'events', kind: 'Event', namespaced: true },
];

export class FakeKube implements KubeApi {
  readonly fieldManager: string;
  /** Requests by verb, named as the real client names them (`patch/merge`, `create`, ...). */
  readonly stats = new RequestStats();
  beforeRequest: BeforeRequest | undefined;
  /** The kinds discovery serves (`getPath`). */
  readonly served: ResolvedResource[] = [...BUILTIN_KINDS];
  private readonly store = new Map<string, Map<string, Stored>>();
  // In a box, so that the views `as` makes share it.
  private readonly counter = { revision: 0 };
  private readonly watchers = new Set<(r: GVR, event: WatchEvent<Stored>) => void>();
  private readonly impersonation: Impersonation | undefined;

  constructor(opts: { fieldManager?: string } = {}) {
    this.fieldManager = opts.fieldManager ?? 'outrigger';
  }

  /** Stores objects as they are, with what the apiserver would add: for setting a scene, not counted. */
  seed<T extends KubeObject>(r: GVR, ...objects: T[]): Array<Stored<T>> {
    return objects.map((o) => this.insert(r, o, o.metadata.namespace) as Stored<T>);
  }

  /** Changes a stored object as someone else would (a new resourceVersion): not counted, not seen by beforeRequest. */
  touch(r: GVR, ref: ObjectRef, change: (o: Stored) => void): Stored {
    const current = this.read(r, ref);
    const next = clone(current);
    change(next);
    return this.write(r, current, next);
  }

  /** The stored object, or undefined: for assertions, not counted. */
  peek(r: GVR, ref: ObjectRef): Stored | undefined {
    const o = this.objects(r).get(keyOf(ref));
    return o && clone(o);
  }

  async get<T extends KubeObject = KubeObject>(r: GVR, ref: ObjectRef): Promise<Stored<T>> {
    await this.serve('get', r, ref);
    return clone(this.read(r, ref)) as Stored<T>;
  }

  async find<T extends KubeObject = KubeObject>(r: GVR, ref: ObjectRef): Promise<Stored<T> | undefined> {
    return unlessNotFound(this.get<T>(r, ref));
  }

  async list<T extends KubeObject = KubeObject>(r: GVR, opts: ListOptions = {}): Promise<KubeList<Stored<T>>> {
    await this.serve('list', r, undefined);
    const items = [...this.objects(r).values()].filter((o) => selected(o, opts)).map((o) => clone(o) as Stored<T>);
    return { metadata: { resourceVersion: String(this.counter.revision) }, items };
  }

  async listMetadata(r: GVR, opts: ListOptions = {}): Promise<KubeList<Stored>> {
    await this.serve('list/metadata', r, undefined);
    const items = [...this.objects(r).values()].filter((o) => selected(o, opts));
    return {
      metadata: { resourceVersion: String(this.counter.revision) },
      items: items.map((o) => ({ apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadata', metadata: clone(o.metadata) })),
    };
  }

  /** Discovery only: the APIGroupList (`/apis`) and the APIResourceList of a group version, from `served`. */
  async getPath<T>(path: string): Promise<T> {
    await this.serve('discovery', { group: '', version: '', resource: path }, undefined);
    if (path === '/apis') {
      const versions = new Map<string, string[]>();
      for (const r of this.served.filter((s) => s.group))
        versions.set(r.group, [...new Set([...(versions.get(r.group) ?? []), r.version])]);
      const groups = [...versions].map(([name, vs]) => ({
        name,
        versions: vs.map((version) => ({ groupVersion: `${name}/${version}`, version })),
        preferredVersion: { groupVersion: `${name}/${vs[0]!}`, version: vs[0]! },
      }));
      return { kind: 'APIGroupList', apiVersion: 'v1', groups } as T;
    }
    const resources = this.served.filter((r) => groupVersionPath(r) === path);
    if (!resources.length) throw status('NotFound', 404, `the server could not find the requested resource (get ${path})`);
    const list: APIResourceList = {
      groupVersion: resources[0]!.group ? `${resources[0]!.group}/${resources[0]!.version}` : resources[0]!.version,
      resources: resources.map((r) => ({ name: r.resource, kind: r.kind, namespaced: r.namespaced, verbs: ['get', 'list', 'watch'] })),
    };
    return list as T;
  }

  /** The same store, each request acting as `impersonation.user` (in `beforeRequest`). */
  as(impersonation: Impersonation): FakeKube {
    return Object.create(this, { impersonation: { value: impersonation } }) as FakeKube;
  }

  async listAll<T extends KubeObject = KubeObject>(r: GVR, opts: ListOptions = {}): Promise<Array<Stored<T>>> {
    return (await this.list<T>(r, opts)).items;
  }

  async create<T extends KubeObject = KubeObject>(r: GVR, obj: T, opts: CreateOptions = {}): Promise<Stored<T>> {
    await this.serve('create', r, undefined);
    return clone(this.insert(r, obj, opts.namespace ?? obj.metadata.namespace)) as Stored<T>;
  }

  async patch<T extends KubeObject = KubeObject>(
    r: GVR,
    ref: ObjectRef,
    patch: unknown,
    type: PatchType,
    _opts: PatchOptions = {},
  ): Promise<Stored<T>> {
    await this.serve(`patch/${type}`, r, ref);
    if (type === 'apply') return clone(this.applyObject(r, ref, patch as KubeObject)) as Stored<T>;
    if (type !== 'merge') throw new KubeError('BadRequest', `the fake serves merge and apply patches, not ${type}`, { status: 400 });
    const current = this.read(r, ref);
    const body = patch as { metadata?: { uid?: string; resourceVersion?: string }; status?: Json };
    this.preconditions(r, current, body.metadata?.uid, body.metadata?.resourceVersion);
    // The status subresource writes status alone; the object itself writes everything it is sent.
    const effective = ref.subresource === 'status' ? { status: body.status ?? null } : (patch as Json);
    const next = mergePatch(current as unknown as Json, effective) as unknown as Stored;
    return clone(this.write(r, current, next)) as Stored<T>;
  }

  async delete(r: GVR, ref: ObjectRef, opts: DeleteOptions = {}): Promise<void> {
    await this.serve('delete', r, ref);
    const current = this.read(r, ref);
    this.preconditions(r, current, opts.preconditions?.uid, opts.preconditions?.resourceVersion, 'Conflict');
    if (current.metadata.finalizers?.length) {
      if (!current.metadata.deletionTimestamp)
        this.write(r, current, { ...current, metadata: { ...current.metadata, deletionTimestamp: now() } });
      return;
    }
    this.remove(r, current);
  }

  /** Events of the changes made after it starts, until `signal` aborts. */
  async watch<T extends KubeObject = KubeObject>(
    r: GVR,
    opts: WatchOptions,
    onEvent: (event: WatchEvent<T>) => void | Promise<void>,
    signal?: AbortSignal,
  ): Promise<void> {
    this.stats.count('watch');
    const key = gvrString(r);
    const watcher = (of: GVR, event: WatchEvent<Stored>) => {
      if (gvrString(of) === key && selected(event.object, opts)) void onEvent(clone(event) as WatchEvent<T>);
    };
    this.watchers.add(watcher);
    try {
      await new Promise<void>((resolve) => {
        if (signal?.aborted) resolve();
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    } finally {
      this.watchers.delete(watcher);
    }
  }

  private async serve(verb: string, r: GVR, ref: ObjectRef | undefined): Promise<void> {
    this.stats.count(verb);
    await this.beforeRequest?.(verb, r, ref, this.impersonation?.user);
  }

  private objects(r: GVR): Map<string, Stored> {
    const key = gvrString(r);
    let objects = this.store.get(key);
    if (!objects) this.store.set(key, (objects = new Map()));
    return objects;
  }

  private read(r: GVR, ref: ObjectRef): Stored {
    const o = this.objects(r).get(keyOf(ref));
    if (!o) throw status('NotFound', 404, `${r.resource} "${ref.name}" not found`);
    return o;
  }

  private insert(r: GVR, obj: KubeObject, namespace: string | undefined): Stored {
    const { generateName } = obj.metadata;
    const name = obj.metadata.name || (generateName ? `${generateName}${randomUUID().slice(0, 5)}` : '');
    if (!name) throw status('Invalid', 422, `${r.resource}: name or generateName is required`);
    const ref = { name, namespace };
    if (this.objects(r).has(keyOf(ref))) throw status('AlreadyExists', 409, `${r.resource} "${name}" already exists`);
    const stored = clone({
      ...obj,
      metadata: {
        ...obj.metadata,
        name,
        ...(namespace ? { namespace } : {}),
        uid: randomUUID(),
        resourceVersion: String(++this.counter.revision),
        generation: 1,
        creationTimestamp: now(),
      },
    }) as Stored;
    this.objects(r).set(keyOf(ref), stored);
    this.notify(r, 'ADDED', stored);
    return stored;
  }

  /** Server-side apply as a replacement of what was applied: the fake keeps no field ownership. */
  private applyObject(r: GVR, ref: ObjectRef, body: KubeObject): Stored {
    const current = this.objects(r).get(keyOf(ref));
    if (!current) return this.insert(r, { ...body, metadata: { ...body.metadata, name: ref.name } }, ref.namespace);
    this.preconditions(r, current, body.metadata.uid, body.metadata.resourceVersion);
    const { uid, creationTimestamp, generation, deletionTimestamp } = current.metadata;
    const metadata = { ...body.metadata, name: current.metadata.name, namespace: current.metadata.namespace, uid, creationTimestamp };
    const next = { ...body, metadata: { ...metadata, generation, ...(deletionTimestamp ? { deletionTimestamp } : {}) } } as Stored;
    return this.write(r, current, next);
  }

  private preconditions(
    r: GVR,
    current: Stored,
    uid?: string,
    resourceVersion?: string,
    uidKind: 'Invalid' | 'Conflict' = 'Invalid',
  ): void {
    const name = current.metadata.name;
    if (uid !== undefined && uid !== current.metadata.uid)
      throw uidKind === 'Invalid'
        ? status('Invalid', 422, `${r.resource} "${name}": metadata.uid: field is immutable`)
        : status('Conflict', 409, `${r.resource} "${name}": precondition failed: uid ${uid}, the object's ${current.metadata.uid}`);
    if (resourceVersion !== undefined && resourceVersion !== current.metadata.resourceVersion)
      throw status(
        'Conflict',
        409,
        `${r.resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
  }

  /** Stores a change (a new resourceVersion, a new generation when more than metadata and status changed); a no-op writes nothing. */
  private write(r: GVR, current: Stored, next: Stored): Stored {
    const { resourceVersion: _r, generation: _g, ...was } = current.metadata;
    const { resourceVersion: _nr, generation: _ng, ...is } = next.metadata;
    const body = (o: Stored) => JSON.stringify({ ...o, metadata: undefined, status: undefined });
    if (
      JSON.stringify(was) === JSON.stringify(is) &&
      body(current) === body(next) &&
      JSON.stringify(current.status) === JSON.stringify(next.status)
    )
      return current;
    const stored = clone({
      ...next,
      metadata: {
        ...next.metadata,
        uid: current.metadata.uid,
        resourceVersion: String(++this.counter.revision),
        generation: (current.metadata.generation ?? 1) + (body(current) === body(next) ? 0 : 1),
      },
    }) as Stored;
    // A deletion held by finalizers ends with the last one.
    if (stored.metadata.deletionTimestamp && !stored.metadata.finalizers?.length) {
      this.remove(r, stored);
      return stored;
    }
    this.objects(r).set(keyOf(stored.metadata), stored);
    this.notify(r, 'MODIFIED', stored);
    return stored;
  }

  private remove(r: GVR, o: Stored): void {
    this.objects(r).delete(keyOf(o.metadata));
    this.notify(r, 'DELETED', o);
  }

  private notify(r: GVR, type: WatchEvent['type'], object: Stored): void {
    for (const w of this.watchers) w(r, { type, object });
  }
}

function keyOf(ref: { name: string; namespace?: string | undefined }): string {
  return `${ref.namespace ?? ''}/${ref.name}`;
}

function selected(o: KubeObject, opts: ListOptions): boolean {
  if (opts.namespace && o.metadata.namespace !== opts.namespace) return false;
  return !opts.labelSelector || matches(compileSelector(parseSelector(opts.labelSelector)), o.metadata.labels);
}

/** RFC 7386: objects merge, null removes, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: { [key: string]: Json } = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k] ?? null, v);
  }
  return out;
}

function status(kind: 'NotFound' | 'AlreadyExists' | 'Conflict' | 'Invalid', code: number, message: string): KubeError {
  return new KubeError(kind, `${code} ${kind}: ${message}`, {
    status: code,
    body: { kind: 'Status', status: 'Failure', reason: kind, code, message },
  });
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}
