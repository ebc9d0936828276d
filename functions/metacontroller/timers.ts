// A parent's wake-up timers (resyncAfterSeconds; docs/design/map-pass.md#timers), sent and served the same way
// whichever kind of definition's hook asked: a timer message waits in a group of its own, then queues an
// ordinary sync request for the parent.
import { NotYet } from '../../shared/lambda/retry.ts';
import { makeSyncRequest, syncGroupId, type SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import type { Log } from '../../shared/log.ts';
import { timerCause, timerStep, wakeCause } from '../../shared/metacontroller/timers.ts';
import { METACONTROLLER_TARGET } from './target.ts';

/** A timer waits in a group of its own: held back in the parent's group, it would hold back the parent's events. */
const timerGroup = (r: SyncRequest) => `${syncGroupId(r.key)}/timer`;

export async function sendTimer(syncSink: SyncSink, key: SyncRequest['key'], dueAt: number): Promise<void> {
  await syncSink.send(METACONTROLLER_TARGET, [makeSyncRequest(key, [timerCause(dueAt, String(Date.now()))])], timerGroup);
}

/**
 * A received timer (`what` names the kind, for the log): dropped when a later pass recorded another wake, held back
 * until due, sent again when held too long, and once due an ordinary sync request for the parent, in its own group.
 */
export async function serveTimer(
  ctx: { syncSink: SyncSink; log: Log },
  what: string,
  timer: { key: SyncRequest['key']; dueAt: number; sentAt: number },
  record: { wakeAt?: number | undefined } | undefined,
): Promise<void> {
  const { key, dueAt, sentAt } = timer;
  const parent = `${key.namespace ?? ''}/${key.name}`;
  const step = timerStep({ now: Date.now(), sentAt, dueAt, recorded: record?.wakeAt, hasRecord: record !== undefined });
  switch (step.kind) {
    case 'stale':
      ctx.log('info', `${what} wake-up timer replaced by a later pass; dropped`, { parent, dueAt, recorded: record?.wakeAt });
      return;
    case 'hold':
      throw new NotYet(`${what} wake-up timer of ${parent} due at ${new Date(dueAt).toISOString()}`, step.seconds);
    case 'renew':
      await sendTimer(ctx.syncSink, key, dueAt);
      return;
    case 'fire':
      await ctx.syncSink.send(METACONTROLLER_TARGET, [makeSyncRequest(key, [wakeCause(dueAt, String(Date.now()))])]);
      ctx.log('info', `${what} wake-up timer due; parent queued`, { parent, dueAt, lateMs: Date.now() - dueAt });
  }
}
