// The ingest function's decision, without any I/O: given an HTTP request, the clusters this deployment serves and
// those its caller may speak for, each event becomes an envelope to queue or is refused with a dead letter naming
// its problem; a request unreadable as a whole, or naming a cluster its caller may not speak for, is refused
// whole, so an operator can see every event the sender meant to deliver.
import type { Envelope } from '../envelope/index.ts';
import { fitDeadLetter } from '../dead-letter-fit.ts';
import { KNATIVE_RESOURCE_TYPES, knownCluster, toEnvelope } from './convert.ts';
import { IngestError, readEvents, type IncomingEvent, type IngestRequest } from './request.ts';

export { ACCEPTED_TYPES, KNATIVE_RESOURCE_TYPES } from './convert.ts';
export { IngestError, MAX_INGEST_EVENTS, type IngestRequest } from './request.ts';

export { DEAD_LETTER_BODY_BYTES, fitDeadLetter } from '../dead-letter-fit.ts';

export interface IngestDeadLetter {
  body: string;
  reason: string;
}

export type IngestPlan =
  /**
   * Events to queue, and those refused (each dead-lettered with its reason): a refused event never costs the valid
   * ones beside it. `problem` names the first refusal.
   */
  | {
      ok: true;
      envelopes: Envelope[];
      deadLetters: IngestDeadLetter[];
      problem?: string;
      counts: { accepted: number; envelopes: number; knative: number; refused: number };
    }
  /** Nothing to queue: the request as a whole, or every event in it, was refused. */
  | { ok: false; status: number; problem: string; deadLetters: IngestDeadLetter[] };

function problemOf(first: IngestError, refused: number): string {
  return refused > 1 ? `${first.message} (and ${refused - 1} more refused event(s))` : first.message;
}

function refuse(first: IngestError, refused: number, deadLetters: IngestDeadLetter[]): IngestPlan {
  return { ok: false, status: first.status, problem: problemOf(first, refused), deadLetters: deadLetters.map(fitDeadLetter) };
}

/**
 * `clusters`: those this deployment serves; `allowed`: those the request's caller may speak for (the cluster
 * configuration's ingestPrincipals, see ingestClustersOf).
 */
export function planIngest(
  request: IngestRequest,
  clusters: ReadonlySet<string>,
  allowed: ReadonlySet<string>,
  now = new Date(),
): IngestPlan {
  // A caller no served cluster names may speak for none: refused before its body is read, and not dead-lettered,
  // so a principal that may merely invoke the URL cannot fill the dead-letter queue or trip its alarm.
  if (allowed.size === 0)
    return refuse(
      new IngestError(
        '(caller)',
        `${request.caller ?? '(unsigned)'} is named by no served cluster's ingestPrincipals, so it may send no events`,
        403,
      ),
      1,
      [],
    );
  let events: IncomingEvent[];
  try {
    events = readEvents(request);
  } catch (err) {
    if (!(err instanceof IngestError)) throw err;
    // Unreadable as events: the body itself is the evidence (SQS takes no empty message, so an empty one is not kept).
    return refuse(err, 1, request.body ? [{ body: request.body, reason: err.message }] : []);
  }
  const scope = { clusters, caller: request.caller, allowed };
  const cluster = request.query.cluster;
  if (cluster !== undefined) {
    try {
      knownCluster(scope, cluster, '?cluster');
    } catch (err) {
      if (!(err instanceof IngestError)) throw err;
      return refuse(
        err,
        1,
        events.map((e) => ({ body: e.text, reason: err.message })),
      );
    }
  }
  const results = events.map((event) => {
    try {
      return toEnvelope(event, { ...scope, cluster, now });
    } catch (err) {
      if (err instanceof IngestError) return err;
      throw err;
    }
  });
  const errors = results.filter((r): r is IngestError => r instanceof IngestError);
  const deadLetters = events.flatMap((e, i) => {
    const r = results[i];
    return r instanceof IngestError ? [fitDeadLetter({ body: e.text, reason: r.message })] : [];
  });
  const first = errors[0];
  if (first && errors.length === events.length) return refuse(first, errors.length, deadLetters);
  const accepted = events.filter((_, i) => !(results[i] instanceof IngestError));
  const envelopes = results.filter((r): r is Envelope => !(r instanceof IngestError));
  // Every accepted event converted, so each is an object with a string type.
  const knative = accepted.filter((e) => Object.hasOwn(KNATIVE_RESOURCE_TYPES, (e.value as { type: string }).type)).length;
  return {
    ok: true,
    envelopes,
    deadLetters,
    ...(first ? { problem: problemOf(first, errors.length) } : {}),
    counts: { accepted: envelopes.length, envelopes: envelopes.length - knative, knative, refused: errors.length },
  };
}
