// The deployment's SQS queues: FIFO, encrypted, HTTPS-only, each consumed queue with a dead-letter queue beside
// it, named so that the functions find any cluster's queue from one prefix (shared/lambda/queues.ts).
import { Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { MAX_QUEUE_NAME_LENGTH } from '../shared/lambda/queues.ts';

/** A FIFO queue and the dead-letter queue beside it. */
export interface QueuePair {
  queue: sqs.Queue;
  deadLetter: sqs.Queue;
}

/**
 * How often SQS redelivers a message before it moves it to the dead-letter queue. A failed message comes back
 * after 2 s, doubling up to 10 minutes (shared/lambda/retry.ts), as a controller's workqueue retries: 12 receives
 * give a failing cause about 37 minutes to clear before the message is given up.
 */
export const MAX_RECEIVE_COUNT = 12;
/** AWS's advice for a queue a Lambda function consumes: a visibility timeout of at least six function timeouts. */
const VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT = 6;

/**
 * Every queue's name starts with its stack's name and a dash (one deployment per stack), and its URL with the
 * prefix the functions are given (OUTRIGGER_QUEUE_URL_PREFIX).
 */
export function queueNamePrefix(scope: Construct): string {
  return `${Stack.of(scope).stackName}-`;
}

export function queueUrlPrefix(scope: Construct): string {
  const stack = Stack.of(scope);
  return `https://sqs.${stack.region}.${stack.urlSuffix}/${stack.account}/${queueNamePrefix(scope)}`;
}

/** A queue's name in this deployment, checked against SQS's limit here rather than at deploy. */
export function fifoName(scope: Construct, name: string): string {
  const full = `${queueNamePrefix(scope)}${name}`;
  if (full.length > MAX_QUEUE_NAME_LENGTH)
    throw new Error(
      `queue name ${full} is ${full.length} characters, over SQS's ${MAX_QUEUE_NAME_LENGTH}: shorten the cluster id or the stack name`,
    );
  return full;
}

/**
 * A FIFO queue whose consumer times out after `consumerTimeoutSeconds`, and its FIFO dead-letter queue (`<id>DeadLetter`).
 * Senders name each message's deduplication id (derived from the event or request), so the queue does not
 * deduplicate by content.
 */
export function queuePair(
  scope: Construct,
  id: string,
  names: { queue: string; deadLetter: string },
  consumerTimeoutSeconds: number,
): QueuePair {
  const deadLetter = deadLetterQueue(scope, `${id}DeadLetter`, fifoName(scope, names.deadLetter));
  const queue = new sqs.Queue(scope, id, {
    queueName: fifoName(scope, names.queue),
    fifo: true,
    contentBasedDeduplication: false,
    visibilityTimeout: Duration.seconds(VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT * consumerTimeoutSeconds),
    deadLetterQueue: { queue: deadLetter, maxReceiveCount: MAX_RECEIVE_COUNT },
    encryption: sqs.QueueEncryption.SQS_MANAGED,
  });
  return { queue, deadLetter };
}

/**
 * A FIFO dead-letter queue. SqsDeadLetterSink names a deduplication id (a digest of body and reason); content-based
 * deduplication covers a sender that names none.
 */
export function deadLetterQueue(scope: Construct, id: string, name: string): sqs.Queue {
  return new sqs.Queue(scope, id, {
    queueName: name,
    fifo: true,
    contentBasedDeduplication: true,
    retentionPeriod: Duration.days(14),
    encryption: sqs.QueueEncryption.SQS_MANAGED,
  });
}

/**
 * One queue policy that refuses every request without TLS to all of `queues`: what each queue's `enforceSSL`
 * would do with a policy per queue, in one resource (a cluster's ten queues would otherwise take ten of
 * the stack's 500).
 */
export function tlsOnly(scope: Construct, id: string, queues: sqs.IQueue[]): sqs.QueuePolicy {
  const policy = new sqs.QueuePolicy(scope, id, { queues });
  policy.document.addStatements(
    new iam.PolicyStatement({
      effect: iam.Effect.DENY,
      principals: [new iam.AnyPrincipal()],
      actions: ['sqs:*'],
      resources: queues.map((q) => q.queueArn),
      conditions: { Bool: { 'aws:SecureTransport': 'false' } },
    }),
  );
  return policy;
}
