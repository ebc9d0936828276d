// One function as a long-lived process of its own, fed from a queue on the test bed's ElasticMQ as Lambda's SQS
// event source mapping feeds it in AWS: batches of up to 10 records whose eventSourceARN names the queue, the
// batch's failures left on the queue (the handler sets their backoff), the rest deleted. Its module state
// (policy caches, clients) lives as long as the process, as in a warm Lambda container, and is its own: tests
// that run the forwarder, the router and a controller this way see the races separate containers have in AWS.
//   node test/testbed/event-source.ts <function> <queue url>
// The handler's environment is the process's: OUTRIGGER_CLUSTERS, OUTRIGGER_TABLE, OUTRIGGER_DYNAMODB_ENDPOINT,
// OUTRIGGER_QUEUE_URL_PREFIX, and AWS_ENDPOINT_URL_SQS for ElasticMQ (the SDK reads it). Stops on SIGTERM.
// With OUTRIGGER_TEST_TAP set, every message body received is appended to that file, one per line (the canary
// tests search every message that crossed a queue).
import { appendFile } from 'node:fs/promises';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse } from 'aws-lambda';
import { functions } from '../../functions/index.ts';
import { invokeAsLambda } from '../../runtime/lambda-context.ts';
import { loadHandler } from '../../runtime/load-handler.ts';
import { asRecord } from '../integration/sqs-records.ts';

const [name, url] = process.argv.slice(2);
const spec = functions.find((f) => f.name === name);
if (!spec || !url) {
  process.stderr.write(
    `usage: node test/testbed/event-source.ts <function> <queue url>; functions: ${functions.map((f) => f.name).join(', ')}\n`,
  );
  process.exit(2);
}
const handler = await loadHandler(spec);
const sqs = new SQSClient({});
// The ARN Lambda would put on each record; the router and the dead-letter sink read the queue's name from it.
const arn = `arn:aws:sqs:local:000000000000:${url.slice(url.lastIndexOf('/') + 1)}`;
let running = true;
process.on('SIGTERM', () => (running = false));
process.stderr.write(`[event-source] ${name} consuming ${url}\n`);
while (running) {
  const got = await sqs.send(
    new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageSystemAttributeNames: ['All'] }),
  );
  const messages = got.Messages ?? [];
  if (!messages.length) continue;
  if (process.env.OUTRIGGER_TEST_TAP) await appendFile(process.env.OUTRIGGER_TEST_TAP, messages.map((m) => `${m.Body}\n`).join(''));
  let failed: Set<string>;
  try {
    const result = (await invokeAsLambda(spec, handler, { Records: messages.map((m) => asRecord(m, arn)) })) as
      SQSBatchResponse | undefined;
    failed = new Set((result?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
  } catch (err) {
    // A thrown invocation leaves the whole batch on the queue, to come back after its visibility timeout.
    process.stderr.write(`[event-source] ${name} invocation failed: ${String(err)}\n`);
    continue;
  }
  const done = messages.filter((m) => !failed.has(m.MessageId!));
  if (done.length)
    await sqs.send(
      new DeleteMessageBatchCommand({ QueueUrl: url, Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })) }),
    );
}
process.exit(0);
