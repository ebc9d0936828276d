// The router: watch events in, sync keys out (controller-runtime's event handler between source and queue).
// Per batch: each envelope is routed by the routing rules (docs/controllers/ownership-and-routing.md#the-router) to every controller of the parent's kind that owns the
// child's kind (and a parent's own events sync that parent in each controller of its kind), resolved with one
// BatchResolver per cluster (at most one list per candidate kind and namespace), keys are deduplicated per
// target and sent once; a kind whose parents Outrigger may not read loses only its own keys. FIFO order is
// kept: after a record fails, the later records of its message group fail too, and all are redelivered together.
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { Clusters } from '../../shared/clusters.ts';
import { EnvelopeError, parseEnvelope, watchEventType, type Envelope } from '../../shared/envelope/index.ts';
import { parseApiVersion, type KubeObject } from '../../shared/kube/index.ts';
import { parseOrDeadLetter } from '../../shared/lambda/batch.ts';
import type { Log } from '../../shared/log.ts';
import type { DeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { makeSyncRequest, syncCause } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import {
  BatchResolver,
  inputSteps,
  relatedSteps,
  routeEvent,
  syncKeyString,
  type ControllerKind,
  type RoutedKey,
  type SyncKey,
} from '../../shared/ownership/index.ts';
import type { ControllerSource } from '../controllers.ts';
import { verifyEnvelope } from '../../shared/envelope/signature.ts';

export interface RouterDeps {
  clusters: Clusters;
  /**
   * The cluster whose events queue a record came from (its eventSourceARN), undefined for any other queue. That
   * cluster, not the envelope's `cluster`, is who speaks: an envelope naming another is dead-lettered.
   */
  queueCluster: (sourceQueueArn: string) => string | undefined;
  sources: readonly ControllerSource[];
  sink: SyncSink;
  deadLetter: () => DeadLetterSink;
  log?: Log;
  /**
   * When each cluster's definitions were last read again for an event of a kind none named, kept by the process
   * across batches: at most once per RELOAD_INTERVAL_MS, so that events of a made-up kind cannot make every batch
   * read every definition (for each MapController, a discovery read and access reviews). Without it, once per batch.
   */
  reloads?: Map<string, number>;
  now?: () => number;
  /**
   * The forwarder keys of a cluster (one, two during a rotation of the deployment's secret), to verify the
   * signature of its forwarder's envelopes; none when the deployment has no secret. A parent's object from an
   * envelope that verifies goes to its handler as the parent's state (SyncRequest.observedSigned), any other as a
   * trigger only (docs/operations/security.md#events-are-triggers-not-state).
   */
  forwarderKeys?: (cluster: string) => Promise<readonly string[]>;
}

/** As often as the definition caches refresh on their own. */
export const RELOAD_INTERVAL_MS = 5_000;

export interface RouteStats {
  records: number;
  deadLettered: number;
  failed: number;
  keys: number;
  gets: number;
  lists: number;
  /** Reads of a definition's parents refused (403), per kind and namespace: that definition's events went unrouted. */
  refused: number;
}

/** The keys one envelope leads to. */
export async function routeEnvelope(envelope: Envelope, resolver: BatchResolver, kinds: readonly ControllerKind[]): Promise<RoutedKey[]> {
  const object = envelope.data.object;
  const { group } = parseApiVersion(object.apiVersion ?? '');
  const steps = routeEvent(watchEventType(envelope), object, envelope.data.oldObject);
  if (kinds.some((k) => k.inputs?.kinds.some((i) => i.group === group && i.kind === object.kind)))
    steps.push(...inputSteps(object, envelope.data.oldObject));
  if (kinds.some((k) => k.related?.kinds.some((i) => i.group === group && i.kind === object.kind)))
    steps.push(...relatedSteps(object, envelope.data.oldObject));
  const routed = (await Promise.all(steps.map((s) => resolver.resolve(s)))).flat();
  // A parent's own change syncs that parent in every controller of its kind (unless a kind says this change
  // needs none).
  for (const self of kinds) {
    if (self.kind !== object.kind || self.resource.group !== group || !(self.ownChangeSyncs?.(object) ?? true)) continue;
    const key: SyncKey = {
      cluster: envelope.cluster,
      group,
      kind: self.kind,
      namespace: object.metadata.namespace,
      name: object.metadata.name ?? '',
      uid: object.metadata.uid ?? '',
    };
    // A deletion's object is no state to decide on: the handler finds the parent gone.
    const observed = self.observe && watchEventType(envelope) !== 'deleted' ? self.observe(object) : undefined;
    const old = envelope.data.oldObject;
    const targetChanged = observed && old && self.targetChanged?.(object, old) ? ({ targetChanged: true } as const) : {};
    routed.push({ key, target: self.target, ...(observed ? { observed } : {}), ...targetChanged });
  }
  return routed;
}

/** The envelope in a record of `cluster`'s events queue; one that speaks for another cluster is malformed. */
function envelopeFrom(cluster: string, body: string): Envelope {
  const envelope = parseEnvelope(body);
  if (envelope.cluster !== cluster)
    throw new EnvelopeError(
      'cluster',
      `is ${JSON.stringify(envelope.cluster)}, but the envelope came from the events queue of cluster ${JSON.stringify(cluster)}, which speaks only for that cluster`,
    );
  return envelope;
}

/**
 * Whether any controller kind hears of the envelope's object: as a parent, a child it owns or an input.
 * ControllerRevisions are watched whatever the definitions (their first events follow their policy's).
 */
export function heardOf(kinds: readonly ControllerKind[], envelope: Envelope): boolean {
  const { group } = parseApiVersion(envelope.data.object.apiVersion ?? '');
  const kind = envelope.data.object.kind;
  if (group === 'apps' && kind === 'ControllerRevision') return true;
  const is = (k: { group: string; kind: string }) => k.group === group && k.kind === kind;
  return kinds.some(
    (k) =>
      is({ group: k.resource.group, kind: k.kind }) ||
      (k.owns ?? []).some(is) ||
      (k.inputs?.kinds ?? []).some(is) ||
      (k.related?.kinds ?? []).some(is),
  );
}

export async function routeBatch(event: SQSEvent, deps: RouterDeps): Promise<SQSBatchResponse & { stats: RouteStats }> {
  const stats: RouteStats = { records: event.Records.length, deadLettered: 0, failed: 0, keys: 0, gets: 0, lists: 0, refused: 0 };
  const failures: string[] = [];
  const failedGroups = new Set<string>();
  const handled: string[] = [];
  const resolvers: Resolvers = new Map();
  const outbox: Outbox = new Map();

  for (const record of event.Records) {
    const group = record.attributes.MessageGroupId ?? record.messageId;
    if (failedGroups.has(group)) {
      failures.push(record.messageId);
      continue;
    }
    const cluster = deps.queueCluster(record.eventSourceARN);
    if (cluster === undefined) {
      deps.log?.('error', "a record from a queue that is no cluster's events queue; it will be retried", {
        messageId: record.messageId,
        queue: record.eventSourceARN,
      });
      failures.push(record.messageId);
      failedGroups.add(group);
      continue;
    }
    let id: string | undefined;
    try {
      // Within the record's try: a dead letter SQS does not take fails this record (and its group), not the batch.
      const envelope = await parseOrDeadLetter(record, (body) => envelopeFrom(cluster, body), {
        deadLetter: deps.deadLetter,
        source: 'router',
        ...(deps.log ? { log: deps.log } : {}),
      });
      if (!envelope) {
        stats.deadLettered += 1;
        continue;
      }
      id = envelope.id;
      // The cluster's controller kinds, read again (at most once per interval) for a kind none names.
      const entry = await resolverFor(deps, resolvers, envelope);
      // Whether the cluster's forwarder signed it: then its object may stand for the parent's state.
      const signed = await forwarderSigned(deps, cluster, envelope);
      // Each sync key the event routes to, its cause added to the key's pending request.
      addToOutbox(outbox, envelope, await routeEnvelope(envelope, entry.resolver, entry.kinds), signed);
      handled.push(record.messageId);
    } catch (err) {
      deps.log?.('error', 'routing failed; the event will be retried', { messageId: record.messageId, id, error: String(err) });
      failures.push(record.messageId);
      failedGroups.add(group);
    }
  }

  try {
    await sendOutbox(deps, outbox, stats);
  } catch (err) {
    // Nothing is lost: every routed record is redelivered and routed again (sync requests are idempotent).
    deps.log?.('error', 'sending sync requests failed; the batch will be retried', { error: String(err) });
    failures.push(...handled);
  }
  for (const [cluster, { resolver }] of resolvers) {
    stats.gets += resolver.stats.gets;
    stats.lists += resolver.stats.lists;
    stats.refused += resolver.refused.length;
    // One definition's missing grant is its own problem, reported under its name; the events routed on to every
    // other definition (docs/controllers/ownership-and-routing.md#one-definition-cannot-stop-anothers-routing).
    for (const { kind, namespace, error } of resolver.refused)
      deps.log?.('error', "Outrigger may not read a definition's parents: the batch's events were not routed to them", {
        cluster,
        definition: kind.definition,
        kind: kind.resource.group ? `${kind.kind}.${kind.resource.group}` : kind.kind,
        namespace,
        error: String(error),
      });
  }
  stats.failed = failures.length;
  return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })), stats };
}

type Resolvers = Map<string, { resolver: BatchResolver; kinds: ControllerKind[]; fresh: boolean }>;
type Outbox = Map<
  string,
  Map<string, { key: SyncKey; causes: string[]; observed?: KubeObject | undefined; targetChanged?: true; signed?: boolean }>
>;

/**
 * Verification decides, never a field of the envelope: with the key of the queue's cluster. Without the key (the
 * secret unreadable for now), the envelope is a trigger: correct, a read dearer.
 */
async function forwarderSigned(deps: RouterDeps, cluster: string, envelope: Envelope): Promise<boolean> {
  if (envelope.outriggersignature === undefined || deps.forwarderKeys === undefined) return false;
  return deps.forwarderKeys(cluster).then(
    (keys) => verifyEnvelope(keys, cluster, envelope),
    (err: unknown) => {
      deps.log?.('warn', "the forwarder key could not be derived; the event's object is a trigger only", { error: String(err) });
      return false;
    },
  );
}

/**
 * The resolver and controller kinds of the envelope's cluster, loaded once per batch. Throws when no kind hears
 * of the envelope's object and a source can say why (a policy's kind not served yet): the event is retried.
 */
async function resolverFor(deps: RouterDeps, resolvers: Resolvers, envelope: Envelope) {
  const load = async (fresh: boolean) => {
    const kube = deps.clusters.client(envelope.cluster);
    if (fresh) for (const s of deps.sources) s.forget?.(envelope.cluster);
    const config = deps.clusters.config(envelope.cluster);
    const kinds = (await Promise.all(deps.sources.map((s) => s.kinds(config, kube)))).flat();
    const loaded = { resolver: new BatchResolver(kube, envelope.cluster, kinds), kinds, fresh };
    resolvers.set(envelope.cluster, loaded);
    return loaded;
  };
  let entry = resolvers.get(envelope.cluster) ?? (await load(false));
  // An event of a kind no cached definition names: the forwarder may have started its watch on a policy
  // this process has not read yet. The definitions are read again, once per batch and at most once per
  // interval, rather than drop it; within the interval it is retried (after its backoff), not dropped.
  if (!entry.fresh && !heardOf(entry.kinds, envelope)) {
    const now = deps.now?.() ?? Date.now();
    const last = deps.reloads?.get(envelope.cluster);
    if (last !== undefined && now - last < RELOAD_INTERVAL_MS)
      throw new Error(
        `no definition names ${envelope.data.object.kind ?? ''}, and the definitions were read again ${now - last} ms ago; retried rather than dropped`,
      );
    deps.reloads?.set(envelope.cluster, now);
    entry = await load(true);
  }
  if (!heardOf(entry.kinds, envelope)) {
    const { group: objectGroup } = parseApiVersion(envelope.data.object.apiVersion ?? '');
    const kube = deps.clusters.client(envelope.cluster);
    for (const s of deps.sources) {
      const why = await s.unresolved?.(deps.clusters.config(envelope.cluster), kube, objectGroup, envelope.data.object.kind ?? '');
      if (why) throw why;
    }
  }
  return entry;
}

/** Adds the envelope's cause to the pending request of each key it routes to (one request per key and target). */
function addToOutbox(outbox: Outbox, envelope: Envelope, routed: readonly RoutedKey[], signed: boolean): void {
  for (const { key, target, observed, targetChanged } of routed) {
    let byKey = outbox.get(target);
    if (!byKey) outbox.set(target, (byKey = new Map()));
    const id = syncKeyString(key);
    const cause = syncCause(envelope);
    const pending = byKey.get(id);
    if (pending) {
      pending.causes.push(cause);
      // A parent's events come in order within its message group: the later object is the newer state.
      if (observed) {
        pending.observed = observed;
        pending.signed = signed;
      }
      if (targetChanged) pending.targetChanged = true;
    } else byKey.set(id, { key, causes: [cause], observed, signed, ...(targetChanged ? { targetChanged } : {}) });
  }
}

/** Sends each target its sync requests, counting their keys as it goes. */
async function sendOutbox(deps: RouterDeps, outbox: Outbox, stats: RouteStats): Promise<void> {
  for (const [target, byKey] of outbox) {
    const requests = [...byKey.values()].map((p) => makeSyncRequest(p.key, p.causes, p.observed, p.targetChanged, p.signed));
    stats.keys += requests.length;
    await deps.sink.send(target, requests);
  }
}
