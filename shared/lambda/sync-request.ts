// The router's output and every controller handler's input: "reconcile this parent". A key, not a state:
// the handler reads the parent and everything else it needs from the cluster (level-triggered).
// A namespace import, so bundles keep only what is used (see shared/envelope/index.ts).
import * as z from 'zod/mini';
import type { Envelope } from '../envelope/index.ts';
import { MalformedMessageError, clusterIdSchema, nonEmpty, parseMessage } from '../validation.ts';
import type { KubeObject } from '../kube/resource.ts';
import type { SyncKey } from '../ownership/router.ts';

export const syncRequestSchema = z.strictObject({
  type: z.literal('dev.outrigger.sync'),
  key: z.strictObject({
    cluster: clusterIdSchema,
    group: z.string(),
    kind: nonEmpty(),
    namespace: z.optional(nonEmpty()),
    name: nonEmpty(),
    uid: nonEmpty(),
  }),
  /** The envelope ids that caused it, for tracing; at most a few. */
  causes: z.array(z.string()).check(z.maxLength(10)),
  /**
   * The parent as its own latest event in the batch showed it, for a controller kind that asks for it
   * (ControllerKind.observe): what the sender says the state at that resourceVersion is, which may answer that
   * there is no work without a read. A trigger, never the truth: whoever can put an envelope on the events queue
   * chooses it, so the handler writes only from what it reads (docs/operations/security.md#events-are-triggers-not-state).
   */
  observed: z.optional(
    z.looseObject({
      metadata: z.looseObject({ uid: nonEmpty(), resourceVersion: nonEmpty(), name: nonEmpty(), namespace: z.optional(nonEmpty()) }),
    }),
  ),
  /**
   * One of the parent's own events in the batch changed what its handler acts on (ControllerKind.targetChanged),
   * so the handler may skip asking its record whether there is work. Only with `observed`.
   */
  targetChanged: z.optional(z.literal(true)),
  /**
   * `observed` came in an envelope whose signature the router verified with the forwarder key of the cluster
   * whose events queue it came from: the parent's state at that resourceVersion, which history may decide on
   * without reading it (docs/operations/security.md#events-are-triggers-not-state). Only with `observed`. Set by
   * the router alone: only Outrigger's functions may send to a sync queue.
   */
  observedSigned: z.optional(z.literal(true)),
  /**
   * The history controller's truncation of this parent, not its sync: both are served from the history queue,
   * so a cluster polls one queue for them (docs/operations/cost.md#idle-polling).
   */
  truncate: z.optional(z.literal(true)),
});

export type SyncRequest = z.infer<typeof syncRequestSchema>;

export class SyncRequestError extends MalformedMessageError {
  constructor(field: string, problem: string) {
    super('sync request', field, problem);
    this.name = 'SyncRequestError';
  }
}

export function makeSyncRequest(
  key: SyncKey,
  causes: string[],
  observed?: KubeObject,
  targetChanged?: true,
  observedSigned?: boolean,
): SyncRequest {
  const request: SyncRequest = {
    type: 'dev.outrigger.sync',
    key: { ...key, namespace: key.namespace || undefined },
    causes: causes.slice(0, 10),
  };
  // Only a snapshot of this very parent that fits comfortably in a message: SQS takes 256 KiB per batch of
  // sends, and the handler reads the parent when there is none.
  if (
    observed &&
    observed.metadata.uid === key.uid &&
    observed.metadata.resourceVersion &&
    Buffer.byteLength(JSON.stringify(observed)) <= MAX_OBSERVED_BYTES
  ) {
    request.observed = observed as SyncRequest['observed'];
    if (targetChanged) request.targetChanged = true;
    if (observedSigned) request.observedSigned = true;
  }
  return request;
}

/** A request to truncate the parent's history beyond its limit (served on the history queue). */
export function truncationRequest(key: SyncKey, causes: string[]): SyncRequest {
  return { ...makeSyncRequest(key, causes), truncate: true };
}

/** The largest snapshot a sync request carries, in bytes of JSON. */
export const MAX_OBSERVED_BYTES = 16 * 1024;

/** The observed parent of a request, as a KubeObject. */
export function observedParent(request: Pick<SyncRequest, 'observed'>): KubeObject | undefined {
  return request.observed as KubeObject | undefined;
}

/**
 * What the router names as the cause of a sync: `<kind>/<envelope id>`, an envelope id being
 * `<cluster>/<uid>/<resourceVersion>/<event type>` (makeEnvelope). Handlers tell a parent's own change from a
 * child's by it (parseSyncCause).
 */
export function syncCause(envelope: Pick<Envelope, 'id' | 'data'>): string {
  return `${envelope.data.object.kind ?? ''}/${envelope.id}`;
}

/** The parts of a cause syncCause made; a cause of another form (a resync's) gives parts that match no object. */
export function parseSyncCause(cause: string): {
  kind: string | undefined;
  uid: string | undefined;
  resourceVersion: string | undefined;
  type: string | undefined;
} {
  const [kind, , uid, resourceVersion, type] = cause.split('/');
  return { kind, uid, resourceVersion, type };
}

export function parseSyncRequest(body: string): SyncRequest {
  return parseMessage(body, syncRequestSchema, (field, problem) => new SyncRequestError(field, problem), '(message)');
}

/** FIFO group: one parent's syncs are never processed concurrently. */
export function syncGroupId(key: SyncKey): string {
  return `${key.cluster}/${key.uid}`;
}
