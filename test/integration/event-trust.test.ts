// The trust boundary of events (docs/operations/security.md#events-are-triggers-not-state): whoever can put an
// envelope on a cluster's events queue, through the ingest URL (its signing proxy takes requests from any pod that
// reaches it) or straight onto the queue, chooses what the envelope's object says. Controller history must write
// only what the apiserver holds: a forged object is a trigger to read the parent, never the parent.
// The pipeline as deployed, on real servers: the ingest handler and the router on ElasticMQ's queues, the history
// sync (with its inline truncation, as the history handler runs it) on the apiserver and DynamoDB Local.
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { SqsEventQueue, createIngestHandler } from '../../functions/ingest/handler.ts';
import { historySource } from '../../functions/history/policies.ts';
import { resolveTarget } from '../../functions/history/policies.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { truncateSynced } from '../../functions/history/truncate.ts';
import { routeBatch } from '../../functions/router/route.ts';
import { Clusters, ingestClustersOf } from '../../shared/clusters.ts';
import { deduplicationId, makeEnvelope, messageGroupId, type Envelope } from '../../shared/envelope/index.ts';
import { forwarderKey, signEnvelope } from '../../shared/envelope/signature.ts';
import type { RevisionPolicy } from '../../shared/history/policy.ts';
import { PARENT_LABEL, sortRevisions, type ControllerRevision } from '../../shared/history/revisions.ts';
import { Resources, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { SqsDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { EVENTS_QUEUE, QueueUrls } from '../../shared/lambda/queues.ts';
import { observedParent, parseSyncRequest } from '../../shared/lambda/sync-request.ts';
import { SqsSyncSink } from '../../shared/lambda/sync-sink.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import { statefulSetPolicy } from '../testbed/policies.ts';
import { adminClient, createNamespace, outriggerClient, testCluster, testQueue, testState, uniqueName } from '../testbed/index.ts';
import { SIGNER_ROLE, functionUrlEvent } from './function-url.ts';
import { asRecord, drain } from './sqs-records.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const CLUSTER = 'it';
const HISTORY = 'history';
/** The deployment's secret, from which each cluster's forwarder key is derived. */
const SECRET = 'event-trust secret';
const ownKey = forwarderKey(SECRET, CLUSTER);
const kube = outriggerClient();
const state = testState();
let policy: RevisionPolicy;

beforeAll(async () => {
  policy = await statefulSetPolicy(kube, CLUSTER);
});

const context = { functionName: 'ingest', awsRequestId: 't', getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

/** The deployment's queues for the cluster on ElasticMQ, and the pipeline from its events queue to a history sync. */
async function pipeline(forwarderKeys = async (c: string): Promise<readonly string[]> => [forwarderKey(SECRET, c)]) {
  const { sqs, url } = await testQueue('trust');
  const queues = new QueueUrls(`${url.slice(0, url.lastIndexOf('/') + 1)}${uniqueName('tq')}-`);
  for (const q of [EVENTS_QUEUE, HISTORY])
    for (const dlq of [false, true])
      await sqs.send(
        new CreateQueueCommand({
          QueueName: queues.name(CLUSTER, q, dlq),
          Attributes: { FifoQueue: 'true', ...(dlq ? { ContentBasedDeduplication: 'true' } : {}) },
        }),
      );
  const ingestDlq = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: `${uniqueName('trust-ingest-dlq')}.fifo`,
        Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'true' },
      }),
    )
  ).QueueUrl!;
  const eventsArn = (
    await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queues.url(CLUSTER, EVENTS_QUEUE), AttributeNames: ['QueueArn'] }))
  ).Attributes!.QueueArn!;
  const configs = [{ id: CLUSTER, ingestPrincipals: [SIGNER_ROLE] }];
  const ingest = createIngestHandler(() => ({
    clusters: new Set([CLUSTER]),
    allowed: (caller) => ingestClustersOf(configs, caller),
    events: new SqsEventQueue((c) => queues.url(c, EVENTS_QUEUE), sqs),
    deadLetter: new SqsDeadLetterSink(ingestDlq, sqs),
  }));
  return {
    /** Posts envelopes to the ingest URL, as the signing proxy forwards any pod's request. */
    post: async (envelopes: Envelope[]) =>
      (await ingest(functionUrlEvent(JSON.stringify(envelopes)), context)) as APIGatewayProxyStructuredResultV2,
    /** Sends an envelope straight onto the events queue, as a holder of a role that may send there would. */
    send: (envelope: Envelope) =>
      sqs.send(
        new SendMessageCommand({
          QueueUrl: queues.url(CLUSTER, EVENTS_QUEUE),
          MessageBody: JSON.stringify(envelope),
          MessageGroupId: messageGroupId(envelope),
          MessageDeduplicationId: deduplicationId(envelope, 'forwarder'),
        }),
      ),
    /** Routes what the events queue holds, then runs each history sync request as the history handler does. */
    deliver: async (syncKube = kube) => {
      const records = (await drain(sqs, queues.url(CLUSTER, EVENTS_QUEUE), 1)).map((m) => asRecord(m, eventsArn));
      const routed = await routeBatch(
        { Records: records },
        {
          clusters: new Clusters([testCluster(CLUSTER)]),
          sources: [historySource],
          sink: new SqsSyncSink(queues, sqs),
          deadLetter: () => new SqsDeadLetterSink(queues, sqs),
          queueCluster: (a) => queues.clusterOf(a, EVENTS_QUEUE),
          forwarderKeys,
        },
      );
      expect(routed.batchItemFailures).toEqual([]);
      const requests = (await drain(sqs, queues.url(CLUSTER, HISTORY), 1)).map((m) => parseSyncRequest(m.Body!));
      const outcomes = [];
      for (const r of requests)
        outcomes.push(
          await syncHistory(handlerDeps(r.key, syncKube), policy, r.key, r.causes, observedParent(r), {
            targetChanged: r.targetChanged === true,
            observedSigned: r.observedSigned === true,
          }),
        );
      return outcomes;
    },
  };
}

/** The history handler's dependencies: truncation right after the sync, on the parent the sync decided on. */
const handlerDeps = (key: SyncKey, k: KubeClient = kube) => ({
  kube: k,
  state,
  holder: uniqueName('h'),
  truncate: async (
    revisions: Parameters<typeof truncateSynced>[3],
    quiet: boolean,
    seen: { generatedVersion?: string | undefined },
    parent: KubeObject,
  ) =>
    truncateSynced({ kube: k }, policy, key, revisions, { quiet, seen, parent }).then((t) => ({ deleted: t.deleted, gone: t.gone ?? [] })),
});

const keyOf = (obj: KubeObject): SyncKey => ({
  cluster: CLUSTER,
  group: 'apps',
  kind: 'StatefulSet',
  namespace: obj.metadata.namespace,
  name: obj.metadata.name!,
  uid: obj.metadata.uid!,
});
const ownCause = (obj: KubeObject) => [`StatefulSet/${CLUSTER}/${obj.metadata.uid}/${obj.metadata.resourceVersion}/modified`];

const template = (image: string) => ({ metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image }] } });

/** The parent's revisions, oldest first, as `<number>:<image>`. */
async function history(ns: string): Promise<string[]> {
  const list = await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns, labelSelector: `${PARENT_LABEL}=web` });
  return sortRevisions(list.items).map(
    (r) =>
      `${r.revision}:${(r.data as { spec: { template: { spec: { containers: Array<{ image: string }> } } } }).spec.template.spec.containers[0]!.image}`,
  );
}

/** A StatefulSet with two real revisions (app:1, app:2), synced as its own events would sync it. */
async function parentWithHistory(prefix: string): Promise<KubeObject> {
  const ns = await createNamespace(prefix);
  let sts = await adminClient().create<KubeObject>(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: ns },
    spec: { serviceName: 'web', replicas: 0, selector: { matchLabels: { app: 'web' } }, template: template('registry.example/app:1') },
  });
  await syncHistory(handlerDeps(keyOf(sts)), policy, keyOf(sts), ownCause(sts), sts);
  sts = await adminClient().patch(
    statefulSets,
    { name: 'web', namespace: ns },
    { spec: { template: template('registry.example/app:2') } },
    'merge',
  );
  await syncHistory(handlerDeps(keyOf(sts)), policy, keyOf(sts), ownCause(sts), sts);
  expect(await history(ns)).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);
  return sts;
}

/**
 * The audit's envelope: a `modified` event of the real parent (its uid, name and namespace) whose object carries
 * another image, a resourceVersion 100,000 ahead, a history limit of 0 and a selector that matches no pod.
 */
function forgedEnvelope(real: KubeObject): Envelope {
  const forged = structuredClone(real) as KubeObject & { spec: Record<string, unknown> };
  forged.metadata.resourceVersion = String(Number(real.metadata.resourceVersion) + 100_000);
  forged.metadata.annotations = { ...forged.metadata.annotations, 'outrigger.dev/revision-history-limit': '0' };
  forged.spec.template = template('attacker.example/backdoor:1');
  forged.spec.selector = { matchLabels: { forged: 'nothing' } };
  return makeEnvelope({ cluster: CLUSTER, type: 'modified', object: forged, source: `outrigger://${CLUSTER}/forwarder` });
}

describe('events are triggers, not state: a forged envelope writes no revision the apiserver does not hold', () => {
  test('through the ingest URL: it plants no revision and deletes none; the next real change is recorded as usual', async () => {
    const sts = await parentWithHistory('trust-ingest');
    const p = await pipeline();
    const res = await p.post([forgedEnvelope(sts)]);
    expect(res.statusCode).toBe(202);
    await p.deliver();
    expect(await history(sts.metadata.namespace!)).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);

    // The parent's next real change, through the same pipeline: a revision of what the apiserver holds, and the
    // policy's limit (10), not the forged one.
    const next = await adminClient().patch<KubeObject>(
      statefulSets,
      { name: 'web', namespace: sts.metadata.namespace },
      { spec: { template: template('registry.example/app:3') } },
      'merge',
    );
    await p.send(makeEnvelope({ cluster: CLUSTER, type: 'modified', object: next, source: `outrigger://${CLUSTER}/forwarder` }));
    await p.deliver();
    expect(await history(sts.metadata.namespace!)).toEqual([
      '1:registry.example/app:1',
      '2:registry.example/app:2',
      '3:registry.example/app:3',
    ]);
  }, 60_000);

  test('onto the events queue: it plants no revision and deletes none', async () => {
    const sts = await parentWithHistory('trust-queue');
    const p = await pipeline();
    await p.send(forgedEnvelope(sts));
    await p.deliver();
    expect(await history(sts.metadata.namespace!)).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);
  }, 60_000);
});

describe("the forwarder signature boundary: only the cluster's own forwarder's signed object is taken for the parent", () => {
  test("an envelope signed with another cluster's key plants no revision and deletes none", async () => {
    const sts = await parentWithHistory('trust-otherkey');
    const p = await pipeline();
    await p.send(signEnvelope(forwarderKey(SECRET, 'another-cluster'), forgedEnvelope(sts)));
    await p.deliver();
    expect(await history(sts.metadata.namespace!)).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);
  }, 60_000);

  test("the cluster's own valid signature over other content (the object swapped after signing) plants no revision and deletes none", async () => {
    const sts = await parentWithHistory('trust-swapped');
    const p = await pipeline();
    const forged = forgedEnvelope(sts);
    const signed = signEnvelope(ownKey, { ...forged, data: { object: sts } });
    await p.send({ ...signed, data: forged.data });
    await p.deliver();
    expect(await history(sts.metadata.namespace!)).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);
  }, 60_000);

  test("the forwarder's own signed envelope is taken for the parent: the change is recorded without reading it (3 requests, as kube-controller-manager)", async () => {
    const sts = await parentWithHistory('trust-signed');
    const p = await pipeline();
    const next = await adminClient().patch<KubeObject>(
      statefulSets,
      { name: 'web', namespace: sts.metadata.namespace },
      { spec: { template: template('registry.example/app:3') } },
      'merge',
    );
    // Each client discovers the target kind once; that is not the change's cost.
    const counted = outriggerClient();
    await resolveTarget(counted, policy);
    counted.stats.reset();
    await p.send(
      signEnvelope(ownKey, makeEnvelope({ cluster: CLUSTER, type: 'modified', object: next, source: `outrigger://${CLUSTER}/forwarder` })),
    );
    expect(await p.deliver(counted)).toMatchObject([{ outcome: 'created', number: 3 }]);
    // The revision and its Event: no read of the parent.
    expect(counted.stats.byVerb).toEqual({ create: 2 });
    expect(await history(sts.metadata.namespace!)).toEqual([
      '1:registry.example/app:1',
      '2:registry.example/app:2',
      '3:registry.example/app:3',
    ]);

    // The forwarder's own signed envelope through the ingest URL: the ingest drops the signature (an object is
    // taken for the parent's state only from the cluster's own forwarder on its own queue), so the parent is read.
    const after = await adminClient().patch<KubeObject>(
      statefulSets,
      { name: 'web', namespace: sts.metadata.namespace },
      { spec: { template: template('registry.example/app:4') } },
      'merge',
    );
    const unsigned = outriggerClient();
    await resolveTarget(unsigned, policy);
    unsigned.stats.reset();
    const res = await p.post([
      signEnvelope(ownKey, makeEnvelope({ cluster: CLUSTER, type: 'modified', object: after, source: `outrigger://${CLUSTER}/forwarder` })),
    ]);
    expect(res.statusCode).toBe(202);
    expect(await p.deliver(unsigned)).toMatchObject([{ outcome: 'created', number: 4 }]);
    expect(unsigned.stats.byVerb).toEqual({ get: 1, create: 2 });
  }, 60_000);

  test('when the forwarder key cannot be had (the secret unreadable), a signed envelope is routed as a trigger: the parent is read', async () => {
    const sts = await parentWithHistory('trust-nokey');
    const p = await pipeline(() => Promise.reject(new Error('Secrets Manager: throttled')));
    const next = await adminClient().patch<KubeObject>(
      statefulSets,
      { name: 'web', namespace: sts.metadata.namespace },
      { spec: { template: template('registry.example/app:3') } },
      'merge',
    );
    const counted = outriggerClient();
    await resolveTarget(counted, policy);
    counted.stats.reset();
    await p.send(
      signEnvelope(ownKey, makeEnvelope({ cluster: CLUSTER, type: 'modified', object: next, source: `outrigger://${CLUSTER}/forwarder` })),
    );
    expect(await p.deliver(counted)).toMatchObject([{ outcome: 'created', number: 3 }]);
    expect(counted.stats.byVerb).toEqual({ get: 1, create: 2 });
  }, 60_000);
});
