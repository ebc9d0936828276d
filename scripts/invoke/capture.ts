// Sync requests the function sends, captured rather than sent (OUTRIGGER_QUEUE_URL_PREFIX unset): in AWS they
// would go to the controllers' queues (each cluster's), which exist only in a deployment. Each target's are
// saved as the SQS event that would deliver them, to invoke that target with next.
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { queueName } from '../../shared/lambda/queues.ts';

/** What the stack's queue names start with (its name, `Outrigger`, and a dash); the sample events' queues have it too. */
const CAPTURE_QUEUE_PREFIX = 'Outrigger-';

interface Captured {
  target: string;
  /** The queue it was sent to (its cluster's queue for the target). */
  queue: string;
  body: string;
  groupId: string | undefined;
  deduplicationId: string | undefined;
}

/**
 * An SQS endpoint on loopback that accepts SendMessage(Batch) and keeps the messages. The function's SQS client
 * sends to it because it sends to the host of the queue URL it is given (the SDK's default for SQS).
 */
export class SyncCapture {
  /** OUTRIGGER_QUEUE_URL_PREFIX: the capture's queues are named as a stack named `Outrigger` names its own. */
  prefix = '';
  endpoint = '';
  /** Queue URL -> the sync target and queue name it stands for (each cluster's queue for each target). */
  private queues = new Map<string, { target: string; queue: string }>();
  readonly messages: Captured[] = [];
  private readonly server: Server = createServer((req, res) => void this.handle(req, res));

  static async start(targets: string[], clusters: string[]): Promise<SyncCapture> {
    const capture = new SyncCapture();
    await new Promise<void>((ok) => capture.server.listen(0, '127.0.0.1', ok));
    const { port } = capture.server.address() as AddressInfo;
    capture.endpoint = `http://127.0.0.1:${port}`;
    capture.prefix = `${capture.endpoint}/000000000000/${CAPTURE_QUEUE_PREFIX}`;
    for (const t of targets)
      for (const c of clusters)
        capture.queues.set(`${capture.prefix}${queueName(c, t)}`, { target: t, queue: `${CAPTURE_QUEUE_PREFIX}${queueName(c, t)}` });
    return capture;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const action = String(req.headers['x-amz-target'] ?? '').replace(/^AmazonSQS\./, '');
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(body));
    };
    let input: { QueueUrl?: string; Entries?: SqsEntry[] } & SqsEntry;
    try {
      input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof input;
    } catch {
      reply(400, { __type: 'com.amazonaws.sqs#InvalidParameterValue', message: 'not JSON' });
      return;
    }
    const queue = this.queues.get(input.QueueUrl ?? '');
    if (!queue || (action !== 'SendMessage' && action !== 'SendMessageBatch')) {
      reply(400, {
        __type: 'com.amazonaws.sqs#InvalidAction',
        message: `the invoke capture takes SendMessage(Batch) to ${[...this.queues.keys()].join(', ')}; got ${action} to ${input.QueueUrl}`,
      });
      return;
    }
    const keep = (e: SqsEntry) => {
      this.messages.push({ ...queue, body: e.MessageBody, groupId: e.MessageGroupId, deduplicationId: e.MessageDeduplicationId });
      // The SDK checks the body's MD5 against the one returned.
      return {
        MessageId: randomUUID(),
        MD5OfMessageBody: md5(e.MessageBody),
        SequenceNumber: String(Date.now() * 1000 + this.messages.length),
      };
    };
    if (action === 'SendMessage') reply(200, keep(input));
    else reply(200, { Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, ...keep(e) })), Failed: [] });
  }

  stop(): Promise<void> {
    return new Promise((ok) => this.server.close(() => ok()));
  }
}

interface SqsEntry {
  Id?: string;
  MessageBody: string;
  MessageGroupId?: string;
  MessageDeduplicationId?: string;
}

const md5 = (s: string) => createHash('md5').update(s).digest('hex');

/** An SQS event of messages as Lambda's event source mappings deliver them (each from its own cluster's queue). */
export function sqsEvent(messages: Captured[]): { Records: unknown[] } {
  const now = Date.now();
  return {
    Records: messages.map((m, i) => {
      const messageId = randomUUID();
      return {
        messageId,
        receiptHandle: `local-${messageId}`,
        body: m.body,
        attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: String(now),
          SequenceNumber: String(now * 1000 + i),
          MessageGroupId: m.groupId ?? messageId,
          SenderId: 'outrigger-invoke',
          MessageDeduplicationId: m.deduplicationId ?? md5(m.body),
          ApproximateFirstReceiveTimestamp: String(now),
        },
        messageAttributes: {},
        md5OfBody: md5(m.body),
        eventSource: 'aws:sqs',
        eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${m.queue}`,
        awsRegion: 'us-east-1',
      };
    }),
  };
}
