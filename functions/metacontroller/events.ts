// Warning Events for a pass's problems, by the rules every kind shares (shared/metacontroller/problems.ts): one per
// warned reason per pass, on the parent, as Outrigger (whose role may create events), not one per input.
import { recordEvent } from '../../shared/events/index.ts';
import type { KubeApi, KubeObject } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import { ruleOf } from '../../shared/metacontroller/problems.ts';

export async function warnProblems<P extends { reason: string }>(
  ctx: { kube: KubeApi; log: Log },
  regarding: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>,
  problems: readonly P[],
  how: {
    reporter: { controller: string; instance: string };
    /** The Event's note: how many problems had the reason, and the first of them. */
    note: (count: number, first: P) => string;
    /** Every reason, not only the warned ones: where no condition may say it (a decorated object is another's). */
    every?: boolean;
  },
): Promise<void> {
  const byReason = new Map<string, { count: number; first: P }>();
  for (const p of problems.filter((q) => how.every || ruleOf(q.reason).warned)) {
    const seen = byReason.get(p.reason);
    byReason.set(p.reason, { count: (seen?.count ?? 0) + 1, first: seen?.first ?? p });
  }
  for (const [reason, { count, first }] of byReason)
    await recordEvent(
      ctx.kube,
      regarding,
      { type: 'Warning', reason, action: 'Sync', note: how.note(count, first) },
      how.reporter,
      ctx.log,
    );
}
