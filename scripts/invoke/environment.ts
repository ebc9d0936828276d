// The handler's environment: variables already set win; what is missing comes from the local runtime
// (`npm start`) when one is running, from its runtime.json; sync requests are captured unless
// OUTRIGGER_QUEUE_URL_PREFIX names real queues (./capture.ts); AWS credentials are passed as variables, as
// Lambda passes them.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { clustersFromEnv } from '../../shared/clusters.ts';
import { DEFAULT_TABLE, RUNTIME_CLUSTER, runningRuntime, type RuntimeFile } from '../runtime-file.ts';
import { UsageError } from './args.ts';
import { SyncCapture } from './capture.ts';
import { log, shown } from './output.ts';

/**
 * The cluster configuration the runtime gives its handlers. On its own kube-apiserver they act as the
 * `outrigger` identity, whose kubeconfig the apiserver wrote next to the admin one that runtime.json names
 * (with ready.json listing both); on a real cluster, as runtime.json's kubeconfig.
 */
async function runtimeClusters(info: RuntimeFile): Promise<string> {
  let access = info.kubeconfig;
  let migrator: string | undefined;
  try {
    const ready = JSON.parse(await readFile(join(dirname(info.kubeconfig), 'ready.json'), 'utf8')) as {
      server?: string;
      kubeconfigs?: Record<string, string>;
    };
    if (ready.server === info.server && ready.kubeconfigs?.outrigger) {
      access = ready.kubeconfigs.outrigger;
      migrator = ready.kubeconfigs.migrator;
    }
  } catch {
    // A real cluster's kubeconfig: no ready.json beside it.
  }
  return JSON.stringify([
    {
      id: RUNTIME_CLUSTER,
      access: { kind: 'kubeconfig', path: access },
      storage: { enabled: true, migrations: 'outrigger', ...(migrator ? { migratorAccess: { kind: 'kubeconfig', path: migrator } } : {}) },
    },
  ]);
}

export interface Setup {
  env: NodeJS.ProcessEnv;
  /** The dead-letter file the function writes to, when it writes to one. */
  deadLetterFile: string | undefined;
  capture: SyncCapture | undefined;
}

export async function environmentFor(
  spec: { name: string },
  syncTargets: string[],
  opts: { stateDir: string; useRuntime: boolean; dir: string },
): Promise<Setup> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  const fromRuntime: string[] = [];
  const runtime = opts.useRuntime
    ? await runningRuntime(opts.stateDir, (message) => log(message.replace(opts.stateDir, shown(opts.stateDir))))
    : undefined;
  if (runtime) {
    const supplied: Record<string, () => Promise<string> | string> = {
      OUTRIGGER_CLUSTERS: () => runtimeClusters(runtime.info),
      OUTRIGGER_TABLE: () => DEFAULT_TABLE,
      OUTRIGGER_DYNAMODB_ENDPOINT: () => runtime.info.dynamodb,
    };
    for (const [name, value] of Object.entries(supplied)) {
      // A configuration file the user names is theirs too: the runtime's clusters beside it would be refused.
      if (env[name] || (name === 'OUTRIGGER_CLUSTERS' && env.OUTRIGGER_CLUSTERS_FILE)) continue;
      env[name] = await value();
      fromRuntime.push(name);
    }
  }
  if (!env.OUTRIGGER_DEAD_LETTER_QUEUE_URL && !env.OUTRIGGER_DEAD_LETTER_FILE) {
    // The runtime's own dead-letter file (runtime/local.ts), so its letters are all in one place.
    env.OUTRIGGER_DEAD_LETTER_FILE = runtime ? join(dirname(runtime.file), 'dead-letter.jsonl') : join(opts.dir, 'dead-letter.jsonl');
  }

  const missing = [
    ...(env.OUTRIGGER_CLUSTERS || env.OUTRIGGER_CLUSTERS_FILE ? [] : ['OUTRIGGER_CLUSTERS (or OUTRIGGER_CLUSTERS_FILE)']),
    ...(env.OUTRIGGER_TABLE ? [] : ['OUTRIGGER_TABLE']),
  ];
  if (missing.length) {
    throw new UsageError(
      `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not set, and no local runtime is running ` +
        `(${opts.useRuntime ? `no live ${shown(join(opts.stateDir, 'runtime.json'))}` : '--no-runtime'}). ` +
        'Start one with `npm start` in another terminal, or set them (and OUTRIGGER_DYNAMODB_ENDPOINT for DynamoDB Local); see `npm run invoke -- --help`.',
    );
  }
  let clusters: Array<{ id: string; access: { kind: string; path?: string | undefined } }>;
  try {
    clusters = clustersFromEnv(env);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }

  let capture: SyncCapture | undefined;
  if (!env.OUTRIGGER_QUEUE_URL_PREFIX) {
    capture = await SyncCapture.start(
      syncTargets,
      clusters.map((c) => c.id),
    );
    env.OUTRIGGER_QUEUE_URL_PREFIX = capture.prefix;
    // The SQS client would reach the capture anyway (it sends to the queue URL's host) but warns on every send
    // that the URL is not AWS's; naming the endpoint says it is meant. Not when SQS is also the dead-letter
    // queue: those letters must reach it.
    if (!env.OUTRIGGER_DEAD_LETTER_QUEUE_URL && !env.AWS_ENDPOINT_URL_SQS) env.AWS_ENDPOINT_URL_SQS = capture.endpoint;
  }
  // A Lambda bundle reads AWS credentials from its environment only (scripts/bundle.ts ALIASES), as Lambda and
  // `sam local invoke` hand them over. With everything local, the SDK still wants a region and credentials to
  // sign with, which neither DynamoDB Local nor the capture checks; otherwise (an EKS cluster, AWS DynamoDB) they
  // are the user's, resolved here by the SDK's whole chain (profile, SSO, ...) and passed on as variables.
  if (env.OUTRIGGER_DYNAMODB_ENDPOINT && clusters.every((c) => c.access.kind !== 'eks')) {
    env.AWS_REGION ??= 'us-east-1';
    if (!env.AWS_ACCESS_KEY_ID) Object.assign(env, { AWS_ACCESS_KEY_ID: 'local', AWS_SECRET_ACCESS_KEY: 'local' });
  } else if (!env.AWS_ACCESS_KEY_ID) {
    const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
    try {
      const credentials = await defaultProvider({ profile: env.AWS_PROFILE })();
      Object.assign(env, {
        AWS_ACCESS_KEY_ID: credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
        ...(credentials.sessionToken ? { AWS_SESSION_TOKEN: credentials.sessionToken } : {}),
      });
      log('AWS credentials resolved here (the bundle reads them from its environment, as in Lambda)');
    } catch (err) {
      log(`no AWS credentials found (${(err as Error).message}): the function's AWS calls will fail`);
    }
  }
  // What Lambda sets for every function (the logger and the SDK read some of them).
  env.AWS_LAMBDA_FUNCTION_NAME ??= `outrigger-${spec.name}`;
  env.AWS_LAMBDA_FUNCTION_VERSION ??= '$LATEST';
  env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ??= '512';
  env.AWS_LAMBDA_LOG_GROUP_NAME ??= `/aws/lambda/outrigger-${spec.name}`;
  env.AWS_LAMBDA_LOG_STREAM_NAME ??= 'local';

  if (runtime)
    log(
      `local runtime (pid ${runtime.info.pid}, ${runtime.info.server}) supplies ${fromRuntime.join(', ') || 'nothing: every variable is set'}`,
    );
  log(
    `cluster(s) ${clusters.map((c) => `${c.id} (${c.access.kind}${c.access.path ? ` ${c.access.path}` : ''})`).join(', ')}; table ${env.OUTRIGGER_TABLE}${env.OUTRIGGER_DYNAMODB_ENDPOINT ? ` at ${env.OUTRIGGER_DYNAMODB_ENDPOINT}` : ' (DynamoDB)'}`,
  );
  if (capture) log('OUTRIGGER_QUEUE_URL_PREFIX is unset: sync requests are captured and printed, not sent');
  const deadLetterFile = env.OUTRIGGER_DEAD_LETTER_QUEUE_URL ? undefined : env.OUTRIGGER_DEAD_LETTER_FILE;
  return { env, deadLetterFile, capture };
}
