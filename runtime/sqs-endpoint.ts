// The local runtime's queues as an SQS endpoint on loopback, for functions that run in their Lambda containers
// (RuntimeOptions.lambdaContainers): what their SQS clients send reaches the runtime's queues as the in-process
// handlers' sends do. It answers the calls the functions make (shared/lambda/sync-sink.ts, dead-letter.ts,
// retry.ts): SendMessage(Batch) to a sync target's queue or to the dead-letter queue, and ChangeMessageVisibility
// of a message a queue delivered (the backoff of a failed one). Queue URLs are named as a deployment names its
// queues, under the prefix it hands the functions (OUTRIGGER_QUEUE_URL_PREFIX).
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DeadLetterSink } from '../shared/lambda/dead-letter.ts';
import { QueueUrls } from '../shared/lambda/queues.ts';
import type { LocalQueue } from './queue.ts';

/** The dead-letter queue's name after the prefix: every function's dead letters go to the runtime's sink. */
const DEAD_LETTER_QUEUE = 'dead-letter.fifo';

export interface SqsEndpoint {
  /** OUTRIGGER_QUEUE_URL_PREFIX for the functions. */
  prefix: string;
  /** OUTRIGGER_DEAD_LETTER_QUEUE_URL for the functions. */
  deadLetterUrl: string;
  /** Each queue's eventSourceARN, named as the prefix names its queue (the router reads its cluster from it). */
  arn(cluster: string, queue: string): string;
  close(): Promise<void>;
}

interface Entry {
  Id?: string;
  MessageBody: string;
  MessageGroupId?: string;
  MessageDeduplicationId?: string;
  MessageAttributes?: Record<string, { StringValue?: string }>;
}

interface Input extends Partial<Entry> {
  QueueUrl?: string;
  Entries?: Entry[];
  ReceiptHandle?: string;
  VisibilityTimeout?: number;
}

const md5 = (s: string) => createHash('md5').update(s).digest('hex');

/**
 * Serves `queues` (by sync target, for `cluster`) and `consumed` (by the queue name their records carry, whose
 * ChangeMessageVisibility sets a failed message's backoff); a sync request for a target no function here consumes
 * is dropped, as LocalSyncSink drops it.
 */
export async function startSqsEndpoint(opts: {
  cluster: string;
  queues: ReadonlyMap<string, LocalQueue>;
  consumed: ReadonlyMap<string, LocalQueue>;
  deadLetter: DeadLetterSink;
  log?: (message: string) => void;
}): Promise<SqsEndpoint> {
  let prefix = '';
  const told = new Set<string>();
  const name = (url: string | undefined) => (url ?? '').slice((url ?? '').lastIndexOf('/') + 1);
  /** The sync target of `<prefix><cluster>-<target>.fifo`. */
  const targetOf = (url: string | undefined): string | undefined => {
    const start = `${name(prefix)}${opts.cluster}-`;
    const queue = name(url);
    return queue.startsWith(start) && queue.endsWith('.fifo') ? queue.slice(start.length, -'.fifo'.length) : undefined;
  };

  const send = async (url: string | undefined, e: Entry) => {
    if (url === `${prefix}${DEAD_LETTER_QUEUE}`) {
      await opts.deadLetter.send({
        body: e.MessageBody,
        reason: e.MessageAttributes?.reason?.StringValue ?? 'no reason given',
        source: e.MessageAttributes?.source?.StringValue ?? 'unknown',
      });
      return;
    }
    const target = targetOf(url);
    const queue = target === undefined ? undefined : opts.queues.get(target);
    if (!queue) {
      if (!told.has(String(url))) opts.log?.(`no local function consumes ${String(url)}; what is sent there is dropped`);
      told.add(String(url));
      return;
    }
    await queue.enqueue(e.MessageBody, e.MessageGroupId ?? 'default', e.MessageDeduplicationId ?? md5(e.MessageBody));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(body));
    };
    const action = String(req.headers['x-amz-target'] ?? '').replace(/^AmazonSQS\./, '');
    let input: Input;
    try {
      input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Input;
    } catch {
      reply(400, { __type: 'com.amazonaws.sqs#InvalidParameterValue', message: 'the request is not JSON' });
      return;
    }
    try {
      if (action === 'SendMessage') {
        await send(input.QueueUrl, input as Entry);
        reply(200, { MessageId: randomUUID(), MD5OfMessageBody: md5(input.MessageBody ?? '') });
      } else if (action === 'SendMessageBatch') {
        const ok = [];
        for (const e of input.Entries ?? []) {
          await send(input.QueueUrl, e);
          ok.push({ Id: e.Id, MessageId: randomUUID(), MD5OfMessageBody: md5(e.MessageBody) });
        }
        reply(200, { Successful: ok, Failed: [] });
      } else if (action === 'ChangeMessageVisibility') {
        opts.consumed.get(name(input.QueueUrl))?.changeVisibility(input.ReceiptHandle ?? '', input.VisibilityTimeout ?? 0);
        reply(200, {});
      } else {
        reply(400, { __type: 'com.amazonaws.sqs#InvalidAction', message: `the local runtime's queues do not take ${action}` });
      }
    } catch (err) {
      reply(500, { __type: 'com.amazonaws.sqs#InternalError', message: String(err) });
    }
  };
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  prefix = `http://127.0.0.1:${port}/000000000000/outrigger-local-`;
  const queueUrls = new QueueUrls(prefix);
  return {
    prefix,
    deadLetterUrl: `${prefix}${DEAD_LETTER_QUEUE}`,
    arn: (cluster, queue) => `arn:aws:sqs:local:000000000000:${queueUrls.name(cluster, queue)}`,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
