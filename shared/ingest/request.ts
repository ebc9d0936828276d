// Reading CloudEvents out of an HTTP request, in either content mode of the CloudEvents HTTP binding:
// structured (the whole event is the JSON body; a JSON array is a batch) or binary (attributes in ce-* headers,
// the body is the event's data, as Knative's ApiServerSource sends). Nothing here knows what an event means.
import { scanJson } from '../json-scan.ts';
import { MAX_MESSAGE_DEPTH, MalformedMessageError } from '../validation.ts';

/** An HTTP request as the ingest function sees it (a Function URL event, decoded). */
export interface IngestRequest {
  method: string;
  /** Header names in any case. */
  headers: Record<string, string | undefined>;
  query: Record<string, string | undefined>;
  /** The body as sent (decoded from base64 when the Function URL encoded it). */
  body: string;
  /** Who signed the request: the Function URL's IAM caller (requestContext.authorizer.iam.userArn). */
  caller?: string | undefined;
}

/**
 * The most events one request may carry: each refused one costs a dead letter, so a 6 MB array of `{}` (about a
 * million events) would otherwise outlast the function's time (docs/operations/security.md#who-can-make-outrigger-do-what).
 */
export const MAX_INGEST_EVENTS = 1000;

/** One CloudEvent as read from the request, before anyone looks at what it says. */
export interface IncomingEvent {
  /** The event in structured form: context attributes and `data` (not necessarily an object at all). */
  value: unknown;
  /** Where it sat in the request: '' for a lone event, `[i].` for a batch member (prefixes field names). */
  at: string;
  /** The event in structured mode, as the dead-letter queue keeps it. */
  text: string;
  /** What was already wrong with it when it was read (binary mode: its data). */
  problem?: IngestError;
}

/** A request the ingest refuses: answered with `status`, and recorded in the dead-letter queue with this message. */
export class IngestError extends MalformedMessageError {
  readonly status: number;
  constructor(field: string, problem: string, status = 400) {
    super('ingest request', field, problem);
    this.name = 'IngestError';
    this.status = status;
  }
}

export function header(request: IngestRequest, name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const [k, v] of Object.entries(request.headers)) if (k.toLowerCase() === wanted) return v;
  return undefined;
}

/** Binary mode: `ce-*` headers carry the attributes (names lower-cased, the prefix dropped). */
function binaryEvent(request: IngestRequest): IncomingEvent {
  const attributes: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(request.headers)) {
    const name = k.toLowerCase();
    if (name.startsWith('ce-') && v !== undefined) attributes[name.slice(3)] = v;
  }
  const contentType = header(request, 'content-type');
  if (contentType) attributes.datacontenttype = contentType;
  let data: unknown = request.body;
  let problem: IngestError | undefined;
  if (contentType && !/^application\/(?:[\w.+-]+\+)?json\b/i.test(contentType))
    problem = new IngestError('datacontenttype', `is ${contentType}: the ingest takes JSON data only`, 415);
  else {
    try {
      data = JSON.parse(request.body);
      const [scanned] = scanJson(request.body, MAX_MESSAGE_DEPTH).problems.values();
      if (scanned !== undefined) {
        problem = new IngestError('data', scanned);
        // Kept as sent: a value this deep may be beyond what JSON.stringify can write back.
        data = request.body;
      }
    } catch (err) {
      problem = new IngestError('data', `is not JSON (${(err as Error).message})`);
    }
  }
  const value = { ...attributes, data };
  return { value, at: '', text: JSON.stringify(value), ...(problem ? { problem } : {}) };
}

/**
 * The events in a request: one, or a batch (possibly empty). Throws IngestError when the request as a whole
 * cannot be read; what is wrong with one event is found when it is converted.
 */
export function readEvents(request: IngestRequest): IncomingEvent[] {
  if (request.method.toUpperCase() !== 'POST') throw new IngestError('(method)', `is ${request.method}: send events with POST`, 405);
  if (request.body.length === 0) throw new IngestError('(body)', 'is empty');
  if (header(request, 'ce-specversion') !== undefined) return [binaryEvent(request)];
  let value: unknown;
  try {
    value = JSON.parse(request.body);
  } catch (err) {
    throw new IngestError('(body)', `is not JSON (${(err as Error).message})`);
  }
  // Each event's own text, as sent (its duplicate keys too), and what JSON.parse hid: a key given twice, too deep a nesting.
  const { problems, elements } = scanJson(request.body, MAX_MESSAGE_DEPTH);
  const refused = (at: string, i: number) => {
    const p = problems.get(i);
    return p === undefined ? {} : { problem: new IngestError(at ? at.slice(0, -1) : '(body)', p) };
  };
  if (Array.isArray(value) && value.length > MAX_INGEST_EVENTS)
    throw new IngestError(
      '(body)',
      `holds ${value.length} events, over the ${MAX_INGEST_EVENTS} a request may carry; send them in smaller batches`,
      413,
    );
  if (Array.isArray(value))
    return value.map((v, i) => ({ value: v, at: `[${i}].`, text: request.body.slice(...elements[i]!), ...refused(`[${i}].`, i) }));
  return [{ value, at: '', text: request.body, ...refused('', -1) }];
}
