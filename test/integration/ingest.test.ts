// The ingest function as a Function URL invokes it, against the test bed's ElasticMQ: what it accepts lands on
// the events queue of the cluster each event names (queues named as the stack names them), with the message
// group and deduplication id the router relies on; what it refuses lands on the ingest's dead-letter queue with
// its reason, and nothing of it on any events queue.
import { createHash } from 'node:crypto';
import { CreateQueueCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyStructuredResultV2, Context, LambdaFunctionURLEventWithIAMAuthorizer } from 'aws-lambda';
import { SqsEventQueue, createIngestHandler, type IngestDeps } from '../../functions/ingest/handler.ts';
import { deduplicationId, makeEnvelope, messageGroupId, type Envelope } from '../../shared/envelope/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import { SqsDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { EVENTS_QUEUE, QueueUrls, queueName } from '../../shared/lambda/queues.ts';
import { ingestClustersOf } from '../../shared/clusters.ts';
import { sendFifoMessages } from '../../shared/lambda/sqs.ts';
import { testQueue, uniqueName } from '../testbed/index.ts';
import { SIGNER, SIGNER_ROLE, functionUrlEvent } from './function-url.ts';

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

/** The UUID an apiserver would have given the object called `name` here. */
const uuidOf = (name: string) =>
  createHash('sha256')
    .update(name)
    .digest('hex')
    .slice(0, 32)
    .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');

const pod = (name: string, owner?: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name: `p-${name}`,
    namespace: 'shop',
    uid: uuidOf(name),
    resourceVersion: '12',
    ...(owner
      ? { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: uuidOf(owner), controller: true }] }
      : {}),
  },
});

async function drain(sqs: SQSClient, url: string): Promise<Message[]> {
  const out: Message[] = [];
  for (;;) {
    const r = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    if (!r.Messages?.length) return out;
    out.push(...r.Messages);
  }
}

const CLUSTERS = ['prod', 'staging'] as const;

async function setup(deps: Partial<IngestDeps> = {}) {
  const { sqs, url } = await testQueue('ingest');
  // A deployment of its own: each cluster's events queue, named as the stack names it (`<stack>-<cluster>-events.fifo`).
  const stack = uniqueName('ingest');
  const queues = new QueueUrls(`${url.slice(0, url.lastIndexOf('/') + 1)}${stack}-`);
  for (const c of CLUSTERS)
    await sqs.send(new CreateQueueCommand({ QueueName: `${stack}-${queueName(c, EVENTS_QUEUE)}`, Attributes: { FifoQueue: 'true' } }));
  const eventsUrl = Object.fromEntries(CLUSTERS.map((c) => [c, queues.url(c, EVENTS_QUEUE)])) as Record<(typeof CLUSTERS)[number], string>;
  // As the stack makes it: FIFO, deduplicated by content (SqsDeadLetterSink names only the message group).
  const created = await sqs.send(
    new CreateQueueCommand({
      QueueName: `${uniqueName('ingest-dlq')}.fifo`,
      Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'true' },
    }),
  );
  const deadLetterUrl = created.QueueUrl!;
  // The signer may speak for both clusters (each names it in ingestPrincipals).
  const configs = CLUSTERS.map((id) => ({ id, ingestPrincipals: [SIGNER_ROLE] }));
  const handler = createIngestHandler(() => ({
    clusters: new Set(CLUSTERS),
    allowed: (caller) => ingestClustersOf(configs, caller),
    events: new SqsEventQueue((cluster) => queues.url(cluster, EVENTS_QUEUE), sqs),
    deadLetter: new SqsDeadLetterSink(deadLetterUrl, sqs),
    ...deps,
  }));
  const invoke = async (event: LambdaFunctionURLEventWithIAMAuthorizer) => {
    const res = (await handler(event, context)) as APIGatewayProxyStructuredResultV2;
    return { status: res.statusCode, body: JSON.parse(res.body ?? '{}') as Record<string, unknown> };
  };
  /** Every events queue's messages. */
  const drainEvents = async () => (await Promise.all(CLUSTERS.map((c) => drain(sqs, eventsUrl[c])))).flat();
  return { sqs, eventsUrl, drainEvents, deadLetterUrl, invoke };
}

describe('the ingest function', () => {
  test("queues a Knative ApiServerSource event (binary mode) as our envelope on its cluster's events queue, grouped by controller, with its deduplication id", async () => {
    const { sqs, eventsUrl, deadLetterUrl, invoke } = await setup();
    const object = pod('pod-1', 'sts-1');
    const res = await invoke(
      functionUrlEvent(JSON.stringify(object), {
        cluster: 'prod',
        base64: true,
        headers: {
          'ce-specversion': '1.0',
          'ce-id': 'k-1',
          'ce-source': 'https://10.96.0.1:443',
          'ce-type': 'dev.knative.apiserver.resource.update',
          'ce-time': '2026-11-22T09:00:00Z',
        },
      }),
    );
    expect(res).toEqual({ status: 202, body: { accepted: 1, envelopes: 0, knative: 1, refused: 0 } });
    const [message, ...rest] = await drain(sqs, eventsUrl.prod);
    expect(rest).toEqual([]);
    expect(await drain(sqs, eventsUrl.staging)).toEqual([]);
    const expected = makeEnvelope({
      cluster: 'prod',
      type: 'modified',
      object,
      source: 'https://10.96.0.1:443',
      time: new Date('2026-11-22T09:00:00Z'),
    });
    expect(JSON.parse(message!.Body!)).toEqual(expected);
    expect(message!.Attributes).toMatchObject({
      MessageGroupId: `prod/${uuidOf('sts-1')}`,
      MessageDeduplicationId: deduplicationId(expected, 'ingest'),
    });
    expect(await drain(sqs, deadLetterUrl)).toEqual([]);
  });

  test('queues a batch of our envelopes beyond one SQS batch, each on the events queue of the cluster it names, and a resent batch is deduplicated', async () => {
    const { sqs, eventsUrl, invoke } = await setup();
    const batch: Envelope[] = Array.from({ length: 24 }, (_, i) =>
      makeEnvelope({ cluster: i % 2 ? 'prod' : 'staging', type: 'added', object: pod(`u-${i}`), source: 'outrigger://test' }),
    );
    expect(await invoke(functionUrlEvent(JSON.stringify(batch)))).toEqual({
      status: 202,
      body: { accepted: 24, envelopes: 24, knative: 0, refused: 0 },
    });
    expect(await invoke(functionUrlEvent(JSON.stringify(batch)))).toEqual({
      status: 202,
      body: { accepted: 24, envelopes: 24, knative: 0, refused: 0 },
    });
    const byId = (a: Envelope, b: Envelope) => a.id.localeCompare(b.id);
    for (const c of CLUSTERS) {
      const mine = batch.filter((e) => e.cluster === c);
      const messages = await drain(sqs, eventsUrl[c]);
      expect(messages.map((m) => m.Attributes!.MessageGroupId).sort()).toEqual(mine.map(messageGroupId).sort());
      expect(messages.map((m) => JSON.parse(m.Body!) as Envelope).sort(byId)).toEqual([...mine].sort(byId));
    }
  });

  test('refuses a Reference-mode event: 422 naming the problem, the event in the dead-letter queue with its reason, nothing queued', async () => {
    const { sqs, drainEvents, deadLetterUrl, invoke } = await setup();
    const ref = { apiVersion: 'v1', kind: 'Pod', name: 'p', namespace: 'shop' };
    const res = await invoke(
      functionUrlEvent(JSON.stringify(ref), {
        cluster: 'prod',
        headers: {
          'ce-specversion': '1.0',
          'ce-id': 'k-2',
          'ce-source': 'https://10.96.0.1:443',
          'ce-type': 'dev.knative.apiserver.ref.add',
        },
      }),
    );
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(
      /^invalid ingest request: type: is dev\.knative\.apiserver\.ref\.add, an ApiServerSource event in mode Reference/,
    );
    expect(await drainEvents()).toEqual([]);
    const [letter, ...more] = await drain(sqs, deadLetterUrl);
    expect(more).toEqual([]);
    expect(JSON.parse(letter!.Body!)).toEqual({
      specversion: '1.0',
      id: 'k-2',
      source: 'https://10.96.0.1:443',
      type: 'dev.knative.apiserver.ref.add',
      datacontenttype: 'application/json',
      data: ref,
    });
    expect(letter!.MessageAttributes!.reason!.StringValue).toBe(res.body.error);
    expect(letter!.MessageAttributes!.source!.StringValue).toBe('ingest');
  });

  test("queues a batch's events for clusters it serves, and dead-letters with its reason the one for a cluster it does not", async () => {
    const { sqs, eventsUrl, deadLetterUrl, invoke } = await setup();
    const batch = [
      makeEnvelope({ cluster: 'prod', type: 'added', object: pod('a'), source: 's' }),
      makeEnvelope({ cluster: 'qa', type: 'added', object: pod('b'), source: 's' }),
    ];
    const res = await invoke(functionUrlEvent(JSON.stringify(batch)));
    const problem = 'invalid ingest request: [1].cluster: "qa" is not a cluster this deployment serves (prod, staging)';
    expect(res).toEqual({ status: 202, body: { accepted: 1, envelopes: 1, knative: 0, refused: 1, problem, deadLettered: 1 } });
    expect((await drain(sqs, eventsUrl.prod)).map((m) => JSON.parse(m.Body!) as Envelope)).toEqual([batch[0]]);
    const letters = await drain(sqs, deadLetterUrl);
    expect(letters.map((l) => [JSON.parse(l.Body!) as Envelope, l.MessageAttributes!.reason!.StringValue])).toEqual([[batch[1], problem]]);
  });

  test("binds the caller to its clusters: a signer named by prod's ingestPrincipals only is refused (403) for staging, and an unnamed one for any, before its request is read and with no dead letter", async () => {
    const { sqs, drainEvents, deadLetterUrl, invoke } = await setup({
      allowed: (caller) => ingestClustersOf([{ id: 'prod', ingestPrincipals: [SIGNER_ROLE] }, { id: 'staging' }], caller),
    });
    const forStaging = makeEnvelope({ cluster: 'staging', type: 'added', object: pod('s'), source: 's' });
    const res = await invoke(functionUrlEvent(JSON.stringify(forStaging)));
    expect(res).toEqual({
      status: 403,
      body: {
        error: `invalid ingest request: cluster: is "staging", a cluster whose ingestPrincipals do not name the caller ${SIGNER} (it may for prod)`,
        deadLettered: 1,
      },
    });
    const stranger = 'arn:aws:sts::111122223333:assumed-role/someone-else/x';
    const knativeRes = await invoke(
      functionUrlEvent(JSON.stringify(pod('k')), {
        caller: stranger,
        cluster: 'prod',
        headers: { 'ce-specversion': '1.0', 'ce-id': 'k-9', 'ce-source': 's', 'ce-type': 'dev.knative.apiserver.resource.add' },
      }),
    );
    expect(knativeRes).toEqual({
      status: 403,
      body: {
        error: `invalid ingest request: (caller): ${stranger} is named by no served cluster's ingestPrincipals, so it may send no events`,
        deadLettered: 0,
      },
    });
    expect(await drainEvents()).toEqual([]);
    expect((await drain(sqs, deadLetterUrl)).map((l) => l.MessageAttributes!.reason!.StringValue)).toEqual([res.body.error]);
  });

  test("queues the envelope under the id its (cluster, uid, resourceVersion, type) make, not the sender's: a sender cannot make SQS drop a future event as its duplicate", async () => {
    const { sqs, eventsUrl, invoke } = await setup();
    const object = pod('f');
    const next = makeEnvelope({
      cluster: 'prod',
      type: 'modified',
      object: { ...object, metadata: { ...object.metadata, resourceVersion: '13' } },
      source: 's',
    });
    // The sender claims the id of the object's next change.
    const forged = { ...makeEnvelope({ cluster: 'prod', type: 'modified', object, source: 's' }), id: next.id };
    expect((await invoke(functionUrlEvent(JSON.stringify(forged)))).status).toBe(202);
    expect((await invoke(functionUrlEvent(JSON.stringify(next)))).status).toBe(202);
    expect((await drain(sqs, eventsUrl.prod)).map((m) => (JSON.parse(m.Body!) as Envelope).id)).toEqual([
      `prod/${uuidOf('f')}/12/modified`,
      next.id,
    ]);
  });

  test('a message SQS refuses fails alone: SendMessageBatch answers per entry, and the others of its batch are queued', async () => {
    const { sqs, url } = await testQueue('ingest-entries');
    const good = (i: number) => ({ body: `{"n":${i}}`, group: 'g', dedup: `d${i}` });
    // A message group id beyond SQS's alphabet (alphanumerics and punctuation).
    const failures = await sendFifoMessages(sqs, url, [good(1), { body: '{"n":2}', group: 'g r\u00fcn', dedup: 'd2' }, good(3)]);
    expect(failures.map((f) => [f.message.dedup, f.senderFault])).toEqual([['d2', true]]);
    expect((await drain(sqs, url)).map((m) => m.Body)).toEqual(['{"n":1}', '{"n":3}']);
  });

  test('refuses a Knative event for an unknown ?cluster= whole, to the dead-letter queue with its reason', async () => {
    const { sqs, drainEvents, deadLetterUrl, invoke } = await setup();
    const res = await invoke(
      functionUrlEvent(JSON.stringify(pod('k')), {
        cluster: 'qa',
        headers: { 'ce-specversion': '1.0', 'ce-id': 'k-3', 'ce-source': 's', 'ce-type': 'dev.knative.apiserver.resource.add' },
      }),
    );
    expect(res).toEqual({
      status: 422,
      body: { error: 'invalid ingest request: ?cluster: "qa" is not a cluster this deployment serves (prod, staging)', deadLettered: 1 },
    });
    expect(await drainEvents()).toEqual([]);
    expect((await drain(sqs, deadLetterUrl)).map((l) => l.MessageAttributes!.reason!.StringValue)).toEqual([res.body.error]);
  });

  test('answers 503 when the events queue fails, so that the sender retries', async () => {
    const other = await testQueue('ingest-gone');
    const { invoke } = await setup({ events: new SqsEventQueue(() => other.url.replace(/\.fifo$/, '-missing.fifo'), other.sqs) });
    const res = await invoke(
      functionUrlEvent(JSON.stringify(makeEnvelope({ cluster: 'prod', type: 'added', object: pod('c'), source: 's' }))),
    );
    expect(res.status).toBe(503);
    expect(res.body.error).toMatch(/retry/);
  });
});
