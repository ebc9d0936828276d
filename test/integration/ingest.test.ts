// The ingest function as a Function URL invokes it, against the test bed's ElasticMQ: what it accepts lands on
// the events queue with the message group and deduplication id the router relies on; what it refuses lands on
// the dead-letter queue with its reason, and nothing of it on the events queue.
import { randomUUID } from 'node:crypto';
import { CreateQueueCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { SqsEventQueue, createIngestHandler, type IngestDeps } from '../../functions/ingest/handler.ts';
import { deduplicationId, makeEnvelope, messageGroupId, type Envelope } from '../../shared/envelope/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import { SqsDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { testQueue, uniqueName } from '../testbed/index.ts';

const context: Context = {
  callbackWaitsForEmptyEventLoop: false,
  functionName: 'outrigger-ingest',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:outrigger-ingest',
  memoryLimitInMB: '512',
  awsRequestId: 'test',
  logGroupName: '/aws/lambda/outrigger-ingest',
  logStreamName: 'test',
  getRemainingTimeInMillis: () => 30_000,
  done: () => {},
  fail: () => {},
  succeed: () => {},
};

/** A Function URL request (payload format 2.0), with the body base64-encoded as the URL does for binary content types when asked. */
function urlEvent(body: string, opts: { headers?: Record<string, string>; cluster?: string; base64?: boolean } = {}): APIGatewayProxyEventV2 {
  const now = Date.now();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/',
    rawQueryString: opts.cluster ? `cluster=${opts.cluster}` : '',
    headers: { 'content-type': 'application/json', host: 'abc.lambda-url.eu-west-1.on.aws', ...opts.headers },
    ...(opts.cluster ? { queryStringParameters: { cluster: opts.cluster } } : {}),
    requestContext: {
      accountId: '111122223333',
      apiId: 'abc',
      domainName: 'abc.lambda-url.eu-west-1.on.aws',
      domainPrefix: 'abc',
      http: { method: 'POST', path: '/', protocol: 'HTTP/1.1', sourceIp: '10.0.0.1', userAgent: 'Go-http-client/1.1' },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: new Date(now).toISOString(),
      timeEpoch: now,
    },
    body: opts.base64 ? Buffer.from(body).toString('base64') : body,
    isBase64Encoded: opts.base64 ?? false,
  };
}

const pod = (uid: string, owner?: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: `p-${uid}`, namespace: 'shop', uid, resourceVersion: '12', ...(owner ? { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: owner, controller: true }] } : {}) },
});

async function drain(sqs: SQSClient, url: string): Promise<Message[]> {
  const out: Message[] = [];
  for (;;) {
    const r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageSystemAttributeNames: ['All'], MessageAttributeNames: ['All'] }));
    if (!r.Messages?.length) return out;
    out.push(...r.Messages);
  }
}

async function setup(deps: Partial<IngestDeps> = {}) {
  const events = await testQueue('ingest-events');
  // As the stack makes it: FIFO, deduplicated by content (SqsDeadLetterSink names only the message group).
  const created = await events.sqs.send(new CreateQueueCommand({ QueueName: `${uniqueName('ingest-dlq')}.fifo`, Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'true' } }));
  const deadLetterUrl = created.QueueUrl!;
  const handler = createIngestHandler(() => ({
    clusters: new Set(['prod', 'staging']),
    events: new SqsEventQueue(events.url, events.sqs),
    deadLetter: new SqsDeadLetterSink(deadLetterUrl, events.sqs),
    ...deps,
  }));
  const invoke = async (event: APIGatewayProxyEventV2) => {
    const res = (await handler(event, context)) as APIGatewayProxyStructuredResultV2;
    return { status: res.statusCode, body: JSON.parse(res.body ?? '{}') as Record<string, unknown> };
  };
  return { sqs: events.sqs, eventsUrl: events.url, deadLetterUrl, invoke };
}

describe('the ingest function', () => {
  test('queues a Knative ApiServerSource event (binary mode) as our envelope, grouped by controller, with its deduplication id', async () => {
    const { sqs, eventsUrl, deadLetterUrl, invoke } = await setup();
    const object = pod('pod-1', 'sts-1');
    const res = await invoke(
      urlEvent(JSON.stringify(object), {
        cluster: 'prod',
        base64: true,
        headers: { 'ce-specversion': '1.0', 'ce-id': 'k-1', 'ce-source': 'https://10.96.0.1:443', 'ce-type': 'dev.knative.apiserver.resource.update', 'ce-time': '2026-11-22T09:00:00Z' },
      }),
    );
    expect(res).toEqual({ status: 202, body: { accepted: 1, envelopes: 0, knative: 1 } });
    const [message, ...rest] = await drain(sqs, eventsUrl);
    expect(rest).toEqual([]);
    const expected = makeEnvelope({ cluster: 'prod', type: 'modified', object, source: 'https://10.96.0.1:443', time: new Date('2026-11-22T09:00:00Z') });
    expect(JSON.parse(message!.Body!)).toEqual(expected);
    expect(message!.Attributes).toMatchObject({ MessageGroupId: 'prod/sts-1', MessageDeduplicationId: deduplicationId(expected) });
    expect(await drain(sqs, deadLetterUrl)).toEqual([]);
  });

  test('queues a batch of our envelopes beyond one SQS batch, and a resent batch is deduplicated', async () => {
    const { sqs, eventsUrl, invoke } = await setup();
    const batch: Envelope[] = Array.from({ length: 12 }, (_, i) => makeEnvelope({ cluster: i % 2 ? 'prod' : 'staging', type: 'added', object: pod(`u-${i}`), source: 'outrigger://test' }));
    expect(await invoke(urlEvent(JSON.stringify(batch)))).toEqual({ status: 202, body: { accepted: 12, envelopes: 12, knative: 0 } });
    expect(await invoke(urlEvent(JSON.stringify(batch)))).toEqual({ status: 202, body: { accepted: 12, envelopes: 12, knative: 0 } });
    const messages = await drain(sqs, eventsUrl);
    expect(messages.map((m) => m.Attributes!.MessageGroupId).sort()).toEqual(batch.map(messageGroupId).sort());
    expect(messages.map((m) => JSON.parse(m.Body!) as Envelope).sort((a, b) => a.id.localeCompare(b.id))).toEqual([...batch].sort((a, b) => a.id.localeCompare(b.id)));
  });

  test('refuses a Reference-mode event: 422 naming the problem, the event in the dead-letter queue with its reason, nothing queued', async () => {
    const { sqs, eventsUrl, deadLetterUrl, invoke } = await setup();
    const ref = { apiVersion: 'v1', kind: 'Pod', name: 'p', namespace: 'shop' };
    const res = await invoke(urlEvent(JSON.stringify(ref), { cluster: 'prod', headers: { 'ce-specversion': '1.0', 'ce-id': 'k-2', 'ce-source': 'https://10.96.0.1:443', 'ce-type': 'dev.knative.apiserver.ref.add' } }));
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(/^invalid ingest request: type: is dev\.knative\.apiserver\.ref\.add, an ApiServerSource event in mode Reference/);
    expect(await drain(sqs, eventsUrl)).toEqual([]);
    const [letter, ...more] = await drain(sqs, deadLetterUrl);
    expect(more).toEqual([]);
    expect(JSON.parse(letter!.Body!)).toEqual({ specversion: '1.0', id: 'k-2', source: 'https://10.96.0.1:443', type: 'dev.knative.apiserver.ref.add', datacontenttype: 'application/json', data: ref });
    expect(letter!.MessageAttributes!.reason!.StringValue).toBe(res.body.error);
    expect(letter!.MessageAttributes!.source!.StringValue).toBe('ingest');
  });

  test('refuses a batch for an unknown cluster whole: every event dead-lettered, none queued', async () => {
    const { sqs, eventsUrl, deadLetterUrl, invoke } = await setup();
    const batch = [makeEnvelope({ cluster: 'prod', type: 'added', object: pod('a'), source: 's' }), makeEnvelope({ cluster: 'qa', type: 'added', object: pod('b'), source: 's' })];
    const res = await invoke(urlEvent(JSON.stringify(batch)));
    expect(res).toEqual({ status: 422, body: { error: 'invalid ingest request: [1].cluster: "qa" is not a cluster this deployment serves (prod, staging)', deadLettered: 2 } });
    expect(await drain(sqs, eventsUrl)).toEqual([]);
    const letters = await drain(sqs, deadLetterUrl);
    expect(letters.map((l) => [JSON.parse(l.Body!) as Envelope, l.MessageAttributes!.reason!.StringValue])).toEqual([
      [batch[0], `not queued: refused with the rest of its request (${String(res.body.error)})`],
      [batch[1], res.body.error],
    ]);
  });

  test('answers 503 when the events queue fails, so that the sender retries', async () => {
    const other = await testQueue('ingest-gone');
    const { invoke } = await setup({ events: new SqsEventQueue(other.url.replace(/\.fifo$/, '-missing.fifo'), other.sqs) });
    const res = await invoke(urlEvent(JSON.stringify(makeEnvelope({ cluster: 'prod', type: 'added', object: pod('c'), source: 's' }))));
    expect(res.status).toBe(503);
    expect(res.body.error).toMatch(/retry/);
  });
});
