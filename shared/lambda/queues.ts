// Every cluster has queues of its own (docs/design/architecture.md#a-deployment): its events queue (the router's input) and one queue per sync
// target, each with a dead-letter queue beside it. A noisy cluster's backlog then never sits in front of another
// cluster's messages, and each cluster's consumers scale to its own limit (one event source mapping per queue).
// All queues of a deployment follow one naming pattern, so a function reaches any of them from one prefix
// (OUTRIGGER_QUEUE_URL_PREFIX): a map of URLs, clusters × targets of them, would outgrow Lambda's 4 KB of
// environment variables at a handful of clusters.

import { clusterIdSchema } from '../validation.ts';

/** A cluster's events queue among its queues; the others are named by their sync target. */
export const EVENTS_QUEUE = 'events';

/** The ingest function's dead-letter queue, after the deployment's prefix (infra/ingest.ts; scripts/sam-env.ts names it too). */
export const INGEST_DEAD_LETTER_QUEUE = 'ingest-dlq.fifo';

/** SQS's limit on a queue's name, `.fifo` included. */
export const MAX_QUEUE_NAME_LENGTH = 80;

/** `<cluster>-<queue>.fifo`, and `<cluster>-<queue>-dlq.fifo` for its dead-letter queue; a deployment prefixes both with its name. */
export function queueName(cluster: string, queue: string, deadLetter = false): string {
  return `${cluster}-${queue}${deadLetter ? '-dlq' : ''}.fifo`;
}

const FIFO = '.fifo';
const DEAD_LETTER_FIFO = `-dlq${FIFO}`;

/** A deployment's queues, from the start every queue URL shares: `https://sqs.<region>.amazonaws.com/<account>/<stack>-`. */
export class QueueUrls {
  readonly prefix: string;
  constructor(prefix: string) {
    if (!/^https?:\/\/[^/]+\/[^/]+\/[^/]*$/.test(prefix))
      throw new Error(
        `OUTRIGGER_QUEUE_URL_PREFIX is ${JSON.stringify(prefix)}, not a queue URL without its queue name's end (https://sqs.<region>.amazonaws.com/<account>/<stack>-)`,
      );
    this.prefix = prefix;
  }

  url(cluster: string, queue: string, deadLetter = false): string {
    return this.prefix + queueName(cluster, queue, deadLetter);
  }

  /** The queue's name, the last part of its URL and ARN. */
  name(cluster: string, queue: string, deadLetter = false): string {
    const url = this.url(cluster, queue, deadLetter);
    return url.slice(url.lastIndexOf('/') + 1);
  }

  /**
   * The cluster whose `queue` a message came from, read from its SQS record's eventSourceARN (set by Lambda's
   * event source mapping, never by the sender), or undefined when that is no such queue of this deployment.
   * Each cluster's forwarder may send only to its own events queue, so this, not what a message says, is the
   * cluster a message speaks for (docs/operations/security.md).
   */
  clusterOf(sourceQueueArn: string, queue: string): string | undefined {
    const name = sourceQueueArn.slice(sourceQueueArn.lastIndexOf(':') + 1);
    const start = this.prefix.slice(this.prefix.lastIndexOf('/') + 1);
    const end = `-${queue}${FIFO}`;
    if (!name.startsWith(start) || !name.endsWith(end)) return undefined;
    const cluster = name.slice(start.length, -end.length);
    return clusterIdSchema.safeParse(cluster).success ? cluster : undefined;
  }

  /** The URL of this deployment's queue `sourceQueueArn` (a record's eventSourceARN). */
  urlOf(sourceQueueArn: string): string {
    const name = sourceQueueArn.slice(sourceQueueArn.lastIndexOf(':') + 1);
    const slash = this.prefix.lastIndexOf('/') + 1;
    if (!name.startsWith(this.prefix.slice(slash)) || !name.endsWith(FIFO))
      throw new Error(`${sourceQueueArn} is not a queue of this deployment (${this.prefix}<cluster>-<queue>${FIFO})`);
    return `${this.prefix.slice(0, slash)}${name}`;
  }

  /** The dead-letter queue beside the queue a message came from (its SQS record's eventSourceARN). */
  deadLetterOf(sourceQueueArn: string): string {
    const name = sourceQueueArn.slice(sourceQueueArn.lastIndexOf(':') + 1);
    const slash = this.prefix.lastIndexOf('/') + 1;
    if (!name.startsWith(this.prefix.slice(slash)) || !name.endsWith(FIFO) || name.endsWith(DEAD_LETTER_FIFO)) {
      throw new Error(
        `${sourceQueueArn} is not a queue of this deployment (${this.prefix}<cluster>-<queue>${FIFO}): it has no dead-letter queue here`,
      );
    }
    return `${this.prefix.slice(0, slash)}${name.slice(0, -FIFO.length)}${DEAD_LETTER_FIFO}`;
  }
}

export function queueUrlsFromEnv(env: NodeJS.ProcessEnv = process.env): QueueUrls {
  const prefix = env.OUTRIGGER_QUEUE_URL_PREFIX;
  if (!prefix) throw new Error('OUTRIGGER_QUEUE_URL_PREFIX is not set');
  return new QueueUrls(prefix);
}
