// The event envelope: a CloudEvents 1.0 structured-mode JSON document carrying one watch event. It is the
// contract between forwarders (ours, Knative's via the ingest function, the local runtime) and the handlers.
// Validation is strict about what handlers rely on and names the first bad field; a bad envelope is never
// half-processed, it is rejected whole (to the dead-letter queue, with this error as its reason).
import { createHash } from 'node:crypto';
// A namespace import, so the bundler keeps only the parts of zod/mini used here; `import { z }` is one object
// holding the whole API, and bundles all of it (hundreds of KiB). The same goes for every module using zod.
import * as z from 'zod/mini';
import type { KubeObject } from '../kube/resource.ts';
import { MAX_MESSAGE_BYTES, MAX_MESSAGE_DEPTH, MalformedMessageError, clusterIdSchema, parseMessage } from '../validation.ts';

// An envelope is one SQS message: these are its bounds.
export { MAX_MESSAGE_BYTES as MAX_ENVELOPE_BYTES, MAX_MESSAGE_DEPTH as MAX_ENVELOPE_DEPTH };

/** The CloudEvents extension attribute that carries the forwarder's signature: `v1=<hex>`. */
export const SIGNATURE_ATTRIBUTE = 'outriggersignature';
/** What a signature attribute looks like; an envelope with anything else there is refused. */
export const SIGNATURE_PATTERN = /^v1=[0-9a-f]{64}$/;

export const EVENT_TYPE_PREFIX = 'dev.outrigger.watch.';
export const WATCH_EVENT_TYPES = ['added', 'modified', 'deleted'] as const;
export type WatchEventType = (typeof WATCH_EVENT_TYPES)[number];

// What a hostile sender controls is bounded to what Kubernetes itself allows (docs/operations/security.md): these
// fields end up in state keys, message groups, deduplication ids and sync requests, which SQS and DynamoDB
// refuse beyond their own lengths and alphabets, and a refusal there must never cost the valid records beside it.
// https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/**
 * An object's name as the apiserver accepts it for every kind: most kinds hold names to DNS-1123 subdomains, some
 * only to path segments (RBAC's `system:controller:...`), which may not be `.` or `..` nor hold `/` or `%`
 * (https://github.com/kubernetes/apimachinery/blob/master/pkg/api/validation/path/name.go). Held here besides to
 * printable ASCII without spaces, at most 253: a name travels in subjects, keys and sync requests.
 */
const OBJECT_NAME = /^(?!\.{1,2}$)[!-$&-.0-~]{1,253}$/;
/** RFC 4122's textual form: what the apiserver assigns every object as metadata.uid. */
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** Printable ASCII without spaces: ids and URI references. */
const printable = (max: number) => z.string().check(z.regex(/^[!-~]+$/, 'must be printable ASCII without spaces'), z.maxLength(max));

const dnsLabel = () => z.string().check(z.regex(DNS_LABEL, 'must be a DNS-1123 label: lower-case letters, digits and -, at most 63'));
const objectName = () =>
  z.string().check(z.regex(OBJECT_NAME, 'must be an object name: printable ASCII without spaces, / or %, not . or .., at most 253'));
const uuid = () => z.string().check(z.regex(UUID, 'must be an RFC 4122 UUID, as the apiserver assigns'));

const objectSchema = z.looseObject({
  apiVersion: z
    .string()
    .check(
      z.regex(
        /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/,
        'must be <group>/<version> or <version>, DNS names',
      ),
      z.maxLength(317),
    ),
  kind: z.string().check(z.regex(/^[A-Za-z][A-Za-z0-9]{0,62}$/, 'must be a kind: letters and digits, at most 63')),
  metadata: z.looseObject({
    name: objectName(),
    namespace: z.optional(dnsLabel()),
    uid: uuid(),
    // Opaque to clients, but an etcd revision in practice; it is part of the envelope id.
    resourceVersion: z.string().check(z.regex(/^[A-Za-z0-9._:-]{1,64}$/, 'must be at most 64 letters, digits, ., _, : or -')),
    ownerReferences: z.optional(z.array(z.looseObject({ uid: uuid(), controller: z.optional(z.boolean()) }))),
  }),
});

export const envelopeSchema = z.looseObject({
  specversion: z.literal('1.0'),
  id: printable(256),
  /** A URI reference, as CloudEvents has it. */
  source: printable(1024),
  type: z.enum(WATCH_EVENT_TYPES.map((t) => `${EVENT_TYPE_PREFIX}${t}`) as [string, ...string[]]),
  time: z.optional(z.iso.datetime({ offset: true })),
  datacontenttype: z.optional(z.literal('application/json')),
  /** CloudEvents extension attribute: the cluster the object lives in. */
  cluster: clusterIdSchema,
  /** CloudEvents extension attribute: the forwarder's signature (shared/envelope/signature.ts), when it has a key. */
  [SIGNATURE_ATTRIBUTE]: z.optional(z.string().check(z.regex(SIGNATURE_PATTERN, 'must be v1= and 64 hex digits'))),
  data: z.strictObject({
    object: objectSchema,
    /** The object as the forwarder last saw it, on a modification, when it has it. */
    oldObject: z.optional(objectSchema),
  }),
  // After data: it is made of the object's kind and name, and a bad name is named as itself, not as the subject.
  subject: z.optional(printable(1024)),
});

export interface Envelope {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  time?: string | undefined;
  subject?: string | undefined;
  datacontenttype?: 'application/json' | undefined;
  cluster: string;
  outriggersignature?: string | undefined;
  data: { object: KubeObject; oldObject?: KubeObject | undefined };
}

export class EnvelopeError extends MalformedMessageError {
  constructor(field: string, problem: string) {
    super('event envelope', field, problem);
    this.name = 'EnvelopeError';
  }
}

export function watchEventType(envelope: Pick<Envelope, 'type'>): WatchEventType {
  return envelope.type.slice(EVENT_TYPE_PREFIX.length) as WatchEventType;
}

/** Parses and validates a message body. Throws EnvelopeError naming the first bad field. */
export function parseEnvelope(body: string | unknown): Envelope {
  return parseMessage(body, envelopeSchema, (field, problem) => new EnvelopeError(field, problem), '(envelope)') as Envelope;
}

export interface NewEnvelope {
  cluster: string;
  type: WatchEventType;
  object: KubeObject;
  oldObject?: KubeObject | undefined;
  source: string;
  time?: Date;
}

/**
 * An event's id: `<cluster>/<uid>/<resourceVersion>/<type>`, so the same change seen twice has one id. Whoever
 * relays an envelope recomputes it rather than trust a sender's (its digest is the SQS deduplication id: a chosen
 * id could make SQS drop the real event as a duplicate for five minutes).
 */
export function envelopeId(cluster: string, object: KubeObject, type: WatchEventType): string {
  return `${cluster}/${object.metadata.uid ?? ''}/${object.metadata.resourceVersion ?? ''}/${type}`;
}

/**
 * Builds the envelope for a watch event. The id is derived from (cluster, uid, resourceVersion, type), so the
 * same change seen twice (a relist, a restarted forwarder) has the same id and deduplicates downstream.
 */
export function makeEnvelope(e: NewEnvelope): Envelope {
  const m = e.object.metadata;
  const envelope: Envelope = {
    specversion: '1.0',
    id: envelopeId(e.cluster, e.object, e.type),
    source: e.source,
    type: `${EVENT_TYPE_PREFIX}${e.type}`,
    time: (e.time ?? new Date()).toISOString(),
    subject: `${e.object.apiVersion ?? ''}/${e.object.kind ?? ''}/${m.namespace ? `${m.namespace}/` : ''}${m.name ?? ''}`,
    datacontenttype: 'application/json',
    cluster: e.cluster,
    data: { object: e.object, ...(e.oldObject ? { oldObject: e.oldObject } : {}) },
  };
  // Validate what we emit with the same schema consumers use, so a forwarder never sends what they reject.
  return parseEnvelope(envelope);
}

/**
 * The FIFO message group: per cluster, the object's owning controller (its ControllerRef), or the object
 * itself when it has none. Events about one controller's objects stay in order; everything else runs in
 * parallel, and one busy cluster has groups of its own.
 */
export function messageGroupId(envelope: Pick<Envelope, 'cluster' | 'data'>): string {
  const meta = envelope.data.object.metadata;
  const controller = meta.ownerReferences?.find((r) => r.controller === true);
  return `${envelope.cluster}/${controller?.uid ?? meta.uid ?? ''}`;
}

/** Who puts an envelope on a cluster's events queue. */
export type EnvelopeSender = 'forwarder' | 'ingest';

/**
 * SQS deduplication id (at most 128 characters): a digest of (cluster, uid, resourceVersion, type), apart for each
 * sender. An ingest caller who guesses an object's next resourceVersion must not make SQS drop the forwarder's
 * genuine event as a copy for five minutes (docs/operations/security.md); the same change from both is then
 * handled twice, which a level-triggered handler takes as one.
 */
export function deduplicationId(envelope: Pick<Envelope, 'id'>, sender: EnvelopeSender): string {
  return createHash('sha256')
    .update(sender === 'forwarder' ? envelope.id : `ingest\0${envelope.id}`)
    .digest('hex');
}
