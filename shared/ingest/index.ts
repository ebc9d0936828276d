// The ingest function's decision, without any I/O: given an HTTP request and the clusters this deployment
// serves, either every event becomes an envelope to queue, or the request is refused whole (nothing queued)
// with a status, a message naming the first problem, and one dead letter per event (or one for an unreadable
// request), each with its own reason, so an operator can see every event the sender meant to deliver.
import { MAX_ENVELOPE_BYTES, type Envelope } from '../envelope/index.ts';
import { KNATIVE_RESOURCE_TYPES, toEnvelope } from './convert.ts';
import { IngestError, readEvents, type IncomingEvent, type IngestRequest } from './request.ts';

export { ACCEPTED_TYPES, KNATIVE_RESOURCE_TYPES } from './convert.ts';
export { IngestError, type IngestRequest } from './request.ts';

/** Room left in a dead letter for its reason and source attributes (SQS counts them in the message size). */
export const DEAD_LETTER_BODY_BYTES = MAX_ENVELOPE_BYTES - 4096;

export interface IngestDeadLetter {
  body: string;
  reason: string;
}

export type IngestPlan =
  | { ok: true; envelopes: Envelope[]; counts: { accepted: number; envelopes: number; knative: number } }
  | { ok: false; status: number; problem: string; deadLetters: IngestDeadLetter[] };

/** A dead letter that fits in an SQS message: a body over the limit is cut (on a character boundary), and the reason says so. */
export function fitDeadLetter(letter: IngestDeadLetter): IngestDeadLetter {
  const bytes = Buffer.from(letter.body, 'utf8');
  if (bytes.length <= DEAD_LETTER_BODY_BYTES) return letter;
  // A streaming decode holds back a multi-byte character cut in half instead of emitting a replacement.
  const body = new TextDecoder().decode(bytes.subarray(0, DEAD_LETTER_BODY_BYTES), { stream: true });
  return { body, reason: `${letter.reason.slice(0, 900)} [the dead letter holds the first ${Buffer.byteLength(body)} of ${bytes.length} bytes]` };
}

function refuse(first: IngestError, refused: number, deadLetters: IngestDeadLetter[]): IngestPlan {
  const problem = refused > 1 ? `${first.message} (and ${refused - 1} more refused event(s))` : first.message;
  return { ok: false, status: first.status, problem, deadLetters: deadLetters.map(fitDeadLetter) };
}

export function planIngest(request: IngestRequest, clusters: ReadonlySet<string>, now = new Date()): IngestPlan {
  let events: IncomingEvent[];
  try {
    events = readEvents(request);
  } catch (err) {
    if (!(err instanceof IngestError)) throw err;
    // Unreadable as events: the body itself is the evidence (SQS takes no empty message, so an empty one is not kept).
    return refuse(err, 1, request.body ? [{ body: request.body, reason: err.message }] : []);
  }
  const cluster = request.query.cluster;
  if (cluster !== undefined && !clusters.has(cluster)) {
    const err = new IngestError('?cluster', `${JSON.stringify(cluster)} is not a cluster this deployment serves (${[...clusters].join(', ') || 'none'})`, 422);
    return refuse(err, 1, events.map((e) => ({ body: e.text, reason: err.message })));
  }
  const results = events.map((event) => {
    try {
      return toEnvelope(event, { clusters, cluster, now });
    } catch (err) {
      if (err instanceof IngestError) return err;
      throw err;
    }
  });
  const errors = results.filter((r): r is IngestError => r instanceof IngestError);
  const first = errors[0];
  if (first) {
    const deadLetters = events.map((e, i) => {
      const r = results[i];
      return { body: e.text, reason: r instanceof IngestError ? r.message : `not queued: refused with the rest of its request (${first.message})` };
    });
    return refuse(first, errors.length, deadLetters);
  }
  const envelopes = results as Envelope[];
  // Every event converted, so each is an object with a string type.
  const knative = events.filter((e) => Object.hasOwn(KNATIVE_RESOURCE_TYPES, (e.value as { type: string }).type)).length;
  return { ok: true, envelopes, counts: { accepted: envelopes.length, envelopes: envelopes.length - knative, knative } };
}
