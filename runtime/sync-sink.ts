// The router's sync requests, delivered to the local runtime's queues with the FIFO group and
// deduplication id an SQS FIFO queue would get. A runtime started with some functions only (the tests')
// drops requests for controllers it does not run, saying so once per target, rather than failing the
// router's batches: in AWS every target has its queue.
import type { SyncRequest } from '../shared/lambda/sync-request.ts';
import { syncGroupId } from '../shared/lambda/sync-request.ts';
import { syncDeduplicationId, type SyncSink } from '../shared/lambda/sync-sink.ts';
import type { LocalQueue } from './queue.ts';

export class LocalSyncSink implements SyncSink {
  private readonly queues: ReadonlyMap<string, LocalQueue>;
  private readonly log: (message: string) => void;
  private readonly told = new Set<string>();
  constructor(queues: ReadonlyMap<string, LocalQueue>, log: (message: string) => void = () => {}) {
    this.queues = queues;
    this.log = log;
  }
  async send(
    target: string,
    requests: SyncRequest[],
    groupOf: (request: SyncRequest) => string = (r) => syncGroupId(r.key),
  ): Promise<void> {
    const queue = this.queues.get(target);
    if (!queue) {
      if (!this.told.has(target))
        this.log(`no local function consumes sync target ${JSON.stringify(target)}; its sync requests are dropped`);
      this.told.add(target);
      return;
    }
    for (const r of requests) await queue.enqueue(JSON.stringify(r), groupOf(r), syncDeduplicationId(r));
  }
}
