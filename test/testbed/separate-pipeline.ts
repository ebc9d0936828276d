// The event pipeline as AWS runs it, each part in a process of its own: the forwarder (forwarder/main.ts)
// sending to a cluster's events queue on ElasticMQ, the router and the history function each fed from its queue
// by test/testbed/event-source.ts. Every queue is named as a deployment names it, under a
// prefix of the test's own, with its dead-letter queue beside it.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { projectRoot } from '../../local/paths.ts';
import { EVENTS_QUEUE, QueueUrls } from '../../shared/lambda/queues.ts';
import { testbed, testQueue, uniqueName } from './index.ts';

/** The consumers started, by the queue (sync target, or the events queue) each reads. */
const CONSUMERS: Record<string, string> = { [EVENTS_QUEUE]: 'router', history: 'history' };
/** Every queue the router and history may send to exists, consumed or not, so no send fails for want of one. */
const QUEUES = [EVENTS_QUEUE, 'history', 'map', 'storage', 'migrator'];

export interface SeparatePipeline {
  /** Every message on a dead-letter queue of the pipeline, as `<queue>: <reason>`. */
  deadLetters(): Promise<string[]>;
  /** The last lines each process wrote, for a failing test's report (with `tap`, everything each wrote). */
  logs(): string;
  /** Whether every consumed queue is empty, none of its messages in flight. */
  drained(): Promise<boolean>;
  /**
   * With `tap`: every message body that crossed a queue: those the consumers received, and those left on the
   * queues nobody consumes here and on every dead-letter queue (received, so read once).
   */
  messages(): Promise<string[]>;
  stop(): Promise<void>;
  /** The cluster's events queue and its dead-letter queue, where a forwarder started elsewhere sends. */
  eventsQueueUrl: string;
  deadLetterQueueUrl: string;
}

/** Starts the pipeline for cluster `cluster`, watching namespaced resources in `namespace` only. */
export async function separatePipeline(
  namespace: string,
  cluster = 'it',
  opts: {
    tap?: string;
    /** false: no forwarder process; the test runs one of its own (its image, in a container) against eventsQueueUrl. */
    forwarder?: boolean;
    /** The deployment's signing secret, in a file (OUTRIGGER_HOOK_SECRET_FILE): the router verifies envelopes signed with its forwarder key. */
    secretFile?: string;
  } = {},
): Promise<SeparatePipeline> {
  const bed = testbed();
  const { sqs, url } = await testQueue('pipeline');
  const queues = new QueueUrls(`${url.slice(0, url.lastIndexOf('/') + 1)}${uniqueName('sp')}-`);
  for (const q of QUEUES) {
    for (const deadLetter of [false, true]) {
      await sqs.send(
        new CreateQueueCommand({
          QueueName: queues.name(cluster, q, deadLetter),
          Attributes: { FifoQueue: 'true', VisibilityTimeout: '60' },
        }),
      );
    }
  }
  const clusters = JSON.stringify([
    { id: cluster, access: { kind: 'kubeconfig', path: bed.kubeconfigs.outrigger }, storage: { enabled: false } },
  ]);
  const env = {
    ...process.env,
    OUTRIGGER_CLUSTERS: clusters,
    OUTRIGGER_TABLE: bed.tableName,
    OUTRIGGER_DYNAMODB_ENDPOINT: bed.dynamodbEndpoint,
    OUTRIGGER_QUEUE_URL_PREFIX: queues.prefix,
    AWS_ENDPOINT_URL_SQS: bed.sqsEndpoint,
    AWS_REGION: 'local',
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    POWERTOOLS_DEV: 'false',
    ...(opts.tap ? { OUTRIGGER_TEST_TAP: opts.tap } : {}),
    ...(opts.secretFile ? { OUTRIGGER_HOOK_SECRET_FILE: opts.secretFile } : {}),
  };
  const children: Array<{ name: string; child: ChildProcess; log: string }> = [];
  const start = (name: string, args: string[], extra: Record<string, string> = {}) => {
    const child = spawn(process.execPath, args, { cwd: projectRoot, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    const entry = { name, child, log: '' };
    const keep = (b: Buffer) => (entry.log = opts.tap ? entry.log + b.toString() : (entry.log + b.toString()).slice(-10_000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    children.push(entry);
  };
  for (const [queue, fn] of Object.entries(CONSUMERS)) start(fn, ['test/testbed/event-source.ts', fn, queues.url(cluster, queue)]);
  // Its timer would refresh only after a minute: a new policy's kind is watched from the policy's own event.
  if (opts.forwarder !== false)
    start('forwarder', ['forwarder/main.ts'], {
      KUBECONFIG: bed.kubeconfigs.outrigger,
      OUTRIGGER_CLUSTER_ID: cluster,
      OUTRIGGER_EVENT_QUEUE_URL: queues.url(cluster, EVENTS_QUEUE),
      OUTRIGGER_DEAD_LETTER_QUEUE_URL: queues.url(cluster, EVENTS_QUEUE, true),
      OUTRIGGER_SQS_ENDPOINT: bed.sqsEndpoint,
      OUTRIGGER_NAMESPACE: namespace,
      OUTRIGGER_REFRESH_MS: '60000',
      PORT: '0',
    });
  return {
    eventsQueueUrl: queues.url(cluster, EVENTS_QUEUE),
    deadLetterQueueUrl: queues.url(cluster, EVENTS_QUEUE, true),
    deadLetters: async () => {
      const letters: string[] = [];
      for (const q of QUEUES) {
        const got = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queues.url(cluster, q, true), MaxNumberOfMessages: 10, MessageAttributeNames: ['All'] }),
        );
        for (const m of got.Messages ?? []) letters.push(`${q}: ${m.MessageAttributes?.reason?.StringValue ?? m.Body}`);
      }
      return letters;
    },
    drained: async () => {
      for (const q of Object.keys(CONSUMERS)) {
        const got = await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: queues.url(cluster, q),
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
          }),
        );
        if (Number(got.Attributes?.ApproximateNumberOfMessages) || Number(got.Attributes?.ApproximateNumberOfMessagesNotVisible))
          return false;
      }
      return true;
    },
    messages: async () => {
      const bodies = opts.tap ? (await readFile(opts.tap, 'utf8').catch(() => '')).split('\n').filter(Boolean) : [];
      const unconsumed = QUEUES.filter((q) => !(q in CONSUMERS)).map((q) => queues.url(cluster, q));
      for (const url of [...unconsumed, ...QUEUES.map((q) => queues.url(cluster, q, true))]) {
        for (;;) {
          const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 300 }));
          if (!got.Messages?.length) break;
          bodies.push(...got.Messages.map((m) => m.Body ?? ''));
        }
      }
      return bodies;
    },
    logs: () => children.map((c) => `--- ${c.name} (exit ${c.child.exitCode})\n${c.log}`).join('\n'),
    stop: async () => {
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.child.exitCode !== null) return resolve();
              c.child.once('exit', () => resolve());
              c.child.kill('SIGTERM');
              setTimeout(() => c.child.kill('SIGKILL'), 5_000).unref();
            }),
        ),
      );
    },
  };
}
