// One deployment, many clusters (docs/design/architecture.md#a-deployment): each cluster's concurrency setting, and its own queues, which every
// sender and consumer finds by the deployment's naming pattern: sync requests and ingested events go to the
// queue of the cluster they name, a malformed message to the dead-letter queue beside the queue it came from.
import type { SQSClient } from '@aws-sdk/client-sqs';
import { SqsEventQueue, ingestDepsFromEnv } from '../../functions/ingest/handler.ts';
import { DEFAULT_MAX_CONCURRENCY, maxConcurrency, parseClusters } from '../../shared/clusters.ts';
import { makeEnvelope } from '../../shared/envelope/index.ts';
import { SqsDeadLetterSink, deadLetterSinkFromEnv } from '../../shared/lambda/dead-letter.ts';
import { EVENTS_QUEUE, QueueUrls, queueName } from '../../shared/lambda/queues.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { SqsSyncSink, syncSinkFromEnv } from '../../shared/lambda/sync-sink.ts';

const PREFIX = 'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-';

/** An SQS client that keeps what it is asked to send and accepts all of it. */
function recordingClient() {
  const sent: Array<{ queue: string; bodies: string[] }> = [];
  const client = {
    send: async (command: { input: { QueueUrl: string; MessageBody?: string; Entries?: Array<{ MessageBody: string }> } }) => {
      const { QueueUrl, MessageBody, Entries } = command.input;
      sent.push({ queue: QueueUrl, bodies: Entries ? Entries.map((e) => e.MessageBody) : [MessageBody!] });
      return { Successful: [], Failed: [] };
    },
  };
  // Only `send` is used by the sinks under test.
  return { sent, client: client as unknown as SQSClient };
}

describe("a cluster's maxConcurrency", () => {
  const eks = {
    id: 'prod',
    access: {
      kind: 'eks',
      server: 'https://abc.gr7.eu-west-1.eks.amazonaws.com',
      caData: 'Q0E=',
      clusterName: 'prod',
      region: 'eu-west-1',
    },
  };

  test('is optional, defaults to 5 and is kept as given', () => {
    const [plain, busy] = parseClusters(JSON.stringify([eks, { ...eks, id: 'busy', maxConcurrency: 50 }]));
    expect(DEFAULT_MAX_CONCURRENCY).toBe(5);
    expect(plain!.maxConcurrency).toBeUndefined();
    expect(maxConcurrency(plain!)).toBe(5);
    expect(maxConcurrency(busy!)).toBe(50);
    expect(maxConcurrency({ maxConcurrency: 2 })).toBe(2);
    expect(maxConcurrency({ maxConcurrency: 1000 })).toBe(1000);
  });

  test.each([
    [
      1,
      "cluster configuration: cluster busy: maxConcurrency: must be at least 2: Lambda's lowest maximum concurrency for an SQS event source",
    ],
    [
      1001,
      "cluster configuration: cluster busy: maxConcurrency: must be at most 1000: Lambda's highest maximum concurrency for an SQS event source",
    ],
    [2.5, 'cluster configuration: cluster busy: maxConcurrency: must be a whole number'],
    ['5', 'cluster configuration: cluster busy: maxConcurrency: must be a whole number'],
  ])("refuses %j with an error naming the cluster entry and Lambda's bounds", (value, message) => {
    expect(() => parseClusters(JSON.stringify([eks, { ...eks, id: 'busy', maxConcurrency: value }]))).toThrow(message);
  });
});

describe("a cluster's controllerSelector", () => {
  const eks = {
    id: 'prod',
    access: {
      kind: 'eks',
      server: 'https://abc.gr7.eu-west-1.eks.amazonaws.com',
      caData: 'Q0E=',
      clusterName: 'prod',
      region: 'eu-west-1',
    },
  };

  test("takes a label selector in kubectl's form, and refuses one that does not parse", () => {
    const [c] = parseClusters(JSON.stringify([{ ...eks, controllerSelector: 'example.com/engine in (outrigger), !legacy' }]));
    expect(c!.controllerSelector).toBe('example.com/engine in (outrigger), !legacy');
    expect(() => parseClusters(JSON.stringify([{ ...eks, controllerSelector: 'engine in outrigger' }]))).toThrow(
      'cluster configuration: cluster prod: controllerSelector: must be a label selector',
    );
  });
});

describe("a deployment's queues", () => {
  const queues = new QueueUrls(PREFIX);

  test('are named by cluster and consumer, each with its dead-letter queue beside it', () => {
    expect(queueName('prod', EVENTS_QUEUE)).toBe('prod-events.fifo');
    expect(queueName('prod', 'history', true)).toBe('prod-history-dlq.fifo');
    expect(queues.url('prod-eu', 'map')).toBe(`${PREFIX}prod-eu-map.fifo`);
    expect(queues.deadLetterOf('arn:aws:sqs:eu-west-1:111122223333:Outrigger-prod-eu-events.fifo')).toBe(
      `${PREFIX}prod-eu-events-dlq.fifo`,
    );
  });

  test('name no dead-letter queue for a queue of another deployment, or for a dead-letter queue', () => {
    expect(() => queues.deadLetterOf('arn:aws:sqs:eu-west-1:111122223333:Other-prod-events.fifo')).toThrow(
      'is not a queue of this deployment',
    );
    expect(() => queues.deadLetterOf('arn:aws:sqs:eu-west-1:111122223333:Outrigger-prod-events-dlq.fifo')).toThrow(
      'is not a queue of this deployment',
    );
  });

  test('come from OUTRIGGER_QUEUE_URL_PREFIX, which must be a queue URL without the end of its name', () => {
    expect(() => syncSinkFromEnv({})).toThrow('OUTRIGGER_QUEUE_URL_PREFIX is not set');
    expect(() => syncSinkFromEnv({ OUTRIGGER_QUEUE_URL_PREFIX: '{"history":"https://x"}' })).toThrow(
      'not a queue URL without its queue name',
    );
    expect(syncSinkFromEnv({ OUTRIGGER_QUEUE_URL_PREFIX: PREFIX })).toBeInstanceOf(SqsSyncSink);
  });
});

describe("each cluster's messages go to its own queues", () => {
  const key = (cluster: string, uid: string) => ({ cluster, group: 'apps', kind: 'StatefulSet', namespace: 'shop', name: uid, uid });

  test('sync requests: to the queue of their cluster for the target, in batches of 10', async () => {
    const { sent, client } = recordingClient();
    const requests = [
      ...Array.from({ length: 12 }, (_, i) => makeSyncRequest(key('prod', `p${i}`), ['c'])),
      makeSyncRequest(key('dr', 'd0'), ['c']),
    ];
    await new SqsSyncSink(new QueueUrls(PREFIX), client).send('history', requests);
    expect(sent.map((s) => [s.queue, s.bodies.length])).toEqual([
      [`${PREFIX}prod-history.fifo`, 10],
      [`${PREFIX}prod-history.fifo`, 2],
      [`${PREFIX}dr-history.fifo`, 1],
    ]);
  });

  test('ingested events: to the events queue of the cluster each names', async () => {
    const { sent, client } = recordingClient();
    const pod = (i: number) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `p${i}`, namespace: 'shop', uid: `00000000-0000-4000-8000-00000000000${i}`, resourceVersion: '1' },
    });
    const envelopes = ['prod', 'dr', 'prod'].map((cluster, i) => makeEnvelope({ cluster, type: 'added', object: pod(i), source: 's' }));
    const queues = new QueueUrls(PREFIX);
    await new SqsEventQueue((cluster) => queues.url(cluster, EVENTS_QUEUE), client).send(envelopes);
    expect(sent.map((s) => [s.queue, s.bodies.map((b) => (JSON.parse(b) as { id: string }).id)])).toEqual([
      [`${PREFIX}prod-events.fifo`, [envelopes[0]!.id, envelopes[2]!.id]],
      [`${PREFIX}dr-events.fifo`, [envelopes[1]!.id]],
    ]);
  });

  test('the ingest function has an events queue for the clusters it serves only', async () => {
    const env = {
      OUTRIGGER_CLUSTERS: JSON.stringify([{ id: 'prod', access: { kind: 'kubeconfig' } }]),
      OUTRIGGER_QUEUE_URL_PREFIX: PREFIX,
      OUTRIGGER_DEAD_LETTER_QUEUE_URL: `${PREFIX}ingest-dlq.fifo`,
    };
    const deps = ingestDepsFromEnv(env);
    expect([...deps.clusters]).toEqual(['prod']);
    const envelope = makeEnvelope({
      cluster: 'qa',
      type: 'added',
      object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', uid: '00000000-0000-4000-8000-000000000009', resourceVersion: '1' } },
      source: 's',
    });
    await expect(deps.events.send([envelope])).rejects.toThrow('no events queue for cluster "qa": this deployment serves prod');
    expect(() => ingestDepsFromEnv({ ...env, OUTRIGGER_QUEUE_URL_PREFIX: undefined })).toThrow('OUTRIGGER_QUEUE_URL_PREFIX is not set');
  });

  test('a malformed message: to the dead-letter queue beside the queue it came from', async () => {
    const { sent, client } = recordingClient();
    const sink = new SqsDeadLetterSink(new QueueUrls(PREFIX), client);
    await sink.send({
      body: '{',
      reason: 'not JSON',
      source: 'history',
      queue: 'arn:aws:sqs:eu-west-1:111122223333:Outrigger-dr-history.fifo',
    });
    expect(sent).toEqual([{ queue: `${PREFIX}dr-history-dlq.fifo`, bodies: ['{'] }]);
    await expect(sink.send({ body: '{', reason: 'not JSON', source: 'history' })).rejects.toThrow('names no queue it came from');
  });

  test("a deployed consumer's dead letters follow the prefix; one queue or a file, when named, win", () => {
    expect(deadLetterSinkFromEnv({ OUTRIGGER_QUEUE_URL_PREFIX: PREFIX })).toBeInstanceOf(SqsDeadLetterSink);
    expect(
      deadLetterSinkFromEnv({ OUTRIGGER_QUEUE_URL_PREFIX: PREFIX, OUTRIGGER_DEAD_LETTER_FILE: '/tmp/dl.jsonl' }).constructor.name,
    ).toBe('FileDeadLetterSink');
    expect(() => deadLetterSinkFromEnv({})).toThrow('no dead-letter destination');
  });
});
