// What a failed hook call is (HookError, its reason and a message that may reach the parent's status) and how
// messages name a hook: shared by the hook caller (shared/hooks/index.ts) and its webhook options
// (shared/hooks/options.ts).
import type { Hook } from '../map/api.ts';
import { parseGoDuration } from '../validation.ts';

export type HookFailure =
  | 'Timeout'
  | 'Unreachable'
  | 'HTTPError'
  | 'MalformedAnswer'
  | 'FunctionError'
  | 'Refused'
  | 'NotAllowed'
  | 'AnswerTooLarge'
  | 'Unavailable';

/** The largest answer read, webhook or Lambda (a sync Lambda answer is at most 6 MB anyway). */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

export class HookError extends Error {
  readonly reason: HookFailure;
  /** The HTTP status of an HTTPError. */
  readonly status: number | undefined;
  /** What the hook answered (an excerpt), for the log only: an answer is never echoed into the cluster. */
  readonly detail: string | undefined;
  /** When the hook asked to be called again (a webhook's Retry-After, a Lambda hook's retryAfterSeconds), in seconds. */
  readonly retryAfterSeconds: number | undefined;
  constructor(
    reason: HookFailure,
    message: string,
    opts: { cause?: unknown; status?: number; detail?: string; retryAfterSeconds?: number | undefined } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = 'HookError';
    this.reason = reason;
    this.status = opts.status;
    this.detail = opts.detail;
    this.retryAfterSeconds = opts.retryAfterSeconds;
  }
}

/** The hook as messages name it: a webhook by its origin alone (a path or query may carry a token, and reach the status). */
export function hookName(hook: Hook): string {
  if (!hook.webhook) return `lambda ${hook.lambda?.functionName ?? '?'}`;
  const { service, url } = hook.webhook;
  if (service) return `webhook service ${service.namespace}/${service.name}`;
  try {
    return `webhook ${new URL(url ?? '').origin}`;
  } catch {
    return 'webhook (bad URL)';
  }
}

/** A hook's timeout in seconds: the webhook's Go duration (`webhook.timeout`, as Metacontroller names it), or timeoutSeconds. */
export function hookTimeoutSeconds(hook: Hook): number {
  const own = hook.webhook?.timeout === undefined ? undefined : parseGoDuration(hook.webhook.timeout);
  return own !== undefined && own > 0 ? Math.min(own, 900) : hook.timeoutSeconds;
}
