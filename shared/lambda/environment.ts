// What a handler needs from the outside world, built once per process (a warm Lambda keeps it) from the
// function's environment. In AWS the CDK stack sets these variables; the local runtime sets them itself.
// The variables: docs/reference/configuration.md#the-functions.
import { Clusters, clustersFromEnv } from '../clusters.ts';
import { openState, type State } from '../state/index.ts';
import { deadLetterSinkFromEnv, type DeadLetterSink } from './dead-letter.ts';
import { queueUrlsFromEnv, type QueueUrls } from './queues.ts';
import { sqsRetry, type Retry } from './retry.ts';
import { signingSecret } from './signing-secret.ts';
import { syncSinkFromEnv, type SyncSink } from './sync-sink.ts';

export interface Environment {
  clusters: Clusters;
  state: State;
  /** Resolved on first use: only event-driven functions have a dead-letter destination. */
  readonly deadLetter: DeadLetterSink;
  /** Resolved on first use: only the router sends sync requests. */
  readonly syncSink: SyncSink;
  /**
   * The deployment's queues, by name (OUTRIGGER_QUEUE_URL_PREFIX), resolved on first use: the router learns from
   * them which cluster a record's queue belongs to. Absent in a process that consumes no queue (the forwarder).
   */
  readonly queues?: QueueUrls;
  /** Backoff for failed messages on those queues (shared/lambda/retry.ts); absent where there are none. */
  readonly retry?: Retry;
  /**
   * The deployment's signing secret (OUTRIGGER_HOOK_SECRET_ARN or _FILE), from which the router derives each
   * cluster's forwarder key; absent where none is set (every envelope is then a trigger only).
   */
  readonly signingSecret?: (() => Promise<string>) | undefined;
}

let current: Environment | undefined;

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

export function environment(env: NodeJS.ProcessEnv = process.env): Environment {
  if (current) return current;
  let deadLetter: DeadLetterSink | undefined;
  let syncSink: SyncSink | undefined;
  let queues: QueueUrls | undefined;
  let retry: Retry | undefined;
  const secret = signingSecret(env);
  current = {
    ...(secret ? { signingSecret: secret } : {}),
    clusters: new Clusters(clustersFromEnv(env)),
    state: openState({ tableName: required(env, 'OUTRIGGER_TABLE'), endpoint: env.OUTRIGGER_DYNAMODB_ENDPOINT, region: env.AWS_REGION }),
    get deadLetter() {
      return (deadLetter ??= deadLetterSinkFromEnv(env));
    },
    get syncSink() {
      return (syncSink ??= syncSinkFromEnv(env));
    },
    get queues() {
      return (queues ??= queueUrlsFromEnv(env));
    },
    get retry() {
      if (!env.OUTRIGGER_QUEUE_URL_PREFIX) return undefined;
      return (retry ??= sqsRetry(queueUrlsFromEnv(env)));
    },
  };
  return current;
}

/** Replaces the process's environment (the local runtime and tests run handlers in one process). */
export function setEnvironment(next: Environment | undefined): void {
  current = next;
}
