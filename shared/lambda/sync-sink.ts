// Where the router sends sync requests: one queue per target (a controller handler). In AWS, SQS FIFO
// queues named by OUTRIGGER_SYNC_QUEUES (a JSON object: target -> queue URL); locally, the runtime's queues.
import { createHash } from 'node:crypto';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { syncKeyString } from '../ownership/router.ts';
import { sqsClient } from './sqs.ts';
import { syncGroupId, type SyncRequest } from './sync-request.ts';

export interface SyncSink {
  send(target: string, requests: SyncRequest[]): Promise<void>;
}

/**
 * Deduplicated per key and per cause: the same event routed twice (a redelivery) sends the same id and
 * SQS drops the copy; a later event for the same parent gets through.
 */
export function syncDeduplicationId(request: SyncRequest): string {
  return createHash('sha256').update(syncKeyString(request.key)).update('\0').update(request.causes.join(',')).digest('hex');
}

export class SqsSyncSink implements SyncSink {
  private readonly client: SQSClient | undefined;
  private readonly queues: Record<string, string>;
  constructor(queues: Record<string, string>, client?: SQSClient) {
    this.queues = queues;
    this.client = client;
  }

  async send(target: string, requests: SyncRequest[]): Promise<void> {
    const url = this.queues[target];
    if (!url) throw new Error(`no queue for sync target ${JSON.stringify(target)} (OUTRIGGER_SYNC_QUEUES names ${Object.keys(this.queues).join(', ') || 'none'})`);
    const { SendMessageBatchCommand } = await import('@aws-sdk/client-sqs');
    const client = this.client ?? (await sqsClient());
    for (let i = 0; i < requests.length; i += 10) {
      const chunk = requests.slice(i, i + 10);
      const out = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: chunk.map((r, j) => ({
            Id: String(j),
            MessageBody: JSON.stringify(r),
            MessageGroupId: syncGroupId(r.key),
            MessageDeduplicationId: syncDeduplicationId(r),
          })),
        }),
      );
      if (out.Failed?.length) throw new Error(`SQS refused ${out.Failed.length} sync request(s) for ${target}: ${out.Failed.map((f) => f.Message).join('; ')}`);
    }
  }
}

export function syncSinkFromEnv(env: NodeJS.ProcessEnv = process.env): SyncSink {
  const raw = env.OUTRIGGER_SYNC_QUEUES;
  if (!raw) throw new Error('OUTRIGGER_SYNC_QUEUES is not set');
  return new SqsSyncSink(JSON.parse(raw) as Record<string, string>);
}
