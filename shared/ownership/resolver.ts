// Turns route steps into sync keys, reading the cluster as little as possible: a ControllerRef is resolved by
// kind and name and checked by uid (a parent recreated under the same name is a different parent); selector
// steps list each candidate controller kind once per namespace per batch, and match selectors locally. A kind
// whose parents Outrigger may not read alone goes without the event
// (docs/controllers/ownership-and-routing.md#one-definition-cannot-stop-anothers-routing).
import type { KubeClient } from '../kube/client.ts';
import { isKubeError, type KubeError } from '../kube/errors.ts';
import { parseApiVersion, type GVR, type KubeObject } from '../kube/resource.ts';
import type { RouteStep, SyncKey } from './router.ts';
import { compileSelector, matches, SelectorError, type LabelSelector } from './selector.ts';

/** A kind of parent that owns children and reconciles on their events. */
export interface ControllerKind {
  resource: GVR;
  kind: string;
  namespaced: boolean;
  /** The parent's selector over its children; a missing selector selects nothing. */
  selectorOf: (parent: KubeObject) => LabelSelector | null | undefined;
  /** Where its sync keys go (a queue, in AWS). */
  target: string;
  /** Kinds it reads without owning (MapController inputs), and the parent's selector over them (empty: all). */
  inputs?: { kinds: ReadonlyArray<{ group: string; kind: string }>; selectorOf: (parent: KubeObject) => LabelSelector | null | undefined };
  /**
   * Kinds its parents may ask for as related objects (a customize hook's answer), and whether a parent asks for
   * an object, from what the parent records (docs/controllers/compositecontroller.md#related-objects).
   */
  related?: {
    kinds: ReadonlyArray<{ group: string; kind: string }>;
    asks: (parent: KubeObject, object: Extract<RouteStep, { by: 'related' }>) => boolean;
  };
  /** Whether a change to the parent itself needs a sync (default: every change does). */
  ownChangeSyncs?: (parent: KubeObject) => boolean;
  /** The child kinds whose events reach it by ControllerRef or selector (absent: every kind). */
  owns?: ReadonlyArray<{ group: string; kind: string }>;
  /**
   * What of a parent's own event its sync request carries (SyncRequest.observed), for a handler that may
   * answer from it without reading the parent; absent: nothing.
   */
  observe?: (parent: KubeObject) => KubeObject;
  /**
   * Whether a parent's modification, from its old object to its new one, is one its handler acts on (history:
   * the target state differs), so the handler may go straight to its work instead of first asking its record
   * whether there is any (SyncRequest.targetChanged). A hint: the handler decides as it would without it.
   */
  targetChanged?: (object: KubeObject, oldObject: KubeObject) => boolean;
  /**
   * Its handler reads the parent by name and drops a request whose uid is not the parent's: a child's event is
   * keyed by its ControllerRef as it stands, with no read of the parent here (an informer's cache makes that
   * check free upstream; here it would be a request per child event).
   */
  checksRefUid?: boolean;
  /**
   * Its selector is a function of the parent's name alone (history's parent labels): a child that names a parent
   * of the kind by a plain owner reference, and whose labels that parent's selector matches, reaches that parent
   * with no list of the kind (the only parent the labels can name). Only with checksRefUid: the handler, not a
   * read here, drops a reference whose uid is not the parent's.
   */
  selectsByName?: boolean;
  /**
   * Who its parents are read as, when not the router itself: the definition's ServiceAccount
   * (docs/operations/security.md#serviceaccounts-a-definition-names), whose grants, not Outrigger's, reach the kind.
   */
  reader?: (kube: KubeClient) => KubeClient;
  /** The definition it stands for (`CompositeController/<name>`), named when its parents may not be read. */
  definition?: string;
}

/** A kind whose parents were refused to the router (403): its keys for the batch's events are left out. */
export interface Refusal {
  kind: ControllerKind;
  namespace: string | undefined;
  error: KubeError;
}

/** Whether a child of this group and kind concerns the controller kind. */
export function ownsKind(controller: ControllerKind, group: string, kind: string): boolean {
  return controller.owns === undefined || controller.owns.some((o) => o.group === group && o.kind === kind);
}

export interface RoutedKey {
  key: SyncKey;
  target: string;
  /** The parent as its own event showed it, for a kind that observes (ControllerKind.observe). */
  observed?: KubeObject;
  /** The event changed what the kind's handler acts on (ControllerKind.targetChanged). */
  targetChanged?: true;
}

/** One batch's worth of reads; build a new one per batch so nothing stale outlives it. */
export class BatchResolver {
  private readonly parents = new Map<string, Promise<KubeObject | undefined>>();
  private readonly lists = new Map<string, Promise<KubeObject[]>>();
  readonly stats = { gets: 0, lists: 0, invalidSelectors: 0 };
  /** Each kind and namespace whose parents were refused, once per batch. */
  readonly refused: Refusal[] = [];
  private readonly kube: KubeClient;
  private readonly cluster: string;
  private readonly controllers: readonly ControllerKind[];

  constructor(kube: KubeClient, cluster: string, controllers: readonly ControllerKind[]) {
    this.kube = kube;
    this.cluster = cluster;
    this.controllers = controllers;
  }

  async resolve(step: RouteStep): Promise<RoutedKey[]> {
    if (step.by === 'controllerRef') return this.resolveRef(step);
    if (step.by === 'input') return this.resolveInput(step);
    if (step.by === 'related') return this.resolveRelated(step);
    return this.resolveSelector(step);
  }

  private async resolveRef(step: Extract<RouteStep, { by: 'controllerRef' }>): Promise<RoutedKey[]> {
    const { group } = parseApiVersion(step.ref.apiVersion);
    // Every controller of the parent's kind that owns this child's kind: one parent, one read, a key for each.
    const kinds = this.controllers.filter(
      (c) => c.kind === step.ref.kind && c.resource.group === group && ownsKind(c, step.group, step.kind),
    );
    const first = kinds[0];
    if (!first) return []; // owned by a controller Outrigger does not run: not ours to sync
    const namespace = first.namespaced ? step.namespace : undefined;
    if (kinds.every((k) => k.checksRefUid)) {
      const key = (kind: ControllerKind): SyncKey => ({
        cluster: this.cluster,
        group,
        kind: kind.kind,
        namespace,
        name: step.ref.name,
        uid: step.ref.uid,
      });
      return kinds.map((kind) => ({ key: key(kind), target: kind.target }));
    }
    const id = `${group}/${first.kind}/${namespace ?? ''}/${step.ref.name}`;
    let parent = this.parents.get(id);
    if (!parent) {
      this.stats.gets += 1;
      parent = this.refusable(
        first,
        namespace,
        (first.reader?.(this.kube) ?? this.kube).find(first.resource, { name: step.ref.name, namespace }),
        undefined,
      );
      this.parents.set(id, parent);
    }
    const found = await parent;
    if (!found || found.metadata.uid !== step.ref.uid) return [];
    return kinds.map((kind) => ({ key: this.keyOf(kind, found), target: kind.target }));
  }

  private async resolveSelector(step: Extract<RouteStep, { by: 'selector' }>): Promise<RoutedKey[]> {
    const out: RoutedKey[] = [];
    for (const kind of this.controllers) {
      if (kind.namespaced && !step.namespace) continue; // a namespaced parent never owns a cluster-scoped child
      if (!ownsKind(kind, step.group, step.kind)) continue;
      const named = this.namedOwner(kind, step);
      if (named) out.push(named);
      else out.push(...(await this.matchingParents(kind, step.namespace, kind.selectorOf, step.labels)));
    }
    return out;
  }

  /** The parent a plain owner reference names, when the kind selects by name and its selector matches (ControllerKind.selectsByName). */
  private namedOwner(kind: ControllerKind, step: Extract<RouteStep, { by: 'selector' }>): RoutedKey | undefined {
    if (!kind.selectsByName || !kind.checksRefUid) return undefined;
    for (const ref of step.owners ?? []) {
      if (ref.kind !== kind.kind || parseApiVersion(ref.apiVersion).group !== kind.resource.group) continue;
      const parent: KubeObject = {
        apiVersion: ref.apiVersion,
        kind: ref.kind,
        metadata: { name: ref.name, uid: ref.uid, ...(kind.namespaced && step.namespace ? { namespace: step.namespace } : {}) },
      };
      let selector;
      try {
        selector = compileSelector(kind.selectorOf(parent));
      } catch (err) {
        if (!(err instanceof SelectorError)) throw err;
        continue;
      }
      if (matches(selector, step.labels)) return { key: this.keyOf(kind, parent), target: kind.target };
    }
    return undefined;
  }

  private async resolveInput(step: Extract<RouteStep, { by: 'input' }>): Promise<RoutedKey[]> {
    const out: RoutedKey[] = [];
    for (const kind of this.controllers) {
      if (!kind.inputs?.kinds.some((k) => k.group === step.group && k.kind === step.kind)) continue;
      // A cluster-scoped input may be read by parents in any namespace.
      out.push(...(await this.matchingParents(kind, step.namespace, (p) => kind.inputs!.selectorOf(p) ?? {}, step.labels)));
    }
    return out;
  }

  /**
   * A related object reaches the parents whose recorded customize answer asks for it: the same one list of parents
   * per kind and namespace per batch as inputs, matched locally (a namespaced parent relates objects of its own
   * namespace, or cluster-scoped ones: then parents of every namespace are candidates).
   */
  private async resolveRelated(step: Extract<RouteStep, { by: 'related' }>): Promise<RoutedKey[]> {
    const out: RoutedKey[] = [];
    for (const kind of this.controllers) {
      if (!kind.related?.kinds.some((k) => k.group === step.group && k.kind === step.kind)) continue;
      for (const parent of await this.parentsOf(kind, step.namespace))
        if (kind.related.asks(parent, step)) out.push({ key: this.keyOf(kind, parent), target: kind.target });
    }
    return out;
  }

  private parentsOf(kind: ControllerKind, objectNamespace: string | undefined): Promise<KubeObject[]> {
    const namespace = kind.namespaced ? objectNamespace : undefined;
    const id = `${kind.resource.group}/${kind.kind}/${namespace ?? ''}`;
    let list = this.lists.get(id);
    if (!list) {
      this.stats.lists += 1;
      list = this.refusable(kind, namespace, (kind.reader?.(this.kube) ?? this.kube).listAll(kind.resource, { namespace }), []);
      this.lists.set(id, list);
    }
    return list;
  }

  private async matchingParents(
    kind: ControllerKind,
    objectNamespace: string | undefined,
    selectorOf: ControllerKind['selectorOf'],
    labels: Readonly<Record<string, string>>,
  ): Promise<RoutedKey[]> {
    const out: RoutedKey[] = [];
    for (const parent of await this.parentsOf(kind, objectNamespace)) {
      let selector;
      try {
        selector = compileSelector(selectorOf(parent));
      } catch (err) {
        // A parent with an invalid selector selects nothing; its own sync reports the problem.
        if (!(err instanceof SelectorError)) throw err;
        this.stats.invalidSelectors += 1;
        continue;
      }
      if (matches(selector, labels)) out.push({ key: this.keyOf(kind, parent), target: kind.target });
    }
    return out;
  }

  /**
   * A read refused (403) is that kind's configuration, the same on every retry: its parents count as none, and the
   * refusal is kept for the router to report; the event still routes to every other kind. Any other error fails
   * the event, to be retried.
   */
  private refusable<T>(kind: ControllerKind, namespace: string | undefined, read: Promise<T>, none: T): Promise<T> {
    return read.catch((err: unknown) => {
      if (!isKubeError(err, 'Forbidden')) throw err;
      this.refused.push({ kind, namespace, error: err });
      return none;
    });
  }

  private keyOf(kind: ControllerKind, parent: KubeObject): SyncKey {
    return {
      cluster: this.cluster,
      group: kind.resource.group,
      kind: kind.kind,
      namespace: parent.metadata.namespace,
      name: parent.metadata.name ?? '',
      uid: parent.metadata.uid ?? '',
    };
  }
}
