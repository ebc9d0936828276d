// What an apiserver answer means to a controller. Handlers branch on these kinds, never on raw status codes,
// so that "the object is gone" or "someone else changed it first" is decided in one place.

export type KubeErrorKind =
  'NotFound' | 'AlreadyExists' | 'Conflict' | 'Invalid' | 'Forbidden' | 'Unauthorized' | 'Gone' | 'BadRequest' | 'Transient' | 'Unknown';

/** The `Status` object the apiserver sends with an error, as far as Outrigger reads it. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  /** On a 410 for a continued list, where an inconsistent list may go on from (etcd3's handleCompactedErrorForPaging). */
  metadata?: { continue?: string };
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: Array<{ reason?: string; message?: string; field?: string }>;
    retryAfterSeconds?: number;
  };
}

export class KubeError extends Error {
  readonly kind: KubeErrorKind;
  /** HTTP status, or 0 when no answer arrived (connection refused, reset, timeout). */
  readonly status: number;
  readonly reason: string | undefined;
  readonly causes: ReadonlyArray<{ reason?: string; message?: string; field?: string }>;
  /** How long the apiserver asked the client to wait before trying again (the Status's or the Retry-After header's). */
  readonly retryAfterSeconds: number | undefined;
  /**
   * A 410 to a continued list may carry a token to go on from, at the current revision: the rest of the list,
   * not a consistent snapshot with the pages before it (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks).
   */
  readonly continueToken: string | undefined;

  constructor(
    kind: KubeErrorKind,
    message: string,
    opts: { status?: number; body?: KubeStatus; cause?: unknown; retryAfterSeconds?: number | undefined } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'KubeError';
    this.kind = kind;
    this.status = opts.status ?? 0;
    this.reason = opts.body?.reason;
    this.causes = opts.body?.details?.causes ?? [];
    this.retryAfterSeconds = opts.body?.details?.retryAfterSeconds ?? opts.retryAfterSeconds;
    this.continueToken = opts.body?.metadata?.continue || undefined;
  }

  get transient(): boolean {
    return this.kind === 'Transient';
  }
}

// Status reasons take precedence over codes: a 409 is AlreadyExists on create but Conflict on update, and
// a 422 is always Invalid.
const byReason: Record<string, KubeErrorKind> = {
  NotFound: 'NotFound',
  AlreadyExists: 'AlreadyExists',
  Conflict: 'Conflict',
  Invalid: 'Invalid',
  Forbidden: 'Forbidden',
  Unauthorized: 'Unauthorized',
  Gone: 'Gone',
  Expired: 'Gone',
  BadRequest: 'BadRequest',
  TooManyRequests: 'Transient',
  ServerTimeout: 'Transient',
  Timeout: 'Transient',
  ServiceUnavailable: 'Transient',
  InternalError: 'Transient',
};

const byCode: Record<number, KubeErrorKind> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Gone',
  422: 'Invalid',
  429: 'Transient',
  500: 'Transient',
  502: 'Transient',
  503: 'Transient',
  504: 'Transient',
};

/** A Retry-After header's delay in seconds: delta-seconds or an HTTP date (https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3); undefined if neither. */
export function parseRetryAfter(value: string | undefined, now: Date = new Date()): number | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  // IMF-fixdate only: Date.parse also takes "-1" or "1.5" for a date.
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now.getTime()) / 1000)) : undefined;
}

/**
 * Classifies an HTTP answer from the apiserver. `body` is the raw text, usually a JSON `Status`; `retryAfter` the
 * Retry-After header, if any.
 */
export function kubeErrorFromResponse(status: number, body: string, what: string, retryAfter?: string): KubeError {
  let parsed: KubeStatus | undefined;
  try {
    const value: unknown = JSON.parse(body);
    if (value !== null && typeof value === 'object') parsed = value as KubeStatus;
  } catch {
    parsed = undefined;
  }
  const kind = (parsed?.reason && byReason[parsed.reason]) || byCode[status] || (status >= 500 ? 'Transient' : 'Unknown');
  const detail = parsed?.message ?? (body.length > 300 ? `${body.slice(0, 300)}…` : body);
  return new KubeError(kind, `${what}: ${status} ${kind}: ${detail}`, {
    status,
    ...(parsed ? { body: parsed } : {}),
    retryAfterSeconds: parseRetryAfter(retryAfter),
  });
}

/** A request that got no HTTP answer. These are transient: the next attempt may reach the server. */
export function kubeErrorFromFailure(err: unknown, what: string): KubeError {
  if (err instanceof KubeError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown; cause?: { code?: unknown } } | null)?.cause?.code ?? (err as { code?: unknown } | null)?.code;
  return new KubeError('Transient', `${what}: no answer from the apiserver (${code ? `${String(code)}: ` : ''}${message})`, { cause: err });
}

/** The answer, or undefined where the apiserver said NotFound: `find` is `get` so. */
export async function unlessNotFound<T>(answer: Promise<T>): Promise<T | undefined> {
  try {
    return await answer;
  } catch (err) {
    if (isKubeError(err, 'NotFound')) return undefined;
    throw err;
  }
}

export function isKubeError(err: unknown, kind?: KubeErrorKind): err is KubeError {
  return err instanceof KubeError && (kind === undefined || err.kind === kind);
}
