// What the serving layer does with a pass's problem, by its reason, the same for every Metacontroller-style
// definition (MapController, CompositeController, DecoratorController): whether the parent's request is retried
// with backoff (docs/design/map-pass.md#per-parent-backoff) and whether the parent gets a Warning Event.

export interface ProblemRule {
  /** A retry may cure it: the request comes back with backoff, up to RETRY_RECEIVES receives. */
  retried: boolean;
  /** A Warning Event on the parent, as Outrigger: the hook's author reads it with kubectl describe. */
  warned: boolean;
}

const hook = { retried: true, warned: true };
const write = { retried: true, warned: false };
/** Only a change of the parent's or the definition's spec cures it, and that change queues a sync of its own. */
const spec = { retried: false, warned: false };

/** Every reason a pass reports (a hook's: `Hook` and the HookError's reason), and its rule. */
export const PROBLEM_RULES = {
  HookTimeout: hook,
  HookUnreachable: hook,
  HookHTTPError: hook,
  HookMalformedAnswer: hook,
  HookFunctionError: hook,
  HookNotAllowed: hook,
  HookAnswerTooLarge: hook,
  HookUnavailable: hook,
  // A redirect, a missing Secret key, a plain-http URL off loopback: the hook's spec or its Secret must change.
  HookRefused: { retried: false, warned: true },
  InvalidSelector: spec,
  InvalidOutput: write,
  InvalidChild: write,
  WriteFailed: write,
  Forbidden: write,
  TooManyRelated: write,
  UnresolvableRelated: write,
} as const satisfies Record<string, ProblemRule>;

export type ProblemReason = keyof typeof PROBLEM_RULES;

/** A reason's rule; one not in the table is retried, and warned when it is a hook's. */
export function ruleOf(reason: string): ProblemRule {
  return Object.hasOwn(PROBLEM_RULES, reason)
    ? PROBLEM_RULES[reason as ProblemReason]
    : { retried: true, warned: reason.startsWith('Hook') };
}

/**
 * A failing parent's request is retried with backoff this many receives at most; then it is consumed and the next
 * change or resync tries again, so a tenant's broken hook never fills a dead-letter queue (infra's
 * MAX_RECEIVE_COUNT is higher).
 */
export const RETRY_RECEIVES = 10;

export type RetryOutcome =
  { kind: 'done' } | { kind: 'retry'; afterSeconds: number | undefined; reason: string } | { kind: 'give-up'; reason: string };

/**
 * What a pass's problems ask of its request: nothing, a retry (after the hook's Retry-After, else the message's
 * backoff), or, past RETRY_RECEIVES, nothing more until the next change. A hook that asked to wait is retried
 * whatever its reason.
 */
export function retryOutcome(pass: {
  problems: ReadonlyArray<{ reason: string }>;
  retryAfterSeconds: number | undefined;
  receiveCount: number;
}): RetryOutcome {
  const retried = pass.problems.filter((p) => ruleOf(p.reason).retried);
  if (!retried.length && pass.retryAfterSeconds === undefined) return { kind: 'done' };
  const reason = (retried[0] ?? pass.problems[0])?.reason ?? '';
  return pass.receiveCount >= RETRY_RECEIVES
    ? { kind: 'give-up', reason }
    : { kind: 'retry', afterSeconds: pass.retryAfterSeconds, reason };
}
