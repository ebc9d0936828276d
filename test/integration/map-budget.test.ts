// A pass fits its invocation, and a failing parent is retried with backoff honouring the hook's Retry-After
// (docs/design/map-pass.md#a-pass-fits-its-invocation and docs/reference/hooks.md#the-webhook-contract). The map handler as Lambda runs it
// (syncFunction: the SQS batch, partial failures, the retry), on the real apiserver, DynamoDB Local and ElasticMQ,
// with a webhook server in this process whose answers each parent's test sets.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CreateQueueCommand, DeleteMessageCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { forgetMapControllers, listMapControllers, mapControllerFor, type MapControllerSet } from '../../functions/map/controllers.ts';
import { passTiming, serveMapRequest } from '../../functions/map/handler.ts';
import { Clusters } from '../../shared/clusters.ts';
import { HookError, Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import type { Environment } from '../../shared/lambda/environment.ts';
import { QueueUrls } from '../../shared/lambda/queues.ts';
import { sqsRetry } from '../../shared/lambda/retry.ts';
import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest, parseSyncRequest, type SyncRequest } from '../../shared/lambda/sync-request.ts';
import { SqsSyncSink } from '../../shared/lambda/sync-sink.ts';
import { PARENT_LABEL } from '../../shared/map/api.ts';
import { passBudgetMs } from '../../shared/map/plan/index.ts';
import { startLambdaEndpoint } from '../../local/lambda-endpoint.ts';
import { lambdaContext } from '../../runtime/lambda-context.ts';
import {
  adminClient,
  createNamespace,
  deleteMapControllersCalling,
  outriggerClient,
  testQueue,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';
import { asRecord } from './sqs-records.ts';

const GROUP = 'budget.outrigger.test';
const pacers = gvr(GROUP, 'v1', 'pacers');
const configMaps = gvr('', 'v1', 'configmaps');
const CLUSTER = 'it';
/** A Lambda context with `seconds` left, as the map function's invocation has. */
const runtimeLambdaContext = (seconds: number) => lambdaContext({ name: 'map', timeoutSeconds: seconds });

interface HookRequest {
  parent: KubeObject;
  input: KubeObject;
}
/** Per parent name: how its map hook answers (undefined: it never answers), and after how long. */
const answers = new Map<
  string,
  (req: HookRequest) => { status: number; headers?: Record<string, string>; body: unknown; afterMs?: number } | undefined
>();
/** Per parent name, each call: when, and for which input. */
const calls = new Map<string, Array<{ at: number; input: string }>>();

function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as HookRequest;
    const parent = body.parent.metadata.name ?? '';
    calls.set(parent, [...(calls.get(parent) ?? []), { at: Date.now(), input: body.input.metadata.name ?? '' }]);
    const answer = answers.get(parent)?.(body);
    if (!answer) return; // hangs: the caller's timeout ends it
    setTimeout(() => {
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(JSON.stringify(answer.body));
    }, answer.afterMs ?? 0);
  });
}

const copyOf = (req: HookRequest) => ({
  outputs: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${req.input.metadata.name}-copy` }, data: { v: 'copy' } }],
});

let server: Server;
let sqs: SQSClient;
let queueUrl: string;
let queues: QueueUrls;
let arn: string;
let lambdaHandler: (
  event: { Records: ReturnType<typeof asRecord>[] },
  context: ReturnType<typeof runtimeLambdaContext>,
) => Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }>;
let ns: string;

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(adminClient(), MAP_TEST_IDENTITY);
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'Pacer', 'pacers')}---
${controllersGrant('outrigger-map-budget-test', [
  `{ apiGroups: ["${GROUP}"], resources: ["pacers"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["pacers/status"], verbs: ["patch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
])}---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: budget-pacer }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: ${GROUP}/v1, resource: pacers }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks:
    map: { webhook: { url: "${url}/map" }, timeoutSeconds: 1, retries: 1 }
`,
  );
  const kube = outriggerClient();
  for (let i = 0; ; i += 1) {
    forgetMapControllers();
    forgetDiscovery(kube);
    if (mapControllerFor(await listMapControllers(kube, CLUSTER), GROUP, 'Pacer')) break;
    if (i > 100) throw new Error('no MapController for Pacer');
    await new Promise((r) => setTimeout(r, 200));
  }
  ({ sqs, url: queueUrl } = await testQueue('map-budget'));
  queues = new QueueUrls(`${queueUrl.slice(0, queueUrl.lastIndexOf('/') + 1)}${uniqueName('mb')}-`);
  queueUrl = (
    await sqs.send(
      new CreateQueueCommand({ QueueName: queues.name(CLUSTER, 'map'), Attributes: { FifoQueue: 'true', VisibilityTimeout: '60' } }),
    )
  ).QueueUrl!;
  arn = `arn:aws:sqs:elasticmq:000000000000:${queues.name(CLUSTER, 'map')}`;
  const env: Environment = {
    clusters: new Clusters([]),
    state: testState(),
    deadLetter: new MemoryDeadLetterSink(),
    syncSink: new SqsSyncSink(queues, sqs),
    queues,
    retry: sqsRetry(queues, sqs),
  };
  const hooks = new Hooks({ minRetryDelayMs: 50, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
  const controllers = clusterCache<MapControllerSet>(60_000);
  // The map handler as deployed, with the test's queue, table, identity and hook caller.
  lambdaHandler = syncFunction(
    'map',
    (request, tools) =>
      serveMapRequest(request, tools.sentAt, {
        kube,
        state: tools.env.state,
        syncSink: tools.env.syncSink,
        hooks,
        controllers,
        log: () => undefined,
        concurrency: 4,
        ...passTiming(tools),
      }),
    { environment: () => env },
  ) as unknown as typeof lambdaHandler;
  ns = await createNamespace('map-budget');
}, 60_000);

afterAll(async () => {
  await deleteMapControllersCalling(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

async function parentWithInputs(name: string, inputs: number): Promise<KubeObject> {
  await Promise.all(
    Array.from({ length: inputs }, (_, i) =>
      adminClient().create(configMaps, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `${name}-in-${String(i).padStart(2, '0')}`, namespace: ns, labels: { set: name } },
        data: { i: String(i) },
      } as KubeObject),
    ),
  );
  return adminClient().create(pacers, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Pacer',
    metadata: { name, namespace: ns },
    spec: { selector: { matchLabels: { set: name } } },
  } as KubeObject);
}

/** The handler, and what Lambda's event source mapping does after it: delete the messages that did not fail. */
async function handler(
  event: { Records: ReturnType<typeof asRecord>[] },
  context: ReturnType<typeof runtimeLambdaContext>,
): Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }> {
  const response = await lambdaHandler(event, context);
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  for (const r of event.Records)
    if (!failed.has(r.messageId)) await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: r.receiptHandle }));
  return response;
}

const requestFor = (p: KubeObject, causes: string[]): SyncRequest =>
  makeSyncRequest(
    { cluster: CLUSTER, group: GROUP, kind: 'Pacer', namespace: ns, name: p.metadata.name ?? '', uid: p.metadata.uid ?? '' },
    causes,
  );

async function send(requests: SyncRequest[]): Promise<void> {
  await new SqsSyncSink(queues, sqs).send('map', requests);
}

/** Receives until `count` messages of the parents named came (each group's head), waiting up to `timeoutMs`; others are left. */
async function receive(count: number, parents: readonly string[], timeoutMs = 15_000): Promise<Message[]> {
  const out: Message[] = [];
  for (const deadline = Date.now() + timeoutMs; out.length < count && Date.now() < deadline;) {
    const got = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageSystemAttributeNames: ['All'] }),
    );
    out.push(...(got.Messages ?? []).filter((m) => parents.includes(parseSyncRequest(m.Body ?? '').key.name)));
  }
  if (out.length < count) throw new Error(`${out.length} of ${count} message(s) came within ${timeoutMs} ms`);
  return out;
}

const synced = async (name: string) => {
  const p = await adminClient().get(pacers, { name, namespace: ns });
  return (
    p.status as { conditions?: Array<{ type: string; status: string; reason: string; message: string }> } | undefined
  )?.conditions?.find((c) => c.type === 'Synced');
};
const outputsOf = async (p: KubeObject) =>
  (await adminClient().listAll(configMaps, { namespace: ns, labelSelector: `${PARENT_LABEL}=${p.metadata.uid ?? ''}` })).length;

describe('a pass fits its invocation', () => {
  test('a hanging hook, many inputs, little time left: status for what was done, the rest in a follow-up, the other parent of the batch served', async () => {
    // Every fifth input answers at once; the others hang (each call: 1 s, then one retry of 1 s).
    const slow = await parentWithInputs('slow', 40);
    const quick = await parentWithInputs('quick', 3);
    answers.set('slow', (req) => (Number(req.input.metadata.name?.slice(-2)) % 5 === 0 ? { status: 200, body: copyOf(req) } : undefined));
    answers.set('quick', (req) => ({ status: 200, body: copyOf(req) }));
    await send([requestFor(slow, ['ConfigMap/event-slow']), requestFor(quick, ['ConfigMap/event-quick'])]);
    const messages = await receive(2, ['slow', 'quick']);
    const records = messages
      .map((m) => asRecord(m, arn))
      .sort((a, b) => (parseSyncRequest(a.body).key.name === 'slow' ? -1 : parseSyncRequest(b.body).key.name === 'slow' ? 1 : 0));

    // An invocation with 20 s left and two records: the first pass gets passBudgetMs(20 s, 1) = 7.5 s.
    const startedAt = Date.now();
    const response = await handler({ Records: records }, runtimeLambdaContext(20));
    const budgetMs = passBudgetMs(20_000, 1);
    // The quick parent's first hook call marks the end of the slow parent's pass (records run one after another).
    const slowPassMs = calls.get('quick')![0]!.at - startedAt;
    console.log(
      JSON.stringify({
        figure: 'slow pass vs budget',
        slowPassMs,
        budgetMs,
        invocationMs: Date.now() - startedAt,
        slowCalls: calls.get('slow')!.length,
      }),
    );

    // No other parent of the batch failed, nor the slow one: it continues in a follow-up.
    expect(response).toEqual({ batchItemFailures: [] });
    expect(slowPassMs).toBeGreaterThan(budgetMs - 1_500);
    expect(slowPassMs).toBeLessThan(budgetMs + 2_500);
    expect(await synced('quick')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(await outputsOf(quick)).toBe(3);

    // Status for what was done: the timeouts named, the outputs of the inputs that answered, the rest owed.
    const firstCalls = new Set(calls.get('slow')!.map((c) => c.input));
    const answered = [...firstCalls].filter((n) => Number(n.slice(-2)) % 5 === 0).length;
    expect(firstCalls.size).toBeLessThan(40);
    const condition = await synced('slow');
    expect(condition).toMatchObject({ status: 'False', reason: 'HookTimeout' });
    expect(condition!.message).toMatch(
      new RegExp(`; ${40 - firstCalls.size} input\\(s\\) not reached within the pass's time budget, continued by a follow-up pass$`),
    );
    expect(await outputsOf(slow)).toBe(answered);
    const status = (await adminClient().get(pacers, { name: 'slow', namespace: ns })).status as {
      inputs: { configmaps: { total: number } };
      outputs: { configmaps: { total: number } };
    };
    expect(status).toMatchObject({ inputs: { configmaps: { total: 40 } }, outputs: { configmaps: { total: answered } } });

    // The follow-up, for the same parent, goes on from where the pass stopped: each input not yet called, once.
    const [followUp] = await receive(1, ['slow']);
    const request = parseSyncRequest(followUp!.Body ?? '');
    expect(request.key.name).toBe('slow');
    expect(request.causes[0]).toMatch(/^continue\//);
    const before = calls.get('slow')!.length;
    const second = await handler({ Records: [asRecord(followUp!, arn)] }, runtimeLambdaContext(60));
    const secondCalls = new Set(
      calls
        .get('slow')!
        .slice(before)
        .map((c) => c.input),
    );
    expect([...secondCalls].filter((n) => firstCalls.has(n))).toEqual([]);
    expect(firstCalls.size + secondCalls.size).toBe(40);
    // The whole sync had problems: its message fails, and comes back after its backoff.
    console.log(
      JSON.stringify({
        figure: 'follow-up',
        inputsCalledFirst: firstCalls.size,
        inputsCalledInFollowUp: secondCalls.size,
        answeredFirst: answered,
      }),
    );
    expect(second).toEqual({ batchItemFailures: [{ itemIdentifier: followUp!.MessageId }] });
    expect(await outputsOf(slow)).toBe(8);
    await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: followUp!.ReceiptHandle }));
  }, 90_000);
});

describe('a pass fits its invocation, with a slow hook that answers', () => {
  test('the inputs not reached are InProgress; the follow-up maps them, calling each input once, and the parent is Synced', async () => {
    const p = await parentWithInputs('steady', 20);
    answers.set('steady', (req) => ({ status: 200, body: copyOf(req), afterMs: 600 }));
    await send([requestFor(p, ['ConfigMap/event-steady'])]);
    const [message] = await receive(1, ['steady']);
    // 8 s left, one record: a 3 s budget, in which 4 calls at a time of 0.6 s each start while 1 s is left (16
    // calls on an idle machine). 0.4 s short of the hook's 1 s timeout: a loaded machine's overhead on each call
    // stays inside it, so every call that starts answers (at 0.8 s, under a load average of 20, one did not).
    expect(await handler({ Records: [asRecord(message!, arn)] }, runtimeLambdaContext(8))).toEqual({ batchItemFailures: [] });
    const first = calls.get('steady')!.length;
    expect(first).toBeLessThan(20);
    expect(await synced('steady')).toMatchObject({
      status: 'False',
      reason: 'InProgress',
      message: `${first} of 20 input(s) mapped; ${20 - first} input(s) not reached within the pass's time budget, continued by a follow-up pass`,
    });
    expect(await outputsOf(p)).toBe(first);
    const [followUp] = await receive(1, ['steady']);
    expect(await handler({ Records: [asRecord(followUp!, arn)] }, runtimeLambdaContext(60))).toEqual({ batchItemFailures: [] });
    expect(new Set(calls.get('steady')!.map((c) => c.input)).size).toBe(20);
    expect(calls.get('steady')!.length).toBe(20);
    expect(await synced('steady')).toMatchObject({ status: 'True', reason: 'Synced', message: '20 input(s) mapped' });
    expect(await outputsOf(p)).toBe(20);
    // The sync is over: no further follow-up.
    expect(await receive(1, ['steady'], 3_000).catch(() => [])).toEqual([]);
  }, 60_000);
});

describe('per-parent backoff', () => {
  test('a webhook answering 503 with Retry-After: 3 is called again about 3 s later, not at the in-call or the default backoff', async () => {
    const p = await parentWithInputs('after', 1);
    let first = true;
    answers.set('after', (req) => {
      if (!first) return { status: 200, body: copyOf(req) };
      first = false;
      return { status: 503, headers: { 'retry-after': '3' }, body: { message: 'busy' } };
    });
    await send([requestFor(p, ['ConfigMap/event-after'])]);
    const [message] = await receive(1, ['after']);
    expect(await handler({ Records: [asRecord(message!, arn)] }, runtimeLambdaContext(60))).toEqual({
      batchItemFailures: [{ itemIdentifier: message!.MessageId }],
    });
    // Not retried within the call (retries: 1 would call again after 50 ms).
    expect(calls.get('after')!.length).toBe(1);
    expect(await synced('after')).toMatchObject({
      status: 'False',
      reason: 'HookHTTPError',
      message: expect.stringContaining('answered HTTP 503; it asked to be called again after 3 s'),
    });
    const [again] = await receive(1, ['after']);
    expect(again!.Attributes?.ApproximateReceiveCount).toBe('2');
    expect(await handler({ Records: [asRecord(again!, arn)] }, runtimeLambdaContext(60))).toEqual({ batchItemFailures: [] });
    const [t1, t2] = calls.get('after')!.map((c) => c.at);
    const gapSeconds = (t2! - t1!) / 1000;
    console.log(JSON.stringify({ figure: 'Retry-After gap', gapSeconds, defaultBackoffSeconds: 2 }));
    // The message's default backoff after a first failure is 2 s; a visibility is never shortened by ElasticMQ.
    expect(gapSeconds).toBeGreaterThanOrEqual(2.9);
    expect(gapSeconds).toBeLessThan(4.5);
    expect(await synced('after')).toMatchObject({ status: 'True' });
    expect(await outputsOf(p)).toBe(1);
  }, 60_000);

  test('a Lambda hook answering {retryAfterSeconds} is not called again within the call, and says when to come back', async () => {
    const endpoint = await startLambdaEndpoint(new Map([['busy-hook', async () => ({ retryAfterSeconds: 4 })]]));
    try {
      const hooks = new Hooks({ lambdaEndpoint: endpoint.url, region: 'local', minRetryDelayMs: 10 });
      const err = await hooks.call({ lambda: { functionName: 'busy-hook' }, timeoutSeconds: 5, retries: 2 }, {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HookError);
      expect(err).toMatchObject({
        reason: 'Unavailable',
        retryAfterSeconds: 4,
        message: 'lambda busy-hook asked to be called again after 4 s',
      });
      expect(endpoint.invocations.get('busy-hook')).toBe(1);
    } finally {
      await endpoint.stop();
    }
  });

  test("a call is clamped to the pass's deadline: a hook of 3 s × 3 attempts ends when the budget does", async () => {
    const hooks = new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/map`;
    answers.set('clamp', () => undefined);
    const started = Date.now();
    const err = await hooks
      .call(
        { webhook: { url }, timeoutSeconds: 3, retries: 2 },
        { parent: { metadata: { name: 'clamp' } }, input: { metadata: { name: 'x' } } },
        { deadline: started + 1_500 },
      )
      .catch((e: unknown) => e);
    const tookMs = Date.now() - started;
    expect(err).toMatchObject({ reason: 'Timeout', message: expect.stringContaining("what was left of the pass's time budget") });
    expect(tookMs).toBeGreaterThanOrEqual(1_400);
    expect(tookMs).toBeLessThan(2_500);
  });
});
