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
 * A text SQS takes as a message body or attribute: the characters it refuses (controls, U+FFFE, U+FFFF, lone
 * surrogates; https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html) are
 * written as JSON `\u` escapes, which a JSON body reads back as the same string (outside a string no JSON holds them).
 */
export function sqsText(text: string): string {
  return text.replace(
    /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** A message SQS did not take, with its answer; `senderFault` says resending it cannot help. */
export interface FifoFailure {
  message: FifoMessage;
  code: string;
  reason: string;
  senderFault: boolean;
}

/**
 * Sends `messages` to one FIFO queue, in order, in as few batches as SQS's limits allow, and returns the ones SQS
 * did not take, each with SQS's own answer (SendMessageBatch answers per entry): one refused message never holds
 * back the others. Throws only when a whole call fails; the caller may retry the whole (deduplication ids make a
 * retry within five minutes queue nothing twice).
 */
export async function sendFifoMessages(sqs: SQSClient, queueUrl: string, messages: readonly FifoMessage[]): Promise<FifoFailure[]> {
  const { SendMessageBatchCommand } = await import('@aws-sdk/client-sqs');
  const failures: FifoFailure[] = [];
  let batch: Array<FifoMessage & { text: string }> = [];
  let bytes = 0;
  const send = async () => {
    const out = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((m, i) => ({ Id: String(i), MessageBody: m.text, MessageGroupId: m.group, MessageDeduplicationId: m.dedup })),
      }),
    );
    for (const f of out.Failed ?? []) {
      const { text: _, ...message } = batch[Number(f.Id)]!;
      failures.push({ message, code: f.Code ?? 'Unknown', reason: f.Message ?? '', senderFault: f.SenderFault ?? false });
    }
  };
  for (const m of messages) {
    const text = sqsText(m.body);
    const size = Buffer.byteLength(text, 'utf8');
    // Alone over the limit, it would fail the whole call it is in (BatchRequestTooLong), not only its entry.
    if (size > BATCH_BYTES) {
      failures.push({ message: m, code: 'MessageTooLong', reason: `is ${size} bytes, over SQS's ${BATCH_BYTES}`, senderFault: true });
      continue;
    }
    if (batch.length === BATCH_ENTRIES || (batch.length > 0 && bytes + size > BATCH_BYTES)) {
      await send();
      batch = [];
      bytes = 0;
    }
    batch.push({ ...m, text });
    bytes += size;
  }
  if (batch.length > 0) await send();
  return failures;
}

/** The failures as one line, for an error or a log. */
export function describeFailures(failures: readonly FifoFailure[]): string {
  return failures.map((f) => `${f.code}: ${f.reason}`).join('; ');
}
