// The router's sync requests, delivered to the local runtime's queues with the FIFO group and
// deduplication id an SQS FIFO queue would get.
import type { SyncRequest } from '../shared/lambda/sync-request.ts';
import { syncGroupId } from '../shared/lambda/sync-request.ts';
import { syncDeduplicationId, type SyncSink } from '../shared/lambda/sync-sink.ts';
import type { LocalQueue } from './queue.ts';

export class LocalSyncSink implements SyncSink {
  private readonly queues: ReadonlyMap<string, LocalQueue>;
  constructor(queues: ReadonlyMap<string, LocalQueue>) {
    this.queues = queues;
  }
  async send(target: string, requests: SyncRequest[]): Promise<void> {
    const queue = this.queues.get(target);
    if (!queue) throw new Error(`no local function consumes sync target ${JSON.stringify(target)}`);
    for (const r of requests) await queue.enqueue(JSON.stringify(r), syncGroupId(r.key), syncDeduplicationId(r));
  }
}
