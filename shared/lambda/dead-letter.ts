// Where a message goes when it can never be processed: with its reason, so that an operator can read why,
// fix the cause and redrive it. A malformed event is sent here at once instead of failing its batch.
import { appendFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { fitDeadLetter } from '../dead-letter-fit.ts';
import { queueUrlsFromEnv, type QueueUrls } from './queues.ts';
import { sqsClient, sqsText } from './sqs.ts';

export { DEAD_LETTER_BODY_BYTES, fitDeadLetter } from '../dead-letter-fit.ts';

export interface DeadLetter {
  body: string;
  reason: string;
  source: string;
  /** The queue the message was received from (its ARN), when it came from one: each queue has its own dead-letter queue. */
  queue?: string;
  at: string;
}

/**
 * The reason attribute: escaped as SQS needs (sqsText) and then cut, so that escapes never take it past its share
 * of the room DEAD_LETTER_BODY_BYTES leaves: 1,000 UTF-16 units are at most 3,000 bytes.
 */
function reasonAttribute(reason: string): string {
  const cut = sqsText(reason.slice(0, 1000)).slice(0, 1000);
  // A surrogate pair cut in half would leave a character SQS refuses.
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

export interface DeadLetterSink {
  send(letter: Omit<DeadLetter, 'at'>): Promise<void>;
}

/**
 * An SQS dead-letter queue; the reason travels as a message attribute, the body unchanged for redrive. Given a
 * deployment's queues instead of one URL, each letter goes to the dead-letter queue beside the queue its message
 * came from (a consumer reads one queue per cluster).
 */
export class SqsDeadLetterSink implements DeadLetterSink {
  private readonly client: SQSClient | undefined;
  private readonly queue: string | QueueUrls;
  constructor(queue: string | QueueUrls, client?: SQSClient) {
    this.queue = queue;
    this.client = client;
  }
  async send(whole: Omit<DeadLetter, 'at'>): Promise<void> {
    // Kept as received where SQS allows; a character it refuses is escaped (sqsText) rather than lose the letter,
    // before it is fitted, since escapes take more bytes.
    const letter = fitDeadLetter({ ...whole, body: sqsText(whole.body) });
    let queueUrl: string;
    if (typeof this.queue === 'string') queueUrl = this.queue;
    else if (letter.queue) queueUrl = this.queue.deadLetterOf(letter.queue);
    else
      throw new Error(
        `a dead letter from ${letter.source} names no queue it came from, so it has no dead-letter queue (reason: ${letter.reason})`,
      );
    const fifo = queueUrl.endsWith('.fifo');
    const { SendMessageCommand } = await import('@aws-sdk/client-sqs');
    await (this.client ?? (await sqsClient())).send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: letter.body,
        MessageAttributes: {
          reason: { DataType: 'String', StringValue: reasonAttribute(letter.reason) },
          source: { DataType: 'String', StringValue: letter.source },
        },
        // Deduplicated by content (a redelivered message dead-lettered twice is kept once); the id is named here
        // so that a queue without content-based deduplication takes it too.
        ...(fifo
          ? {
              MessageGroupId: 'dead-letter',
              MessageDeduplicationId: createHash('sha256').update(letter.body).update('\0').update(letter.reason).digest('hex'),
            }
          : {}),
      }),
    );
  }
}

/** The local runtime's dead-letter queue: one JSON line per letter. */
export class FileDeadLetterSink implements DeadLetterSink {
  private readonly path: string;
  constructor(path: string) {
    this.path = path;
  }
  async send(letter: Omit<DeadLetter, 'at'>): Promise<void> {
    await appendFile(this.path, `${JSON.stringify({ ...letter, at: new Date().toISOString() })}\n`);
  }
}

/** Keeps letters in memory; for tests and benchmarks. */
export class MemoryDeadLetterSink implements DeadLetterSink {
  readonly letters: DeadLetter[] = [];
  async send(letter: Omit<DeadLetter, 'at'>): Promise<void> {
    this.letters.push({ ...letter, at: new Date().toISOString() });
  }
}

/** One dead-letter queue, a file, or (a deployed consumer) the dead-letter queue beside each message's own queue. */
export function deadLetterSinkFromEnv(env: NodeJS.ProcessEnv = process.env): DeadLetterSink {
  if (env.OUTRIGGER_DEAD_LETTER_QUEUE_URL) return new SqsDeadLetterSink(env.OUTRIGGER_DEAD_LETTER_QUEUE_URL);
  if (env.OUTRIGGER_DEAD_LETTER_FILE) return new FileDeadLetterSink(env.OUTRIGGER_DEAD_LETTER_FILE);
  if (env.OUTRIGGER_QUEUE_URL_PREFIX) return new SqsDeadLetterSink(queueUrlsFromEnv(env));
  throw new Error(
    'no dead-letter destination: set OUTRIGGER_QUEUE_URL_PREFIX or OUTRIGGER_DEAD_LETTER_QUEUE_URL (AWS), or OUTRIGGER_DEAD_LETTER_FILE (local)',
  );
}
