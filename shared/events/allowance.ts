// How many routine Events one object may get: a burst, then one a minute. Kubernetes' own recorder limits each
// object's Events the same way (a token bucket per source and object, in client-go's tools/record
// EventSourceObjectSpamFilter, https://github.com/kubernetes/client-go/blob/master/tools/record/events_cache.go),
// so that an object changed in a tight loop does not cost the apiserver one Event write per change. A Lambda keeps
// no memory between invocations, so the bucket lives where the object's other state does (for history, the
// parent's record) and this module only decides.

export interface EventAllowance {
  /** Events that may be recorded now, fractional while it refills. */
  tokens: number;
  /** When `tokens` was last worked out (ms since the epoch). */
  at: number;
  /** Events not recorded since the last one that was: the next one recorded says how many. */
  withheld: number;
}

export const EVENT_BURST = 8;
export const EVENT_REFILL_MS = 60_000;

export interface EventDecision {
  record: boolean;
  /** When `record`: how many were withheld before this one, for its note. */
  withheld: number;
  next: EventAllowance;
}

/**
 * Spends one Event from `previous` at `now`. A clock behind the one that wrote `previous` (another invocation's)
 * refills nothing, so a disagreement between clocks never grants more than the burst.
 */
export function spendEvent(
  previous: EventAllowance | undefined,
  now: number,
  burst: number = EVENT_BURST,
  refillMs: number = EVENT_REFILL_MS,
): EventDecision {
  const start = previous ?? { tokens: burst, at: now, withheld: 0 };
  const at = Math.max(start.at, now);
  const tokens = Math.min(burst, start.tokens + (at - start.at) / refillMs);
  if (tokens >= 1) return { record: true, withheld: start.withheld, next: { tokens: tokens - 1, at, withheld: 0 } };
  return { record: false, withheld: 0, next: { tokens, at, withheld: start.withheld + 1 } };
}

/** The note of an Event recorded after others were withheld. */
export function withWithheld(note: string, withheld: number): string {
  return withheld > 0
    ? `${note} (${withheld} earlier event(s) on this object not recorded: at most ${EVENT_BURST} at once, then one a minute)`
    : note;
}
