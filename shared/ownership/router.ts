// Which controllers must reconcile after a watch event: the routing rules of docs/controllers/ownership-and-routing.md#the-router, as a pure function.
//   object with a ControllerRef      -> its controller only (and, when the ref changed, the previous one too)
//   update that removed the ref      -> the previous controller, and every controller whose selector matches
//   orphan added                     -> every controller whose selector matches
//   orphan deleted                   -> none
//   orphan updated, labels changed   -> every controller whose selector matches (none if labels are unchanged)
// An orphan that is being deleted is not offered to anyone: nobody may adopt it. When the previous state of
// a modified orphan is unknown (a forwarder that does not send it), its labels count as changed: an extra
// sync is harmless to a level-triggered controller, a missing one is not.
// Each step names the child's kind: several controllers may reconcile one parent kind (a RevisionPolicy's and
// a MapController's), and each hears only of the kinds it owns, as an upstream controller hears only the
// informers it registered handlers on.
import type { WatchEventType } from '../envelope/index.ts';
import { parseApiVersion, type KubeObject, type OwnerReference } from '../kube/resource.ts';
import { controllerOf, isBeingDeleted } from './controller-ref.ts';

export type RouteStep =
  | { by: 'controllerRef'; group: string; kind: string; ref: OwnerReference; namespace: string | undefined }
  | {
      by: 'selector';
      group: string;
      kind: string;
      labels: Readonly<Record<string, string>>;
      namespace: string | undefined;
      /** The object's owner references that are not its ControllerRef (absent: none), for kinds that select by name. */
      owners?: readonly OwnerReference[];
    }
  | ({ by: 'input' } & ReadStep)
  | ({ by: 'related' } & ReadStep);

/** An object read, not owned (an input, a related object): where it is and what it is called and labelled. */
interface ReadStep {
  group: string;
  kind: string;
  name: string;
  labels: Readonly<Record<string, string>>;
  namespace: string | undefined;
}

export function routeEvent(type: WatchEventType, object: KubeObject, oldObject?: KubeObject): RouteStep[] {
  const namespace = object.metadata.namespace;
  const { group } = parseApiVersion(object.apiVersion ?? '');
  const kind = object.kind ?? '';
  const current = controllerOf(object);
  const previous = oldObject ? controllerOf(oldObject) : undefined;
  const byRef = (ref: OwnerReference): RouteStep => ({ by: 'controllerRef', group, kind, ref, namespace });
  const owners = (object.metadata.ownerReferences ?? []).filter((r) => r.controller !== true);
  const bySelector: RouteStep = {
    by: 'selector',
    group,
    kind,
    labels: object.metadata.labels ?? {},
    namespace,
    ...(owners.length > 0 ? { owners } : {}),
  };

  if (type === 'deleted') return current ? [byRef(current)] : [];
  if (type === 'added') {
    if (current) return [byRef(current)];
    return isBeingDeleted(object) ? [] : [bySelector];
  }
  // modified
  if (current) return previous && previous.uid !== current.uid ? [byRef(current), byRef(previous)] : [byRef(current)];
  const steps: RouteStep[] = previous ? [byRef(previous)] : [];
  if (isBeingDeleted(object)) return steps;
  if (previous || !oldObject || labelsChanged(oldObject, object)) steps.push(bySelector);
  return steps;
}

/**
 * MapController inputs are read, not owned: any change to an object of an input kind, whoever controls it,
 * reaches the parents whose input selector matches its labels, before and after the change (an input that
 * stops matching must reach the parent too, whose outputs for it are now detached).
 */
export function inputSteps(object: KubeObject, oldObject?: KubeObject): RouteStep[] {
  return readSteps('input', object, oldObject);
}

/**
 * Related objects (a customize hook's answer) are read as inputs are: any change to one, whoever controls it,
 * reaches the parents whose recorded rules ask for it, before and after the change (one that stops matching is
 * gone from their `related`, which they must hear of too).
 */
export function relatedSteps(object: KubeObject, oldObject?: KubeObject): RouteStep[] {
  return readSteps('related', object, oldObject);
}

function readSteps(by: 'input' | 'related', object: KubeObject, oldObject: KubeObject | undefined): RouteStep[] {
  const { group } = parseApiVersion(object.apiVersion ?? '');
  const step = (o: KubeObject): RouteStep => {
    const read: ReadStep = {
      group,
      kind: object.kind ?? '',
      name: object.metadata.name ?? '',
      labels: o.metadata.labels ?? {},
      namespace: object.metadata.namespace,
    };
    return { by, ...read };
  };
  return oldObject && labelsChanged(oldObject, object) ? [step(object), step(oldObject)] : [step(object)];
}

function labelsChanged(a: KubeObject, b: KubeObject): boolean {
  const la = a.metadata.labels ?? {};
  const lb = b.metadata.labels ?? {};
  const ka = Object.keys(la);
  return ka.length !== Object.keys(lb).length || ka.some((k) => la[k] !== lb[k]);
}

/** What a controller handler is asked to reconcile: one parent, by identity. */
export interface SyncKey {
  cluster: string;
  group: string;
  kind: string;
  namespace?: string | undefined;
  name: string;
  uid: string;
}

export function syncKeyString(k: SyncKey): string {
  return `${k.cluster}/${k.group}/${k.kind}/${k.namespace ?? ''}/${k.name}/${k.uid}`;
}

/** Drops repeated keys, keeping first-seen order. */
export function dedupeKeys(keys: Iterable<SyncKey>): SyncKey[] {
  const seen = new Map<string, SyncKey>();
  for (const k of keys) if (!seen.has(syncKeyString(k))) seen.set(syncKeyString(k), k);
  return [...seen.values()];
}
