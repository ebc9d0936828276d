// The SQS client of a function, made on first use: most invocations send nothing (no dead letter, no sync
// request), and loading the SDK's SQS client at import costs every cold start about 100 ms. And the one way
// Outrigger sends FIFO messages in batches (the ingest function, the sync sink).
import type { SQSClient } from '@aws-sdk/client-sqs';

let client: Promise<SQSClient> | undefined;

export function sqsClient(): Promise<SQSClient> {
  return (client ??= import('@aws-sdk/client-sqs').then(({ SQSClient }) => new SQSClient({})));
}

/** SQS's limits on one SendMessageBatch: its entries, and the bytes of all their bodies together. */
export const BATCH_ENTRIES = 10;
export const BATCH_BYTES = 256 * 1024;

/** A FIFO message: its body, message group and deduplication id. */
export interface FifoMessage {
  body: string;
  group: string;
  dedup: string;
}

/**
 * Sends `messages` to one FIFO queue, in order, in as few batches as SQS's limits allow. Throws at the first
 * batch SQS refuses any of, naming `what` was refused; the caller retries the whole (deduplication ids make a
 * retry within five minutes queue nothing twice).
 */
export async function sendFifoMessages(sqs: SQSClient, queueUrl: string, messages: readonly FifoMessage[], what: string): Promise<void> {
  const { SendMessageBatchCommand } = await import('@aws-sdk/client-sqs');
  let batch: FifoMessage[] = [];
  let bytes = 0;
  const send = async () => {
    const out = await sqs.send(
      new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: batch.map((m, i) => ({ Id: String(i), MessageBody: m.body, MessageGroupId: m.group, MessageDeduplicationId: m.dedup })) }),
    );
    if (out.Failed?.length) throw new Error(`SQS refused ${out.Failed.length} ${what}: ${out.Failed.map((f) => `${f.Code ?? ''}: ${f.Message ?? ''}`).join('; ')}`);
  };
  for (const m of messages) {
    const size = Buffer.byteLength(m.body, 'utf8');
    if (batch.length === BATCH_ENTRIES || (batch.length > 0 && bytes + size > BATCH_BYTES)) {
      await send();
      batch = [];
      bytes = 0;
    }
    batch.push(m);
    bytes += size;
  }
  if (batch.length > 0) await send();
}
