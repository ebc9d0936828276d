// Where the router (and a handler that hands work on) sends sync requests: one queue per cluster and target
// (a controller handler). In AWS, the SQS FIFO queue of the request's cluster, named by the deployment's
// pattern (shared/lambda/queues.ts); locally, the runtime's queues.
import { createHash } from 'node:crypto';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { syncKeyString } from '../ownership/router.ts';
import { queueUrlsFromEnv, type QueueUrls } from './queues.ts';
import { describeFailures, sendFifoMessages, sqsClient } from './sqs.ts';
import { syncGroupId, type SyncRequest } from './sync-request.ts';

export interface SyncSink {
  /** `groupOf` replaces the FIFO group of each request (syncGroupId by default): a timer waits in a group of its own. */
  send(target: string, requests: SyncRequest[], groupOf?: (request: SyncRequest) => string): Promise<void>;
}

/**
 * Deduplicated per key, per cause and per kind of work: the same event routed twice (a redelivery) sends the same
 * id and SQS drops the copy; a later event for the same parent gets through, and so does a parent's truncation
 * queued after the sync of the same causes on the same queue.
 */
export function syncDeduplicationId(request: SyncRequest): string {
  const hash = createHash('sha256').update(syncKeyString(request.key)).update('\0').update(request.causes.join(','));
  if (request.truncate) hash.update('\0truncate');
  return hash.digest('hex');
}

export class SqsSyncSink implements SyncSink {
  private readonly client: SQSClient | undefined;
  private readonly queues: QueueUrls;
  constructor(queues: QueueUrls, client?: SQSClient) {
    this.queues = queues;
    this.client = client;
  }

  async send(
    target: string,
    requests: SyncRequest[],
    groupOf: (request: SyncRequest) => string = (r) => syncGroupId(r.key),
  ): Promise<void> {
    const client = this.client ?? (await sqsClient());
    // Each request to its own cluster's queue; a FIFO group is one cluster's, so order within it is kept.
    for (const [cluster, forCluster] of Map.groupBy(requests, (r) => r.key.cluster)) {
      const messages = forCluster.map((r) => ({ body: JSON.stringify(r), group: groupOf(r), dedup: syncDeduplicationId(r) }));
      const failed = await sendFifoMessages(client, this.queues.url(cluster, target), messages);
      if (failed.length > 0)
        throw new Error(`SQS refused ${failed.length} sync request(s) for ${target} of cluster ${cluster}: ${describeFailures(failed)}`);
    }
  }
}

export function syncSinkFromEnv(env: NodeJS.ProcessEnv = process.env): SyncSink {
  return new SqsSyncSink(queueUrlsFromEnv(env));
}
