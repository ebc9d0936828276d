// What an apiserver answer means to a controller. Handlers branch on these kinds, never on raw status codes,
// so that "the object is gone" or "someone else changed it first" is decided in one place.

export type KubeErrorKind =
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Invalid'
  | 'Forbidden'
  | 'Unauthorized'
  | 'Gone'
  | 'BadRequest'
  | 'Transient'
  | 'Unknown';

/** The `Status` object the apiserver sends with an error, as far as Outrigger reads it. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
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
  readonly retryAfterSeconds: number | undefined;

  constructor(kind: KubeErrorKind, message: string, opts: { status?: number; body?: KubeStatus; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'KubeError';
    this.kind = kind;
    this.status = opts.status ?? 0;
    this.reason = opts.body?.reason;
    this.causes = opts.body?.details?.causes ?? [];
    this.retryAfterSeconds = opts.body?.details?.retryAfterSeconds;
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

/** Classifies an HTTP answer from the apiserver. `body` is the raw text, usually a JSON `Status`. */
export function kubeErrorFromResponse(status: number, body: string, what: string): KubeError {
  let parsed: KubeStatus | undefined;
  try {
    const value: unknown = JSON.parse(body);
    if (value !== null && typeof value === 'object') parsed = value as KubeStatus;
  } catch {
    parsed = undefined;
  }
  const kind = (parsed?.reason && byReason[parsed.reason]) || byCode[status] || (status >= 500 ? 'Transient' : 'Unknown');
  const detail = parsed?.message ?? (body.length > 300 ? `${body.slice(0, 300)}…` : body);
  return new KubeError(kind, `${what}: ${status} ${kind}: ${detail}`, { status, ...(parsed ? { body: parsed } : {}) });
}

/** A request that got no HTTP answer. These are transient: the next attempt may reach the server. */
export function kubeErrorFromFailure(err: unknown, what: string): KubeError {
  if (err instanceof KubeError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown; cause?: { code?: unknown } } | null)?.cause?.code ?? (err as { code?: unknown } | null)?.code;
  return new KubeError('Transient', `${what}: no answer from the apiserver (${code ? `${String(code)}: ` : ''}${message})`, { cause: err });
}

export function isKubeError(err: unknown, kind?: KubeErrorKind): err is KubeError {
  return err instanceof KubeError && (kind === undefined || err.kind === kind);
}
