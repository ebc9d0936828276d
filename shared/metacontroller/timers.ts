// When a parent is synced again without a change: its resync period, and the wake-up timers its hooks ask for.
import { createHash } from 'node:crypto';

/**
 * Whether a scheduled tick (every `tickMs`) resyncs a parent: once per resync period, at a phase fixed by the
 * parent's uid so a thousand parents with one period do not all resync in the same tick. Periods shorter than
 * the tick resync every tick. Stateless: nothing is stored per parent. Returns the period's index (a
 * deduplication cause) or undefined.
 */
export function resyncDue(uid: string, periodSeconds: number, now: Date, tickMs: number): number | undefined {
  const period = periodSeconds * 1000;
  const t = now.getTime();
  if (period <= tickMs) return Math.floor(t / tickMs);
  const phase = createHash('sha256').update(uid).digest().readUInt32BE(0) % period;
  const index = Math.floor((t - phase) / period);
  return index !== Math.floor((t - tickMs - phase) / period) ? index : undefined;
}

// resyncAfterSeconds (docs/controllers/mapcontroller.md#lifecycle): a hook's wish to be called again after a while, with no
// change. Sync queues are FIFO, which take no per-message delay, and a message held back in a parent's own group
// would hold back that parent's events too. So a pass that leaves a wish sends one *timer* message in a group of
// its own (the parent's group and "/timer"): each receive before it is due holds it back (its visibility, as a
// retry's backoff is set) and, once due, it sends the parent an ordinary sync request, in the parent's group.

/** A wake this close (ms) is due: timers are held in whole seconds, and a wake a little early is harmless. */
export const WAKE_EARLY_MS = 250;
/** How long one timer message is held at most, counted from when it was sent: below the queues' oldest-message alarm. */
export const TIMER_HOLD_MAX_SECONDS = 240;
/** How a timer message's cause begins: `timer/<due, ms since the epoch>/<nonce>`. */
export const TIMER_CAUSE = 'timer/';
/** How the sync request a due timer sends begins: `wake/<due>/<nonce>`. */
export const WAKE_CAUSE = 'wake/';

export function timerCause(dueAt: number, nonce: string): string {
  return `${TIMER_CAUSE}${dueAt}/${nonce}`;
}

export function wakeCause(dueAt: number, nonce: string): string {
  return `${WAKE_CAUSE}${dueAt}/${nonce}`;
}

/** The due time a timer message names, or undefined for any other request. */
export function timerOf(causes: readonly string[]): number | undefined {
  for (const c of causes) {
    if (!c.startsWith(TIMER_CAUSE)) continue;
    const due = Number(c.slice(TIMER_CAUSE.length).split('/')[0]);
    if (Number.isSafeInteger(due) && due > 0) return due;
  }
  return undefined;
}

export type TimerStep = { kind: 'fire' } | { kind: 'hold'; seconds: number } | { kind: 'renew' } | { kind: 'stale' };

/**
 * What a received timer message does: `stale` when the parent's record names another wake (a later pass replaced
 * it); `fire` when due; `hold` it back, in whole seconds, until due or until it is TIMER_HOLD_MAX_SECONDS old;
 * `renew` (a fresh timer for the same time) when it is that old.
 */
export function timerStep(t: { now: number; sentAt: number; dueAt: number; recorded: number | undefined; hasRecord: boolean }): TimerStep {
  if (t.hasRecord && t.recorded !== t.dueAt) return { kind: 'stale' };
  const remaining = t.dueAt - t.now;
  if (remaining <= WAKE_EARLY_MS) return { kind: 'fire' };
  const ageLimit = t.sentAt + TIMER_HOLD_MAX_SECONDS * 1000;
  if (t.dueAt <= ageLimit) return { kind: 'hold', seconds: Math.ceil(remaining / 1000) };
  const left = Math.floor((ageLimit - t.now) / 1000);
  return left >= 1 ? { kind: 'hold', seconds: left } : { kind: 'renew' };
}

/**
 * After a pass: the wake it leaves (the earliest its hooks asked for), and whether a timer must be sent for it. A
 * pending timer (`pending`, not yet due) due no later than what is wanted serves it: the pass it starts sends the
 * next one. With no wish, the pending timer becomes stale.
 */
export function nextWake(
  pending: number | undefined,
  wanted: number | undefined,
  now: number,
): { wakeAt: number | undefined; send: boolean } {
  if (wanted === undefined) return { wakeAt: undefined, send: false };
  if (pending !== undefined && pending > now && pending <= wanted) return { wakeAt: pending, send: false };
  return { wakeAt: wanted, send: true };
}
