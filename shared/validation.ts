// What every message Outrigger parses shares, whatever its schema (an event envelope, a sync request, an ingest
// request, a policy or MapController spec): English messages, the bounds of one SQS message, and the error that
// sends a message to the dead letters with its first bad field named.
// A namespace import, so the bundler keeps only the parts of zod/mini used here (see shared/envelope/index.ts).
import * as z from 'zod/mini';
import en from 'zod/v4/locales/en.js';
import { deeperThan, scanJson } from './json-scan.ts';

// zod/mini carries no messages of its own: without a locale every problem would read "Invalid input". The
// messages this module's callers report (and dead letters record) are English zod's, so install it, once, for
// every schema in the process; each module that validates imports this one, so it is in place before any parse.
z.config(en());

/** SQS's message size limit, and so the largest message (an envelope a forwarder sends, a sync request) any parse takes. */
export const MAX_MESSAGE_BYTES = 256 * 1024;

/** The deepest nesting a message may have: far beyond any Kubernetes object, short of what recursion in JSON.stringify survives. */
export const MAX_MESSAGE_DEPTH = 100;

/** A non-empty string: most fields a handler relies on. */
export const nonEmpty = () => z.string().check(z.minLength(1));

/** A cluster id is part of every state key and message group: DNS-label-like, so it is safe everywhere. */
export const clusterIdSchema = z
  .string()
  .check(z.regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a DNS label: lower-case letters, digits and -, at most 63'));

/**
 * A message that can never be processed as it is: it goes to the dead-letter queue with this error's
 * message as the reason, instead of being retried.
 */
export class MalformedMessageError extends Error {
  /** Dotted path of the first bad field, or a parenthesised word when the whole message is wrong. */
  readonly field: string;
  constructor(what: string, field: string, problem: string) {
    super(`invalid ${what}: ${field}: ${problem}`);
    this.name = 'MalformedMessageError';
    this.field = field;
  }
}

/** The first problem zod found, as (field path, problem); an unknown key is named itself, not its parent. */
export function firstIssue(error: z.core.$ZodError, whole: string): [string, string] {
  const issue = error.issues[0];
  const path = issue ? issue.path.map(String) : [];
  if (issue?.code === 'unrecognized_keys' && issue.keys[0]) {
    path.push(issue.keys[0]);
    return [path.join('.'), 'is not a known field'];
  }
  return [path.length > 0 ? path.join('.') : whole, issue?.message ?? 'is not valid'];
}

/**
 * Parses a JSON message body (or an already parsed value) and validates it with `schema`; a message too
 * large, not JSON or not valid throws the error `malformed` makes, naming the first bad field.
 */
export function parseMessage<T>(
  body: unknown,
  schema: z.ZodMiniType<T>,
  malformed: (field: string, problem: string) => MalformedMessageError,
  whole: string,
): T {
  let value: unknown = body;
  if (typeof body === 'string') {
    const bytes = Buffer.byteLength(body, 'utf8');
    if (bytes > MAX_MESSAGE_BYTES) throw malformed(whole, `is ${bytes} bytes, over the ${MAX_MESSAGE_BYTES}-byte limit`);
    try {
      value = JSON.parse(body);
    } catch (err) {
      throw malformed(whole, `is not JSON (${(err as Error).message})`);
    }
    const [problem] = scanJson(body, MAX_MESSAGE_DEPTH).problems.values();
    if (problem !== undefined) throw malformed(whole, problem);
  } else if (deeperThan(value, MAX_MESSAGE_DEPTH)) throw malformed(whole, `is nested deeper than ${MAX_MESSAGE_DEPTH} levels`);
  const result = schema.safeParse(value);
  if (!result.success) throw malformed(...firstIssue(result.error, whole));
  return result.data;
}

/** A Go duration (`10s`, `1m30s`, `500ms`, `1.5s`) in seconds; undefined for one that does not parse. */
export function parseGoDuration(text: string): number | undefined {
  const unit: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(text)) return text === '0' ? 0 : undefined;
  let total = 0;
  for (const [, n, , u] of text.matchAll(/(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) total += Number(n) * unit[u!]!;
  return total;
}
