// What an incoming CloudEvent means: our own envelope (checked as the router would check it) or a Knative
// ApiServerSource event (made into our envelope). Everything else is refused, naming what was wrong.
import {
  EVENT_TYPE_PREFIX,
  EnvelopeError,
  MAX_ENVELOPE_BYTES,
  envelopeId,
  makeEnvelope,
  parseEnvelope,
  watchEventType,
  type Envelope,
  type WatchEventType,
} from '../envelope/index.ts';
import type { KubeObject } from '../kube/index.ts';
import { IngestError, type IncomingEvent } from './request.ts';

/** ApiServerSource event types in `mode: Resource` (the data is the object) and what they are in ours. */
export const KNATIVE_RESOURCE_TYPES: Record<string, WatchEventType> = {
  'dev.knative.apiserver.resource.add': 'added',
  'dev.knative.apiserver.resource.update': 'modified',
  'dev.knative.apiserver.resource.delete': 'deleted',
};
/** In `mode: Reference` the data is only a reference (kind, namespace, name): nothing a controller can act on. */
const KNATIVE_REFERENCE_PREFIX = 'dev.knative.apiserver.ref.';

export const ACCEPTED_TYPES = [
  ...['added', 'modified', 'deleted'].map((t) => `${EVENT_TYPE_PREFIX}${t}`),
  ...Object.keys(KNATIVE_RESOURCE_TYPES),
];

export interface ConvertContext {
  /** The clusters this deployment serves. */
  clusters: ReadonlySet<string>;
  /** `?cluster=`: the cluster a Knative event comes from (its events do not say); our envelopes must agree with it. */
  cluster: string | undefined;
  /** When an event without a time was seen. */
  now: Date;
  /** Who signed the request, and the clusters it may speak for (the cluster configuration's ingestPrincipals). */
  caller: string | undefined;
  allowed: ReadonlySet<string>;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function knownCluster(ctx: Pick<ConvertContext, 'clusters' | 'caller' | 'allowed'>, cluster: string, field: string): void {
  if (!ctx.clusters.has(cluster))
    throw new IngestError(
      field,
      `${JSON.stringify(cluster)} is not a cluster this deployment serves (${[...ctx.clusters].join(', ') || 'none'})`,
      422,
    );
  if (!ctx.allowed.has(cluster)) {
    const may = ctx.allowed.size > 0 ? `it may for ${[...ctx.allowed].join(', ')}` : 'it may for none';
    throw new IngestError(
      field,
      `is ${JSON.stringify(cluster)}, a cluster whose ingestPrincipals do not name the caller ${ctx.caller ?? '(none)'} (${may})`,
      403,
    );
  }
}

function requiredString(value: Record<string, unknown>, name: string, at: string): string {
  const v = value[name];
  if (typeof v !== 'string' || v.length === 0)
    throw new IngestError(`${at}${name}`, 'is required (a CloudEvent attribute; in binary mode the ce-' + name + ' header)');
  return v;
}

/** Re-reads an envelope error in the request's terms: `data.object.x` of our envelope is `data.x` of Knative's event. */
function rename(err: unknown, at: string, knative: boolean): never {
  if (!(err instanceof EnvelopeError)) throw err;
  const field = knative ? err.field.replace(/^data\.object(\.|$)/, 'data$1') : err.field;
  throw new IngestError(`${at}${field}`, err.message.slice(`invalid event envelope: ${err.field}: `.length));
}

function fromKnative(value: Record<string, unknown>, type: WatchEventType, at: string, ctx: ConvertContext): Envelope {
  if (value.specversion !== '1.0')
    throw new IngestError(`${at}specversion`, `is ${JSON.stringify(value.specversion)}; the ingest reads CloudEvents 1.0`);
  requiredString(value, 'id', at);
  const source = requiredString(value, 'source', at);
  if (ctx.cluster === undefined)
    throw new IngestError(
      '?cluster',
      'is required for Knative events, which do not say which cluster they come from (add ?cluster=<id> to the sink URL)',
    );
  knownCluster(ctx, ctx.cluster, '?cluster');
  let time = ctx.now;
  if (value.time !== undefined) {
    time = new Date(String(value.time));
    if (Number.isNaN(time.getTime())) throw new IngestError(`${at}time`, `is ${JSON.stringify(value.time)}, not an RFC 3339 time`);
  }
  const object = value.data;
  if (!isRecord(object) || !isRecord(object.metadata))
    throw new IngestError(`${at}data`, 'is not a Kubernetes object (an object with metadata)');
  try {
    return makeEnvelope({ cluster: ctx.cluster, type, object: object as KubeObject, source, time });
  } catch (err) {
    return rename(err, at, true);
  }
}

function fromEnvelope(value: Record<string, unknown>, at: string, ctx: ConvertContext): Envelope {
  let envelope: Envelope;
  try {
    envelope = parseEnvelope(value);
  } catch (err) {
    return rename(err, at, false);
  }
  if (ctx.cluster !== undefined && envelope.cluster !== ctx.cluster)
    throw new IngestError(`${at}cluster`, `is ${JSON.stringify(envelope.cluster)}, but the request is for ?cluster=${ctx.cluster}`, 422);
  knownCluster(ctx, envelope.cluster, `${at}cluster`);
  // The sender's id is not trusted: its digest is the SQS deduplication id (docs/design/architecture.md#the-event-envelope).
  // Nor its signature: an object is taken for the parent's state only from the cluster's own forwarder on its own
  // queue, never through the ingest URL (docs/operations/security.md#events-are-triggers-not-state).
  const { outriggersignature: _signature, ...unsigned } = envelope;
  return { ...unsigned, id: envelopeId(envelope.cluster, envelope.data.object, watchEventType(envelope)) };
}

/** Our envelope for one incoming event, or IngestError naming the first thing wrong with it. */
export function toEnvelope(event: IncomingEvent, ctx: ConvertContext): Envelope {
  if (event.problem) throw event.problem;
  const { value, at } = event;
  if (!isRecord(value)) throw new IngestError(at ? at.slice(0, -1) : '(body)', 'is not a CloudEvent (a JSON object)');
  const type = requiredString(value, 'type', at);
  let envelope: Envelope;
  if (type.startsWith(EVENT_TYPE_PREFIX)) envelope = fromEnvelope(value, at, ctx);
  else if (Object.hasOwn(KNATIVE_RESOURCE_TYPES, type)) envelope = fromKnative(value, KNATIVE_RESOURCE_TYPES[type]!, at, ctx);
  else if (type.startsWith(KNATIVE_REFERENCE_PREFIX)) {
    throw new IngestError(
      `${at}type`,
      `is ${type}, an ApiServerSource event in mode Reference, which carries no object: set the ApiServerSource's spec.mode to Resource`,
      422,
    );
  } else throw new IngestError(`${at}type`, `is ${type}, not a type the ingest takes (${ACCEPTED_TYPES.join(', ')})`, 422);
  const bytes = Buffer.byteLength(JSON.stringify(envelope), 'utf8');
  if (bytes > MAX_ENVELOPE_BYTES)
    throw new IngestError(
      at ? at.slice(0, -1) : '(body)',
      `makes an envelope of ${bytes} bytes, over the ${MAX_ENVELOPE_BYTES}-byte limit of an SQS message`,
      413,
    );
  return envelope;
}
