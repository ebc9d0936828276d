// A pass fits its invocation (docs/design/map-pass.md#a-pass-fits-its-invocation): it gets a share of the
// invocation's remaining time, starts a hook call only while one attempt still fits, and hands the inputs it did
// not reach to a follow-up request for the same parent, which takes them in map-key order from where it stopped.

/** Kept from the invocation's remaining time for the pass's last writes (status, Events, its record, a follow-up). */
export const PASS_RESERVE_MS = 5_000;
/** Kept for each later record of the batch, unless an equal share of what remains is more. */
export const PASS_SHARE_MS = 10_000;

/**
 * A pass's time budget: what remains of the invocation, less the reserve and a share for each of the `later`
 * records of the batch (at least an equal share of it), so one slow parent leaves the rest of its batch time to run.
 */
export function passBudgetMs(remainingMs: number, later: number): number {
  const usable = Math.max(0, remainingMs - PASS_RESERVE_MS);
  return Math.max(usable / (later + 1), usable - later * PASS_SHARE_MS);
}

/**
 * Whether a hook call may start with `leftMs` of the pass's budget left: one attempt must fit (its timeout), or,
 * for a hook whose timeout is longer than half the budget, half the budget must be left, so every pass starts some.
 */
export function callFits(leftMs: number, timeoutMs: number, budgetMs: number): boolean {
  return leftMs > 0 && leftMs >= Math.min(timeoutMs, budgetMs / 2);
}

/** Sorts after every map key (a uid): a follow-up that owes only detached outputs their tombstone call. */
export const AFTER_ALL_KEYS = '~';

/** How a follow-up request's cause begins: `continue/<map key>/<problems so far>/<first reason>/<nonce>`. */
export const CONTINUE_CAUSE = 'continue/';

export interface Continuation {
  /** The first map key not reached; keys before it had their turn earlier in this sync. */
  cursor: string;
  /** Problems of the earlier passes of this sync, and the first one's reason. */
  problems: number;
  reason: string;
}

export function continuationCause(c: Continuation, nonce: string): string {
  return `${CONTINUE_CAUSE}${c.cursor}/${c.problems}/${c.reason || '-'}/${nonce}`;
}

export function continuationOf(causes: readonly string[]): Continuation | undefined {
  for (const c of causes) {
    if (!c.startsWith(CONTINUE_CAUSE)) continue;
    const [cursor, problems, reason] = c.slice(CONTINUE_CAUSE.length).split('/');
    if (cursor && Number.isSafeInteger(Number(problems)) && Number(problems) >= 0)
      return { cursor, problems: Number(problems), reason: reason === '-' ? '' : (reason ?? '') };
  }
  return undefined;
}
