// What the router knows of one controller (docs/controllers/ownership-and-routing.md#the-router): a module of its own that the
// controllers' sources and the list of them both import, so neither imports the other. A source is told the
// cluster it answers for (its configuration and a client), and reads no process-wide environment: the forwarder
// and the router ask it the same question with what each has.
import type { ClusterConfig } from '../shared/clusters.ts';
import { gvrString, isKubeError, type GVR, type KubeApi, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import { setCondition, type Condition } from '../shared/metacontroller/conditions.ts';
import type { ControllerKind } from '../shared/ownership/index.ts';

export interface ControllerSource {
  target: string;
  /** The parent kinds, for one cluster. Called per batch; cache in the source where reading is costly. */
  kinds: (cluster: ClusterConfig, kube: KubeClient) => Promise<ControllerKind[]>;
  /** Resources whose events matter: the parents and the children they own or select (may change with policies). */
  watches: (cluster: ClusterConfig, kube: KubeClient) => Promise<GVR[]>;
  /**
   * Of `watches`, the children whose status-only changes must reach their parent too (a CompositeController's,
   * whose hook reads their status); any other child watched as metadata only is heard of when its metadata moves.
   */
  statusChanges?: (cluster: ClusterConfig, kube: KubeClient) => Promise<GVR[]>;
  /**
   * Of its parent kinds, those whose status its handler reads at these paths only (a history parent's current
   * and update revision). A parent kind it does not name here has its whole status read: every change is sent.
   */
  statusReads?: (cluster: ClusterConfig, kube: KubeClient) => Promise<StatusRead[]>;
  /** Drops what the source caches for the cluster (by id), so the next call reads the definitions again. */
  forget?: (cluster: string) => void;
  /** Why an object of this kind cannot be routed now (its definition's kinds could not be resolved): it is retried. */
  unresolved?: (cluster: ClusterConfig, kube: KubeClient, group: string, kind: string) => Promise<Error | undefined>;
}

/** Status fields read of one parent kind, as ControllerSource.statusReads names them. */
export interface StatusRead {
  resource: GVR;
  paths: readonly string[];
}

/**
 * Status reads of parent kinds merged into one per kind: all the paths any entry names, or nothing for a kind some
 * entry reads whole (then every change of it is sent: forwarder/metadata.ts#unreadStatusChange).
 */
export function mergeStatusReads(entries: Iterable<{ resource: GVR; paths: readonly string[] | 'whole' }>): StatusRead[] {
  const byKind = new Map<string, { resource: GVR; paths: Set<string> } | 'whole'>();
  for (const { resource, paths } of entries) {
    const id = gvrString(resource);
    const known = byKind.get(id);
    if (known === 'whole') continue;
    byKind.set(id, paths === 'whole' ? 'whole' : { resource, paths: new Set([...(known?.paths ?? []), ...paths]) });
  }
  return [...byKind.values()].flatMap((e) => (e === 'whole' ? [] : [{ resource: e.resource, paths: [...e.paths].sort() }]));
}

/**
 * The definitions of one kind (MapControllers; CompositeControllers and DecoratorControllers as they land) that this
 * deployment serves in a cluster: those the cluster's `controllerSelector` matches, or every one without it
 * (docs/reference/configuration.md#clustersjson). The apiserver filters, so a definition left to another engine
 * (Metacontroller) is never read: no sync, no status, no Event.
 */
export function listServedDefinitions(kube: KubeApi, resource: GVR, controllerSelector: string | undefined): Promise<KubeObject[]> {
  return kube.listAll(resource, controllerSelector ? { labelSelector: controllerSelector } : {});
}

/** An object's spec moved since its status was written, or it is being deleted: its own status writes queue nothing. */
export function specChanged(o: KubeObject): boolean {
  const observed = (o.status as { observedGeneration?: number } | undefined)?.observedGeneration;
  return o.metadata.generation !== observed || Boolean(o.metadata.deletionTimestamp);
}

/**
 * Writes a definition's Ready condition where it changed (status subresource, merge patch): True when it runs,
 * otherwise False with the reason it does not. As Outrigger itself: the definition is Outrigger's object.
 */
export async function writeDefinitionReady(
  kube: KubeApi,
  resource: GVR,
  o: KubeObject,
  problem: { reason: string; error: string } | undefined,
  now: Date,
): Promise<void> {
  const ready: Omit<Condition, 'lastTransitionTime'> = problem
    ? { type: 'Ready', status: 'False', reason: problem.reason, message: problem.error }
    : { type: 'Ready', status: 'True', reason: 'Ready', message: 'the controller runs as its ServiceAccount' };
  const status = o.status as { observedGeneration?: number; conditions?: Condition[] } | undefined;
  const before = status?.conditions?.find((c) => c.type === 'Ready');
  if (
    status?.observedGeneration === o.metadata.generation &&
    before?.status === ready.status &&
    before.reason === ready.reason &&
    before.message === ready.message
  )
    return;
  const conditions = setCondition(status?.conditions, ready, now);
  await kube
    .patch(
      resource,
      { name: o.metadata.name ?? '', subresource: 'status' },
      { metadata: { resourceVersion: o.metadata.resourceVersion }, status: { observedGeneration: o.metadata.generation, conditions } },
      'merge',
    )
    .catch((err: unknown) => {
      // A newer definition came in since the list: its own change writes its status.
      if (!isKubeError(err, 'Conflict') && !isKubeError(err, 'NotFound')) throw err;
    });
}
