// The router against the real apiserver: batches with malformed and failing records, deduplication, and the
// whole path in the local runtime (watch, envelope, router, sync queue, controller handler).
/* eslint-disable max-lines -- the router scenarios share the StatefulSet source, the queue names and the record and createStatefulSet helpers below, which every batch is built from */
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import type { ControllerSource } from '../../functions/controllers.ts';
import { routeBatch } from '../../functions/router/route.ts';
import { createRouterHandler } from '../../functions/router/handler.ts';
import { startRuntime, type Runtime, type RuntimeFunction } from '../../runtime/local.ts';
import { Clusters } from '../../shared/clusters.ts';
import { deduplicationId, makeEnvelope, messageGroupId, type Envelope } from '../../shared/envelope/index.ts';
import { Resources, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { syncBatchHandler } from '../../shared/lambda/batch.ts';
import { MemoryDeadLetterSink, SqsDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { environment } from '../../shared/lambda/environment.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { newControllerRef, type LabelSelector } from '../../shared/ownership/index.ts';
import { forgetPolicies, historySource, listPolicies, policyFor, revisionPolicies } from '../../functions/history/policies.ts';
import { forgetMapControllers, listMapControllers, mapControllerFor, mapControllers, mapSource } from '../../functions/map/controllers.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { forgetDiscovery } from '../../shared/kube/index.ts';
import {
  adminClient,
  createNamespace,
  eventually,
  outriggerClient,
  testbed,
  testCluster,
  testQueue,
  uniqueName,
} from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { asRecord, drain } from './sqs-records.ts';
import { EVENTS_QUEUE, QueueUrls } from '../../shared/lambda/queues.ts';
import { SqsSyncSink } from '../../shared/lambda/sync-sink.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');

const source: ControllerSource = {
  target: 'test-controller',
  kinds: async () => [
    {
      resource: statefulSets,
      kind: 'StatefulSet',
      namespaced: true,
      selectorOf: (p) => (p.spec as { selector?: LabelSelector }).selector,
      target: 'test-controller',
    },
  ],
  watches: async () => [statefulSets, Resources.controllerRevisions],
};

async function createStatefulSet(namespace: string, name: string, labels: Record<string, string>): Promise<KubeObject> {
  return adminClient().create(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, namespace },
    spec: {
      serviceName: name,
      replicas: 0,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'registry.example/app:1' }] } },
    },
  });
}

/** Queues named as a deployment `rt-` names them: a record's cluster is the one whose events queue it came from. */
const QUEUES = new QueueUrls('http://localhost/000000000000/rt-');
const queueCluster = (arn: string) => QUEUES.clusterOf(arn, EVENTS_QUEUE);
const eventsArn = (cluster: string) => `arn:aws:sqs:local:000000000000:${QUEUES.name(cluster, EVENTS_QUEUE)}`;

function record(body: string, groupId: string, id: string, cluster = 'it'): SQSRecord {
  return {
    messageId: id,
    receiptHandle: id,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '0',
      SenderId: 't',
      ApproximateFirstReceiveTimestamp: '0',
      MessageGroupId: groupId,
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: eventsArn(cluster),
    awsRegion: 'local',
  };
}

class MemorySyncSink implements SyncSink {
  readonly sent: Array<{ target: string; request: SyncRequest }> = [];
  async send(target: string, requests: SyncRequest[]): Promise<void> {
    for (const request of requests) this.sent.push({ target, request });
  }
}

describe('routeBatch', () => {
  test('dead-letters malformed records, fails a broken group in order, and sends each key once', async () => {
    const ns = await createNamespace('router');
    const labels = { app: 'r' };
    const sts = await createStatefulSet(ns, 'web', labels);
    const child = (name: string, owned: boolean): KubeObject => ({
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: {
        name,
        namespace: ns,
        uid: randomUUID(),
        resourceVersion: '1',
        labels,
        ...(owned ? { ownerReferences: [newControllerRef(sts)] } : {}),
      },
    });
    const env = (cluster: string, obj: KubeObject): Envelope => makeEnvelope({ cluster, type: 'added', object: obj, source: 'test' });
    const orphan = env('it', child('a', false));
    const owned = env('it', child('b', true));
    const unknownCluster1 = env('elsewhere', child('c', false));
    const unknownCluster2 = env('elsewhere', { ...child('c', false), metadata: { ...child('c', false).metadata, resourceVersion: '2' } });
    const event: SQSEvent = {
      Records: [
        record(JSON.stringify(orphan), messageGroupId(orphan), 'm1'),
        record('{"specversion":"1.0"}', 'g-bad', 'm2'),
        record(JSON.stringify(unknownCluster1), messageGroupId(unknownCluster1), 'm3', 'elsewhere'),
        record(JSON.stringify(owned), messageGroupId(owned), 'm4'),
        record(JSON.stringify(unknownCluster2), messageGroupId(unknownCluster2), 'm5', 'elsewhere'),
      ],
    };
    const sink = new MemorySyncSink();
    const deadLetter = new MemoryDeadLetterSink();
    const clusters = new Clusters([testCluster('it')]);
    const out = await routeBatch(event, { clusters, sources: [source], sink, deadLetter: () => deadLetter, queueCluster });

    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm3' }, { itemIdentifier: 'm5' }]);
    expect(deadLetter.letters).toEqual([
      expect.objectContaining({ source: 'router', reason: expect.stringMatching(/^invalid event envelope: id: /) }),
    ]);
    // Both good events lead to the one StatefulSet: one sync request, with both causes.
    expect(sink.sent).toEqual([
      {
        target: 'test-controller',
        request: {
          type: 'dev.outrigger.sync',
          key: { cluster: 'it', group: 'apps', kind: 'StatefulSet', namespace: ns, name: 'web', uid: sts.metadata.uid },
          causes: [`ControllerRevision/${orphan.id}`, `ControllerRevision/${owned.id}`],
        },
      },
    ]);
    expect(out.stats).toMatchObject({ records: 5, deadLettered: 1, failed: 2, keys: 1, gets: 1, lists: 1 });
  });
});

describe('an event of a kind no definition names', () => {
  test('reads the definitions again at most once per cluster every few seconds, whatever the batches; meanwhile such an event is retried, not dropped', async () => {
    // Forged events of a made-up kind, one per batch: each made the router read every definition again (for each
    // MapController a discovery read and access reviews).
    let forgotten = 0;
    const counting: ControllerSource = { ...source, forget: () => void (forgotten += 1) };
    const unknown = (rv: number) =>
      makeEnvelope({
        cluster: 'it',
        type: 'added',
        object: {
          apiVersion: 'forged.example/v1',
          kind: 'Nothing',
          metadata: { name: 'x', namespace: 'default', uid: randomUUID(), resourceVersion: String(rv) },
        },
        source: 'test',
      });
    const clusters = new Clusters([testCluster('it')]);
    const reloads = new Map<string, number>();
    let now = 1_000_000;
    const route = (e: Envelope, id: string) =>
      routeBatch(
        { Records: [record(JSON.stringify(e), messageGroupId(e), id)] },
        {
          clusters,
          sources: [counting],
          sink: new MemorySyncSink(),
          deadLetter: () => new MemoryDeadLetterSink(),
          queueCluster,
          reloads,
          now: () => now,
        },
      );
    expect((await route(unknown(1), 'm1')).batchItemFailures).toEqual([]);
    expect(forgotten).toBe(1);
    for (let i = 2; i <= 5; i++) {
      now += 1_000;
      expect((await route(unknown(i), `m${i}`)).batchItemFailures).toEqual([{ itemIdentifier: `m${i}` }]);
    }
    expect(forgotten).toBe(1);
    now += 1_000;
    expect((await route(unknown(6), 'm6')).batchItemFailures).toEqual([]);
    expect(forgotten).toBe(2);
  });
});

describe('a kind that observes its parents and checks ControllerRef uids itself (history)', () => {
  test("a parent's own event carries its object without managed fields; a child's event is keyed by its ControllerRef, with no read", async () => {
    const ns = await createNamespace('router');
    const labels = { app: 'o' };
    const sts = await createStatefulSet(ns, 'web', labels);
    const observing: ControllerSource = {
      target: 'observer',
      kinds: async () => [
        {
          resource: statefulSets,
          kind: 'StatefulSet',
          namespaced: true,
          selectorOf: () => ({ matchLabels: labels }),
          target: 'observer',
          owns: [{ group: 'apps', kind: 'ControllerRevision' }],
          observe: ({ metadata: { managedFields: _, ...metadata }, ...rest }) => ({ ...rest, metadata }),
          checksRefUid: true,
        },
      ],
      watches: async () => [statefulSets, Resources.controllerRevisions],
    };
    const revision = (uid: string): KubeObject => ({
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: {
        name: 'web-1',
        namespace: ns,
        uid: randomUUID(),
        resourceVersion: '7',
        ownerReferences: [{ ...newControllerRef(sts), uid }],
      },
    });
    const gone = randomUUID();
    const envelopes = [
      makeEnvelope({ cluster: 'it', type: 'modified', object: { ...sts, apiVersion: 'apps/v1', kind: 'StatefulSet' }, source: 'test' }),
      makeEnvelope({ cluster: 'it', type: 'added', object: revision(sts.metadata.uid!), source: 'test' }),
      // A ControllerRef to a parent that no longer exists: keyed all the same; the handler finds the uid gone.
      makeEnvelope({ cluster: 'it', type: 'added', object: revision(gone), source: 'test' }),
    ];
    const sink = new MemorySyncSink();
    const clusters = new Clusters([testCluster('it')]);
    const out = await routeBatch(
      { Records: envelopes.map((e, i) => record(JSON.stringify(e), messageGroupId(e), `m${i}`)) },
      { clusters, sources: [observing], sink, deadLetter: () => new MemoryDeadLetterSink(), queueCluster },
    );
    expect(out.stats).toMatchObject({ failed: 0, keys: 2, gets: 0, lists: 0 });
    const [own, other] = sink.sent.map((s) => s.request);
    expect(own?.key.uid).toBe(sts.metadata.uid);
    expect(own?.causes).toHaveLength(2);
    expect(own?.observed?.metadata).toMatchObject({ uid: sts.metadata.uid, resourceVersion: sts.metadata.resourceVersion, name: 'web' });
    expect(sts.metadata.managedFields).toBeDefined();
    expect(own?.observed?.metadata).not.toHaveProperty('managedFields');
    expect(other).toMatchObject({ key: { name: 'web', uid: gone } });
    expect(other).not.toHaveProperty('observed');
  });
});

describe('a kind with several controllers', () => {
  // A kind of its own, which both a RevisionPolicy and a MapController take as their parent.
  const duals = gvr('router.outrigger.test', 'v1', 'duals');
  const MANIFESTS = `
${openCrd('router.outrigger.test', 'Dual', 'duals')}---
${controllersGrant('outrigger-router-duals-test', [`{ apiGroups: ["router.outrigger.test"], resources: ["duals"], verbs: ["get", "list", "watch"] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: router-duals }
spec:
  target: { apiVersion: router.outrigger.test/v1, kind: Dual }
  targetState: [spec.template]
  generated: { apiVersion: v1, kind: Pod }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: router-duals }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: router.outrigger.test/v1, resource: duals }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks:
    map: { webhook: { url: "http://127.0.0.1:9/map" } }
`;

  afterAll(async () => {
    await adminClient()
      .delete(revisionPolicies, { name: 'router-duals' })
      .catch(() => undefined);
    await adminClient()
      .delete(mapControllers, { name: 'router-duals' })
      .catch(() => undefined);
  });

  test("each controller of the parent's kind gets the parent's own events, and each gets its own children's", async () => {
    await applyManifests(adminClient(), MANIFESTS);
    await applyManifests(adminClient(), MAP_TEST_IDENTITY);
    const kube = outriggerClient();
    // Both controllers are in effect once discovery serves the new kind.
    await eventually(async () => {
      forgetPolicies();
      forgetMapControllers();
      forgetDiscovery(kube);
      const [policies, maps] = await Promise.all([listPolicies(kube, 'it'), listMapControllers(kube, 'it')]);
      return (
        policyFor(policies, 'router.outrigger.test', 'Dual') !== undefined &&
        mapControllerFor(maps, 'router.outrigger.test', 'Dual') !== undefined
      );
    });
    const ns = await createNamespace('router-dual');
    const dual: KubeObject = {
      ...(await adminClient().create<KubeObject>(duals, {
        apiVersion: 'router.outrigger.test/v1',
        kind: 'Dual',
        metadata: { name: 'd', namespace: ns },
        spec: { template: { a: 1 } },
      })),
      apiVersion: 'router.outrigger.test/v1',
      kind: 'Dual',
    };
    const owned = (apiVersion: string, kind: string, name: string): KubeObject => ({
      apiVersion,
      kind,
      metadata: { name, namespace: ns, uid: randomUUID(), resourceVersion: '1', ownerReferences: [newControllerRef(dual)] },
    });
    const clusters = new Clusters([testCluster('it')]);
    const targets = async (object: KubeObject) => {
      const envelope = makeEnvelope({ cluster: 'it', type: 'added', object, source: 'test' });
      const sink = new MemorySyncSink();
      await routeBatch(
        { Records: [record(JSON.stringify(envelope), messageGroupId(envelope), 'm1')] },
        { clusters, sources: [historySource, mapSource], sink, deadLetter: () => new MemoryDeadLetterSink(), queueCluster },
      );
      expect(sink.sent.every((s) => s.request.key.uid === dual.metadata.uid)).toBe(true);
      return sink.sent.map((s) => s.target).sort();
    };
    expect(await targets(dual)).toEqual(['history', 'map']);
    expect(await targets(owned('apps/v1', 'ControllerRevision', 'd-rev'))).toEqual(['history']);
    expect(await targets(owned('v1', 'Pod', 'd-0'))).toEqual(['history']);
    expect(await targets(owned('v1', 'ConfigMap', 'd-out'))).toEqual(['map']);
  }, 60_000);
});

/** The `added` event of a ControllerRevision `sts` controls: routed to `sts`. */
const ownedRevision = (sts: KubeObject): Envelope =>
  makeEnvelope({
    cluster: 'it',
    type: 'added',
    object: {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: {
        name: 'g',
        namespace: sts.metadata.namespace,
        uid: randomUUID(),
        resourceVersion: '1',
        ownerReferences: [newControllerRef(sts)],
      },
    },
    source: 'test',
  });

describe('dead letters on a real queue', () => {
  test('a malformed, an oversized and an unknown-type event reach the dead-letter queue with their reasons; their batch-mates are routed', async () => {
    const ns = await createNamespace('router-dlq');
    const sts = await createStatefulSet(ns, 'web', { app: 'd' });
    const good = ownedRevision(sts);
    const oversized = JSON.stringify({ ...good, id: 'big', data: { object: { ...good.data.object, padding: 'x'.repeat(300 * 1024) } } });
    const unknownType = JSON.stringify({ ...good, id: 'bookmark', type: 'dev.outrigger.watch.bookmark' });
    const event: SQSEvent = {
      Records: [
        record('{"specversion":', 'g1', 'm1'),
        record(oversized, 'g2', 'm2'),
        record(unknownType, 'g3', 'm3'),
        record(JSON.stringify(good), messageGroupId(good), 'm4'),
      ],
    };
    const dlq = await testQueue('router-dlq');
    const sink = new MemorySyncSink();
    const clusters = new Clusters([testCluster('it')]);
    const out = await routeBatch(event, {
      clusters,
      sources: [source],
      sink,
      deadLetter: () => new SqsDeadLetterSink(dlq.url, dlq.sqs),
      queueCluster,
    });
    expect(out.batchItemFailures).toEqual([]);
    expect(sink.sent.map((s) => s.request.key.name)).toEqual(['web']);
    const letters: Array<{ reason: string; source: string; bytes: number }> = [];
    while (letters.length < 3) {
      const got = await dlq.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: dlq.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }),
      );
      for (const m of got.Messages ?? [])
        letters.push({
          reason: m.MessageAttributes?.reason?.StringValue ?? '',
          source: m.MessageAttributes?.source?.StringValue ?? '',
          bytes: (m.Body ?? '').length,
        });
      if (got.Messages?.length)
        await dlq.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: dlq.url,
            Entries: got.Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
          }),
        );
    }
    expect(letters.map((l) => l.reason).sort()).toEqual([
      expect.stringMatching(
        /^invalid event envelope: \(envelope\): is 3\d{5} bytes, over the 262144-byte limit \[the dead letter holds the first 258048 of 3\d{5} bytes\]$/,
      ),
      expect.stringMatching(/^invalid event envelope: \(envelope\): is not JSON/),
      expect.stringMatching(/^invalid event envelope: type: /),
    ]);
    expect(letters.every((l) => l.source === 'router')).toBe(true);
  });
});

describe('a dead letter that cannot be sent', () => {
  test('fails its record (and its message group) alone: the records beside it are routed, and the batch is answered', async () => {
    const ns = await createNamespace('router-dlq-down');
    const sts = await createStatefulSet(ns, 'web', { app: 'dd' });
    const good = ownedRevision(sts);
    const down = {
      send: async () => {
        throw new Error('SQS is unavailable');
      },
    };
    const sink = new MemorySyncSink();
    const out = await routeBatch(
      {
        Records: [
          record('{"specversion":', 'g-bad', 'm1'),
          record('{"specversion":', 'g-bad', 'm2'),
          record(JSON.stringify(good), messageGroupId(good), 'm3'),
        ],
      },
      { clusters: new Clusters([testCluster('it')]), sources: [source], sink, deadLetter: () => down, queueCluster },
    );
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
    expect(sink.sent.map((s) => s.request.key.name)).toEqual(['web']);
    expect(out.stats).toMatchObject({ records: 3, deadLettered: 0, failed: 2, keys: 1 });
  });
});

/** A deployment's queues on ElasticMQ for `clusters`, named as the stack names them: events, the test controller's sync queue, and their dead-letter queues. */
async function deploymentQueues(clusters: readonly string[]) {
  const { sqs, url } = await testQueue('router-deployment');
  const queues = new QueueUrls(`${url.slice(0, url.lastIndexOf('/') + 1)}${uniqueName('rq')}-`);
  for (const c of clusters) {
    for (const q of [EVENTS_QUEUE, source.target]) {
      for (const dlq of [false, true])
        await sqs.send(
          new CreateQueueCommand({
            QueueName: queues.name(c, q, dlq),
            Attributes: { FifoQueue: 'true', ...(dlq ? { ContentBasedDeduplication: 'true' } : {}) },
          }),
        );
    }
  }
  const arn = async (c: string) =>
    (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queues.url(c, EVENTS_QUEUE), AttributeNames: ['QueueArn'] }))).Attributes!
      .QueueArn!;
  /** What a forwarder sends: the envelope, its message group and deduplication id, on `cluster`'s events queue. */
  const send = async (cluster: string, envelope: Envelope) =>
    sqs.send(
      new SendMessageCommand({
        QueueUrl: queues.url(cluster, EVENTS_QUEUE),
        MessageBody: JSON.stringify(envelope),
        MessageGroupId: messageGroupId(envelope),
        MessageDeduplicationId: deduplicationId(envelope, 'forwarder'),
      }),
    );
  /** Routes what `cluster`'s events queue holds, as the router's event source mapping of that queue would. */
  const route = async (cluster: string) => {
    const queueArn = await arn(cluster);
    const records = (await drain(sqs, queues.url(cluster, EVENTS_QUEUE), 1)).map((m) => asRecord(m, queueArn));
    const kube = new Clusters(clusters.map(testCluster));
    return routeBatch(
      { Records: records },
      {
        clusters: kube,
        sources: [source],
        sink: new SqsSyncSink(queues, sqs),
        deadLetter: () => new SqsDeadLetterSink(queues, sqs),
        queueCluster: (a) => queues.clusterOf(a, EVENTS_QUEUE),
      },
    );
  };
  return { sqs, queues, send, route, receive: (c: string, q: string, dlq = false) => drain(sqs, queues.url(c, q, dlq)) };
}

describe('the cluster an event speaks for', () => {
  test("is its events queue's: an envelope on cluster a's queue naming cluster b is dead-lettered with that reason, and nothing reaches b's queues", async () => {
    const ns = await createNamespace('router-forged');
    const sts = await createStatefulSet(ns, 'web', { app: 'f' });
    const revision = (name: string): KubeObject => ({
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name, namespace: ns, uid: randomUUID(), resourceVersion: '1', ownerReferences: [newControllerRef(sts)] },
    });
    const d = await deploymentQueues(['a', 'b']);
    // Cluster a's forwarder role may send only to a's events queue; it says its event is b's.
    const forged = makeEnvelope({ cluster: 'b', type: 'added', object: revision('forged'), source: 'outrigger://a/forwarder' });
    const own = makeEnvelope({ cluster: 'a', type: 'added', object: revision('own'), source: 'outrigger://a/forwarder' });
    await d.send('a', forged);
    await d.send('a', own);

    const out = await d.route('a');

    expect(out.batchItemFailures).toEqual([]);
    expect(out.stats).toMatchObject({ records: 2, deadLettered: 1, keys: 1 });
    expect(await d.receive('b', source.target)).toEqual([]);
    const synced = (await d.receive('a', source.target)).map((m) => JSON.parse(m.Body!) as SyncRequest);
    expect(synced.map((r) => [r.key.cluster, r.key.name, r.causes])).toEqual([['a', 'web', [`ControllerRevision/${own.id}`]]]);
    const letters = await d.receive('a', EVENTS_QUEUE, true);
    expect(letters.map((l) => [l.Body, l.MessageAttributes?.reason?.StringValue, l.MessageAttributes?.source?.StringValue])).toEqual([
      [
        JSON.stringify(forged),
        'invalid event envelope: cluster: is "b", but the envelope came from the events queue of cluster "a", which speaks only for that cluster',
        'router',
      ],
    ]);
  });
});

describe('the router in the local runtime', () => {
  let runtime: Runtime;
  const synced: SyncRequest[] = [];
  const specs: RuntimeFunction[] = [
    {
      name: 'router',
      description: 'router',
      entry: 'functions/router/handler.ts',
      timeoutSeconds: 30,
      events: { resources: source.watches },
      clusterAccess: 'controllers',
      handler: createRouterHandler([source]),
    },
    {
      name: 'test-controller',
      description: 'records sync requests',
      entry: 'test/integration/router.test.ts',
      timeoutSeconds: 30,
      sync: { target: 'test-controller' },
      clusterAccess: 'controllers',
      handler: syncBatchHandler({
        source: 'test-controller',
        deadLetter: () => environment().deadLetter,
        process: async (request) => {
          synced.push(request);
        },
      }),
    },
  ];

  beforeAll(async () => {
    runtime = await startRuntime({
      kubeconfig: testbed().kubeconfigs.outrigger,
      clusterId: 'rt',
      stateDir: await mkdtemp(join(tmpdir(), 'outrigger-router-')),
      functions: specs,
    });
    await runtime.settled();
  }, 120_000);
  afterAll(async () => {
    await runtime?.stop();
  });

  test('parent changes, matching orphans and owned children all reach the parent’s handler as sync requests', async () => {
    const ns = await createNamespace('e2e');
    const labels = { app: 'e2e' };
    const sts = await createStatefulSet(ns, 'db', labels);
    const kube = outriggerClient();
    await kube.create(Resources.controllerRevisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: 'orphan', namespace: ns, labels },
      data: {},
      revision: 1,
    });
    await kube.create(Resources.controllerRevisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      // Outrigger's kind label: a controlled revision without it is another controller's history, which
      // would make every file's StatefulSet policy report ForeignHistory while it exists on the shared bed.
      metadata: {
        name: 'owned',
        namespace: ns,
        labels: { other: 'x', 'outrigger.dev/parent-kind': 'statefulset.apps' },
        ownerReferences: [newControllerRef(sts)],
      },
      data: {},
      revision: 1,
    });
    await kube.create(Resources.controllerRevisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: 'stranger', namespace: ns, labels: { app: 'other' } },
      data: {},
      revision: 1,
    });
    const deadline = Date.now() + 20_000;
    const mine = () => synced.filter((r) => r.key.namespace === ns);
    // Three events for the parent (its own creation, the orphan, the owned child): at least one sync, all for it.
    while (mine().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await runtime.settled();
    expect(mine().length).toBeGreaterThan(0);
    expect(new Set(mine().map((r) => `${r.key.kind}/${r.key.name}/${r.key.uid}`))).toEqual(new Set([`StatefulSet/db/${sts.metadata.uid}`]));
    const causes = mine().flatMap((r) => r.causes);
    expect(causes.some((c) => c.includes(sts.metadata.uid!))).toBe(true);
    expect(causes.filter((c) => !c.includes(sts.metadata.uid!))).toHaveLength(2); // orphan + owned, not the stranger
  });
});
