// Hostile envelopes on real queues (ElasticMQ) and a real apiserver: through the ingest function, as a signed
// sender posts them, and straight onto a cluster's events queue, as a compromised forwarder sends them, to the
// router. Each hostile one must reach its dead-letter queue with its reason; every valid one beside it must be
// delivered (queued by the ingest, routed by the router).
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageBatchCommand, type Message } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import fc from 'fast-check';
import type { ControllerSource } from '../../functions/controllers.ts';
import { SqsEventQueue, createIngestHandler } from '../../functions/ingest/handler.ts';
import { routeBatch } from '../../functions/router/route.ts';
import { Clusters, ingestClustersOf } from '../../shared/clusters.ts';
import { messageGroupId, type Envelope } from '../../shared/envelope/index.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { SqsDeadLetterSink, fitDeadLetter } from '../../shared/lambda/dead-letter.ts';
import { EVENTS_QUEUE, QueueUrls } from '../../shared/lambda/queues.ts';
import { sqsText } from '../../shared/lambda/sqs.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import { SqsSyncSink } from '../../shared/lambda/sync-sink.ts';
import type { LabelSelector } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, testCluster, testQueue, uniqueName } from '../testbed/index.ts';
import { functionUrlEvent } from './function-url.ts';
import { asRecord, drain } from './sqs-records.ts';
import { hostileCase, mixedBatch, validCase, type Case, type HostileCase } from '../unit/hostile.ts';
import { statefulSet } from '../../local/fixtures.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const TARGET = 'hostile-controller';
const source: ControllerSource = {
  target: TARGET,
  kinds: async () => [
    {
      resource: statefulSets,
      kind: 'StatefulSet',
      namespaced: true,
      selectorOf: (p) => (p.spec as { selector?: LabelSelector }).selector,
      target: TARGET,
    },
  ],
  watches: async () => [statefulSets],
};
const CLUSTERS = ['prod', 'staging'];
const SIGNER = 'arn:aws:sts::111122223333:assumed-role/prod-signer/proxy';

const context = { functionName: 'ingest', awsRequestId: 't', getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

const reasonOf = (m: Message) => m.MessageAttributes?.reason?.StringValue ?? '';

describe('hostile envelopes', () => {
  test('through the ingest and onto the router: each is dead-lettered with its reason, and every valid event beside it is delivered', async () => {
    const ns = await createNamespace('hostile');
    const sts = await adminClient().create<KubeObject>(statefulSets, statefulSet('web', ns, 'registry.example/app:1', 'h'));
    const { sqs, url } = await testQueue('hostile');
    const queues = new QueueUrls(`${url.slice(0, url.lastIndexOf('/') + 1)}${uniqueName('hq')}-`);
    for (const c of CLUSTERS) {
      for (const q of [EVENTS_QUEUE, TARGET]) {
        for (const dlq of [false, true])
          await sqs.send(
            new CreateQueueCommand({
              QueueName: queues.name(c, q, dlq),
              Attributes: { FifoQueue: 'true', ...(dlq ? { ContentBasedDeduplication: 'true' } : {}) },
            }),
          );
      }
    }
    const ingestDlq = (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: `${uniqueName('hostile-ingest-dlq')}.fifo`,
          Attributes: { FifoQueue: 'true', ContentBasedDeduplication: 'true' },
        }),
      )
    ).QueueUrl!;
    const prodEventsArn = (
      await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queues.url('prod', EVENTS_QUEUE), AttributeNames: ['QueueArn'] }))
    ).Attributes!.QueueArn!;
    const configs = [{ id: 'prod', ingestPrincipals: ['arn:aws:iam::111122223333:role/prod-signer'] }, { id: 'staging' }];
    const ingest = createIngestHandler(() => ({
      clusters: new Set(CLUSTERS),
      allowed: (caller) => ingestClustersOf(configs, caller),
      events: new SqsEventQueue((c) => queues.url(c, EVENTS_QUEUE), sqs),
      deadLetter: new SqsDeadLetterSink(ingestDlq, sqs),
    }));
    const kube = new Clusters(CLUSTERS.map(testCluster));
    const routerDeps = {
      clusters: kube,
      sources: [source],
      sink: new SqsSyncSink(queues, sqs),
      deadLetter: () => new SqsDeadLetterSink(queues, sqs),
      queueCluster: (arn: string) => queues.clusterOf(arn, EVENTS_QUEUE),
    };

    const valid = validCase({
      cluster: 'prod',
      namespace: ns,
      owner: { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: sts.metadata.uid! },
    });
    let tried = 0;
    let delivered = 0;
    await fc.assert(
      fc.asyncProperty(mixedBatch(valid, hostileCase(valid, 'staging')), async (batch: Case[]) => {
        const good = batch.flatMap((c) => (c.kind === 'valid' ? [c.envelope] : []));
        const bad = batch.map((c, i) => [c, i] as const).filter((x): x is readonly [HostileCase, number] => x[0].kind === 'hostile');

        // 1. The ingest: posted as one batch by a signer that may speak for prod only.
        const res = (await ingest(
          functionUrlEvent(`[${batch.map((c) => c.text).join(',')}]`, { caller: SIGNER }),
          context,
        )) as APIGatewayProxyStructuredResultV2;
        expect([res.statusCode, JSON.parse(res.body ?? '{}')]).toEqual([
          202,
          expect.objectContaining({ accepted: good.length, refused: bad.length }),
        ]);
        const queued = (await drain(sqs, queues.url('prod', EVENTS_QUEUE), good.length)).map((m) => JSON.parse(m.Body!) as Envelope);
        expect(queued).toEqual(good);
        expect(await drain(sqs, queues.url('staging', EVENTS_QUEUE), 0)).toEqual([]);
        const ingestLetters = await drain(sqs, ingestDlq, bad.length);
        expect(ingestLetters.map(reasonOf).sort()).toEqual(
          bad.map(([, i]) => expect.stringMatching(new RegExp(`^invalid ingest request: \\[${i}\\]`))).sort(),
        );
        for (const [c, i] of bad) {
          const letter = ingestLetters.find((l) => reasonOf(l).startsWith(`invalid ingest request: [${i}]`));
          expect(reasonOf(letter!)).toMatch(new RegExp(`^invalid ingest request: \\[${i}\\]\\.?${c.field}`));
          // Kept as sent, but for the characters SQS refuses, and cut to fit when over its limit.
          expect(letter!.Body).toBe(fitDeadLetter({ body: sqsText(c.text), reason: '' }).body);
        }

        // 2. The router: the same texts sent straight to prod's events queue (what SQS itself takes).
        const sendable = batch.filter((c) => Buffer.byteLength(sqsText(c.text)) <= 256 * 1024);
        const entries = sendable.map((c, i) => ({
          Id: String(i),
          MessageBody: sqsText(c.text),
          MessageGroupId: c.kind === 'valid' ? messageGroupId(c.envelope) : `hostile-${i}`,
          MessageDeduplicationId: `${Date.now()}-${i}-${Math.random()}`,
        }));
        for (let i = 0; i < entries.length; i += 10) {
          const out = await sqs.send(
            new SendMessageBatchCommand({ QueueUrl: queues.url('prod', EVENTS_QUEUE), Entries: entries.slice(i, i + 10) }),
          );
          expect(out.Failed ?? []).toEqual([]);
        }
        const records = (await drain(sqs, queues.url('prod', EVENTS_QUEUE), sendable.length)).map((m) => asRecord(m, prodEventsArn));
        const routed = await routeBatch({ Records: records }, routerDeps);
        const hostileSent = sendable.filter((c): c is HostileCase => c.kind === 'hostile');
        expect(routed.batchItemFailures).toEqual([]);
        expect(routed.stats).toMatchObject({ records: sendable.length, deadLettered: hostileSent.length, failed: 0 });
        const routerLetters = await drain(sqs, queues.url('prod', EVENTS_QUEUE, true), hostileSent.length);
        const kept = (c: HostileCase) => fitDeadLetter({ body: sqsText(c.text), reason: '' }).body;
        expect(routerLetters.map((l) => l.Body).sort()).toEqual(hostileSent.map(kept).sort());
        for (const l of routerLetters) {
          const c = hostileSent.find((h) => kept(h) === l.Body)!;
          expect(reasonOf(l)).toMatch(new RegExp(`^invalid event envelope: (\\(envelope\\))?${c.field}`));
        }
        const synced = (await drain(sqs, queues.url('prod', TARGET), 1)).map((m) => JSON.parse(m.Body!) as SyncRequest);
        expect(synced.map((r) => r.key.uid)).toEqual([sts.metadata.uid]);
        expect(synced[0]!.causes).toEqual(good.map((e) => `ControllerRevision/${e.id}`));
        tried += bad.length;
        delivered += good.length;
      }),
      { numRuns: 40, endOnFailure: true },
    );
    console.log(`hostile envelopes tried through the ingest and the router: ${tried}, beside ${delivered} valid ones delivered`);
  }, 300_000);
});
