// The ingest function's decision, without any I/O: given an HTTP request and the clusters this deployment
// serves, either every event becomes an envelope to queue, or the request is refused whole (nothing queued)
// with a status, a message naming the first problem, and one dead letter per event (or one for an unreadable
// request), each with its own reason, so an operator can see every event the sender meant to deliver.
import type { Envelope } from '../envelope/index.ts';
import { fitDeadLetter } from '../lambda/dead-letter.ts';
import { KNATIVE_RESOURCE_TYPES, toEnvelope } from './convert.ts';
import { IngestError, readEvents, type IncomingEvent, type IngestRequest } from './request.ts';

export { ACCEPTED_TYPES, KNATIVE_RESOURCE_TYPES } from './convert.ts';
export { IngestError, type IngestRequest } from './request.ts';

export { DEAD_LETTER_BODY_BYTES, fitDeadLetter } from '../lambda/dead-letter.ts';

export interface IngestDeadLetter {
  body: string;
  reason: string;
}

export type IngestPlan =
  | { ok: true; envelopes: Envelope[]; counts: { accepted: number; envelopes: number; knative: number } }
  | { ok: false; status: number; problem: string; deadLetters: IngestDeadLetter[] };

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
