// The local runtime: all of Outrigger in one process. The forwarder (the same code that runs in a cluster)
// watches a cluster (the one a kubeconfig names, or a local kube-apiserver it starts) and sends envelopes to a
// local queue with SQS FIFO semantics in place of SQS; queues feed the same Lambda handlers the CDK stack
// deploys; scheduled functions run on their schedules. State lives in DynamoDB Local.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SQSBatchResponse } from 'aws-lambda';
import { Forwarder, type ForwarderStats } from '../forwarder/forwarder.ts';
import { DEFINITION_RESYNC_MS, definitionsWatched } from '../functions/cluster-cache.ts';
import { functions as registry } from '../functions/index.ts';
import type { FunctionSpec, LambdaHandler } from '../functions/spec.ts';
import { storageController } from '../functions/storage/controller.ts';
import { exampleHooks, startLambdaEndpoint, type LocalFunction } from '../local/lambda-endpoint.ts';
import { startSecretsEndpoint } from '../local/secrets-endpoint.ts';
import { startTestbed, type Testbed } from '../local/testbed.ts';
import { Clusters, type ClusterConfig } from '../shared/clusters.ts';
import { forwarderKey } from '../shared/envelope/signature.ts';
import { connect, type KubeClient, type RequestStats } from '../shared/kube/index.ts';
import { kubeconfigEndpoint } from '../shared/kube/kubeconfig.ts';
import { FileDeadLetterSink } from '../shared/lambda/dead-letter.ts';
import { setEnvironment } from '../shared/lambda/environment.ts';
import { EVENTS_QUEUE, QueueUrls } from '../shared/lambda/queues.ts';
import { openState } from '../shared/state/index.ts';
import { startLambdaContainers } from './lambda-containers.ts';
import { invokeAsLambda } from './lambda-context.ts';
import { loadHandler } from './load-handler.ts';
import { LocalQueue, LocalQueueSink } from './queue.ts';
import { startSqsEndpoint } from './sqs-endpoint.ts';
import { LocalSyncSink } from './sync-sink.ts';

/** The storage controller's functions (functions/storage/controller.ts). */
const STORAGE_FUNCTIONS = new Set(storageController.functions.map((f) => f.name));

/** How often the runtime re-reads what it should watch (new policies, new target kinds). */
const WATCH_REFRESH_MS = 2_000;

/** A function the runtime runs: its declaration, and (tests) a handler given in process instead of its entry's. */
export type RuntimeFunction = FunctionSpec & { handler?: LambdaHandler };

export interface RuntimeOptions {
  /** A real cluster's kubeconfig; without one the runtime starts the local kube-apiserver. */
  kubeconfig?: string | undefined;
  context?: string | undefined;
  clusterId?: string;
  /** The cluster's controllerSelector: the definitions this runtime serves (docs/reference/configuration.md#clustersjson). */
  controllerSelector?: string | undefined;
  /**
   * Watch, resync and write namespaced resources in this namespace only (cluster-scoped ones, such as policies, are
   * watched everywhere; of them only definitions are written: their status, and patches); storage migration is not run.
   */
  namespace?: string | undefined;
  stateDir: string;
  functions?: RuntimeFunction[];
  /** The storage migrator's own kubeconfig (on the local apiserver: its `migrator` identity). */
  migratorKubeconfig?: string | undefined;
  /** Limit the storage poll to these API groups ("" is core). */
  storageGroups?: string[] | undefined;
  /**
   * The cluster has a single apiserver, so the storage poll reads it once per poll instead of sampling
   * (docs/controllers/storage-migration.md#safe-by-default). Default: true for the local kube-apiserver the
   * runtime starts, false for a cluster given by kubeconfig (which may balance over several).
   */
  oneApiserver?: boolean | undefined;
  /**
   * MapController hooks written as Lambda handlers, by function name, served on a local Lambda Invoke endpoint
   * (default: the SnapshotSchedule example's). Webhook hooks need nothing here.
   */
  hooks?: ReadonlyMap<string, LocalFunction> | undefined;
  /**
   * Run each function in its Lambda container (runtime/lambda-containers.ts) instead of in this process: its bundle
   * in the Lambda Node.js base image, invoked through the runtime API, reaching the cluster, queues and secrets as
   * a deployed function does (docs/getting-started/local.md#functions-in-their-lambda-containers). The functions
   * reach the cluster with a bearer token, as a deployed function reaches one outside EKS: the kubeconfigs' users
   * must have one (the local kube-apiserver's do). Needs the project's container engine.
   */
  lambdaContainers?: boolean | undefined;
  log?: (message: string) => void;
}

export interface Runtime {
  /** For the user's kubectl: the local apiserver's admin kubeconfig, or the one given. */
  kubeconfig: string;
  server: string;
  clusterId: string;
  dynamodbEndpoint: string;
  tableName: string;
  deadLetterFile: string;
  /** Where Lambda hooks are invoked, when the map function runs here. */
  lambdaEndpoint: string | undefined;
  queues: Map<string, LocalQueue>;
  /** Each forwarder's counters (one forwarder per function that consumes watch events). */
  forwarderStats(): ForwarderStats[];
  /** The forwarders' Kubernetes requests by verb (lists and watches): the handlers' are their cluster client's. */
  sourceRequests: RequestStats;
  /** Runs a scheduled function now (as its schedule would). */
  runScheduled(name: string): Promise<unknown>;
  /** Resolves once every watch has listed and every queue is empty. */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/** What the local runtime's webhooks may reach unless OUTRIGGER_WEBHOOK_ALLOW says otherwise: this machine. */
export const LOCAL_WEBHOOK_ALLOW = ['127.0.0.0/8', '::1'];

export async function startRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const log = opts.log ?? (() => {});
  const clusterId = opts.clusterId ?? 'local';
  // Storage migration reads and rewrites every resource of the cluster, which one namespace cannot hold.
  const specs: RuntimeFunction[] = (opts.functions ?? registry).filter((f) => !(opts.namespace && STORAGE_FUNCTIONS.has(f.name)));
  if (specs.length < (opts.functions ?? registry).length)
    log(`storage migration acts on every resource of the cluster: its functions are not run with --namespace ${opts.namespace}`);
  await mkdir(opts.stateDir, { recursive: true });

  const bed: Testbed = await startTestbed({ withCluster: !opts.kubeconfig, log });
  const userKubeconfig = opts.kubeconfig ?? bed.cluster!.kubeconfigs.admin;
  // On the local apiserver the handlers act as the `outrigger` identity, held to the project's RBAC role, as
  // they are in a real deployment; on a real cluster they act as the kubeconfig's user.
  const handlerKubeconfig = opts.kubeconfig ?? bed.cluster!.kubeconfigs.outrigger;
  const clusterConfig: ClusterConfig = {
    id: clusterId,
    access: { kind: 'kubeconfig', path: handlerKubeconfig, ...(opts.context ? { context: opts.context } : {}) },
    ...(opts.controllerSelector ? { controllerSelector: opts.controllerSelector } : {}),
    // Storage migration acts on every resource of the cluster: on only when its functions run here.
    storage: {
      enabled: specs.some((f) => f.name === 'storage-poll'),
      migrations: 'outrigger',
      ...((opts.oneApiserver ?? !opts.kubeconfig) ? { reporters: [{ id: 'apiserver' }] } : {}),
      ...(opts.storageGroups ? { groups: opts.storageGroups } : {}),
      ...(opts.migratorKubeconfig || !opts.kubeconfig
        ? { migratorAccess: { kind: 'kubeconfig' as const, path: opts.migratorKubeconfig ?? bed.cluster!.kubeconfigs.migrator } }
        : {}),
    },
  };
  const deadLetterFile = join(opts.stateDir, 'dead-letter.jsonl');
  const deadLetter = new FileDeadLetterSink(deadLetterFile);
  const queues = new Map<string, LocalQueue>();
  const syncQueues = new Map<string, LocalQueue>();
  // The events queue is named as a deployment names it, so the router reads its cluster from it as in AWS.
  const localQueues = new QueueUrls('http://localhost/000000000000/outrigger-local-');
  // The forwarder signs with its cluster's key, derived from a secret of this process, and the router verifies
  // with it: events are taken for the parent's state as in a deployment whose forwarder has its key.
  const secret = randomBytes(32).toString('hex');
  setEnvironment({
    signingSecret: () => Promise.resolve(secret),
    queues: localQueues,
    // With --namespace, every function's client lists and writes in that namespace only (shared/kube/client.ts).
    clusters: new Clusters([clusterConfig], { namespace: opts.namespace }),
    state: openState({ tableName: bed.tableName, endpoint: bed.dynamodb.endpoint }),
    deadLetter,
    syncSink: new LocalSyncSink(syncQueues, log),
    // A delay a failed message asked for (a hook's Retry-After) replaces its queue's backoff, as in AWS.
    retry: async (records, asked) => {
      for (const q of queues.values()) await q.retry()(records, asked);
    },
  });
  const source: KubeClient = connect(clusterConfig.access);
  // The map function invokes Lambda hooks through the real Lambda client, pointed at a local endpoint.
  const lambda = specs.some((f) => f.callsHooks) ? await startLambdaEndpoint(opts.hooks ?? (await exampleHooks())) : undefined;
  if (lambda) process.env.OUTRIGGER_LAMBDA_ENDPOINT = lambda.url;
  // Hooks written on this machine are served on loopback, which a deployment reaches only when it lists it.
  process.env.OUTRIGGER_WEBHOOK_ALLOW ??= JSON.stringify(LOCAL_WEBHOOK_ALLOW);

  /**
   * The functions in their Lambda containers: their cluster reached with the apiserver's bearer tokens read from
   * a local Secrets Manager endpoint (as a cluster outside EKS is), their sends reaching this runtime's queues
   * through a local SQS endpoint, everything else as above, in the variables the stack would set. The queues are
   * made below, before any function runs; the SQS endpoint reads them when a function sends.
   */
  async function startContainers() {
    const arn = (name: string) => `arn:aws:secretsmanager:us-east-1:000000000000:secret:outrigger-local-${name}`;
    const controllers = await bearerAccess(handlerKubeconfig, opts.context);
    const migratorKubeconfig = opts.migratorKubeconfig ?? bed.cluster?.kubeconfigs.migrator;
    const migrator = migratorKubeconfig ? await bearerAccess(migratorKubeconfig) : undefined;
    const secrets = await startSecretsEndpoint({
      [arn('controllers')]: controllers.token,
      ...(migrator ? { [arn('migrator')]: migrator.token } : {}),
      [arn('signing')]: secret,
    });
    const consumed = new Map<string, LocalQueue>();
    const sqs = await startSqsEndpoint({ cluster: clusterId, queues: syncQueues, consumed, deadLetter, log });
    const { migratorAccess: _, ...storage } = clusterConfig.storage ?? {};
    const containerCluster = {
      ...clusterConfig,
      access: {
        kind: 'secret',
        server: controllers.server,
        ...(controllers.caData ? { caData: controllers.caData } : {}),
        secretArn: arn('controllers'),
        ...(migrator ? { migratorTokenSecretArn: arn('migrator') } : {}),
      },
      storage,
    };
    const env: Record<string, string> = {
      OUTRIGGER_CLUSTERS: JSON.stringify([containerCluster]),
      OUTRIGGER_TABLE: bed.tableName,
      OUTRIGGER_DYNAMODB_ENDPOINT: bed.dynamodb.endpoint,
      OUTRIGGER_QUEUE_URL_PREFIX: sqs.prefix,
      // The SQS client sends to a queue URL's host anyway; named, it says so without a warning on every send.
      AWS_ENDPOINT_URL_SQS: sqs.prefix.slice(0, sqs.prefix.indexOf('/', 'http://'.length)),
      OUTRIGGER_DEAD_LETTER_QUEUE_URL: sqs.deadLetterUrl,
      OUTRIGGER_HOOK_SECRET_ARN: arn('signing'),
      OUTRIGGER_WEBHOOK_ALLOW: process.env.OUTRIGGER_WEBHOOK_ALLOW ?? JSON.stringify(LOCAL_WEBHOOK_ALLOW),
      ...(lambda ? { OUTRIGGER_LAMBDA_ENDPOINT: lambda.url } : {}),
      ...(process.env.OUTRIGGER_LOG_FORMAT ? { OUTRIGGER_LOG_FORMAT: process.env.OUTRIGGER_LOG_FORMAT } : {}),
      ...(process.env.POWERTOOLS_LOG_LEVEL ? { POWERTOOLS_LOG_LEVEL: process.env.POWERTOOLS_LOG_LEVEL } : {}),
      AWS_ENDPOINT_URL_SECRETS_MANAGER: secrets.endpoint,
      // Nothing here checks a signature; the SDK wants a region and credentials to sign with all the same.
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
    };
    const running = await startLambdaContainers({
      // What the runtime invokes: functions fed by a queue or a schedule (not the ingest function's URL).
      specs: specs.filter((f) => f.events || f.sync || f.schedule),
      env,
      dir: join(opts.stateDir, 'lambda'),
      tag: `${clusterId}-${randomBytes(3).toString('hex')}`,
      log,
    });
    return {
      invoke: running.invoke,
      /** Once the queues exist: the SQS endpoint learns each one's name, as its records' eventSourceARN gives it. */
      ready: async () => {
        for (const [name, queue] of queues) {
          const spec = handlers.get(name)!.spec;
          consumed.set(localQueues.name(clusterId, spec.events ? EVENTS_QUEUE : spec.sync!.target), queue);
        }
      },
      stop: async () => {
        await running.stop();
        await sqs.close();
        await secrets.close();
      },
    };
  }

  const timers: NodeJS.Timeout[] = [];
  const forwarders: Forwarder[] = [];
  const handlers = new Map<string, { spec: RuntimeFunction; handler: LambdaHandler }>();

  // Every function and its queue exists before the first event or tick, so no handler sends to a queue
  // that is not there yet.
  const containers = opts.lambdaContainers ? await startContainers() : undefined;
  for (const spec of specs) {
    const handler = containers ? (event: unknown) => containers.invoke(spec.name, event) : (spec.handler ?? (await loadHandler(spec)));
    handlers.set(spec.name, { spec, handler });
    if (spec.events && spec.sync) throw new Error(`${spec.name}: a function consumes either watch events or sync requests, not both`);
    if (!spec.events && !spec.sync) continue;
    const queue = new LocalQueue({
      name: spec.name,
      // Named as the deployment names its queues: the router reads its cluster from the events queue's, and a function
      // in its container sets a failed record's backoff on the queue its record names.
      ...(spec.events || opts.lambdaContainers
        ? { arn: `arn:aws:sqs:local:000000000000:${localQueues.name(clusterId, spec.events ? EVENTS_QUEUE : spec.sync!.target)}` }
        : {}),
      deliver: (event) => invokeAsLambda(spec, handler, event) as Promise<SQSBatchResponse | void>,
      deadLetter,
      ...(spec.receives ? { maxReceiveCount: spec.receives } : {}),
      onError: (err) => log(`${spec.name}: ${String(err)}`),
    });
    queues.set(spec.name, queue);
    if (spec.sync) syncQueues.set(spec.sync.target, queue);
  }
  await containers?.ready();

  for (const { spec, handler } of handlers.values()) {
    if (spec.events) {
      const queue = queues.get(spec.name)!;
      const resources = spec.events.resources;
      // The forwarder itself, as it runs in a cluster, with the local queue in place of SQS: what to watch
      // depends on the policies installed, and new resources are picked up without a restart.
      const forwarder = new Forwarder({
        cluster: clusterId,
        kube: source,
        sink: new LocalQueueSink(queue, deadLetter),
        source: `outrigger://${clusterId}/local-runtime`,
        key: forwarderKey(secret, clusterId),
        resources: () => resources(clusterConfig, source),
        definitions: spec.events.definitions,
        forget: () => spec.events?.forget?.(clusterId),
        ...(spec.events.wholeObjects ? { wholeObjects: () => spec.events!.wholeObjects!(clusterConfig, source) } : {}),
        ...(spec.events.statusChanges ? { statusChanges: () => spec.events!.statusChanges!(clusterConfig, source) } : {}),
        ...(spec.events.statusReads ? { statusReads: () => spec.events!.statusReads!(clusterConfig, source) } : {}),
        namespace: opts.namespace,
        refreshMs: WATCH_REFRESH_MS,
        log: (_level, m, f) => log(`${spec.name} forwarder: ${m}${f ? ` ${JSON.stringify(f)}` : ''}`),
      });
      // Every handler of this process is told of each definition's change by this forwarder (its `forget`): the
      // definitions are watched, not re-read on a timer.
      if (spec.events.definitions?.length && spec.events.forget) definitionsWatched(DEFINITION_RESYNC_MS);
      await forwarder.start();
      forwarders.push(forwarder);
    }
    if (spec.schedule) {
      const tick = () => invokeScheduled(spec, handler).catch((err: unknown) => log(`${spec.name}: ${String(err)}`));
      timers.push(setInterval(() => void tick(), spec.schedule.everyMinutes * 60_000));
      void tick();
    }
  }

  const runtime: Runtime = {
    kubeconfig: userKubeconfig,
    server: (await source.endpoint()).server,
    clusterId,
    dynamodbEndpoint: bed.dynamodb.endpoint,
    tableName: bed.tableName,
    deadLetterFile,
    lambdaEndpoint: lambda?.url,
    queues,
    forwarderStats: () => forwarders.map((f) => f.stats),
    sourceRequests: source.stats,
    runScheduled: async (name) => {
      const h = handlers.get(name);
      if (!h?.spec.schedule) throw new Error(`${name} is not a scheduled function`);
      return invokeScheduled(h.spec, h.handler);
    },
    settled: async () => {
      await Promise.all(forwarders.map((f) => f.synced()));
      await Promise.all(forwarders.map((f) => f.drained()));
      await Promise.all([...queues.values()].map((q) => q.idle()));
    },
    stop: async () => {
      for (const t of timers) clearInterval(t);
      await Promise.allSettled(forwarders.map((f) => f.stop()));
      definitionsWatched(undefined);
      // Before the queues: an invocation in flight ends with its container instead of holding a queue's stop.
      await containers?.stop();
      await Promise.allSettled([...queues.values()].map((q) => q.stop()));
      setEnvironment(undefined);
      await lambda?.stop();
      await bed.stop();
    },
  };
  await writeFile(
    join(opts.stateDir, 'runtime.json'),
    JSON.stringify(
      { kubeconfig: runtime.kubeconfig, server: runtime.server, dynamodb: runtime.dynamodbEndpoint, pid: process.pid },
      null,
      2,
    ),
  );
  return runtime;
}

/** The server, CA and bearer token of a kubeconfig's user, as a function outside EKS reaches its cluster. */
async function bearerAccess(kubeconfig: string, context?: string): Promise<{ server: string; caData: string | undefined; token: string }> {
  const endpoint = await kubeconfigEndpoint(kubeconfig, context);
  const authorization = (await endpoint.headers()).authorization ?? '';
  if (!authorization.startsWith('Bearer '))
    throw new Error(
      `${kubeconfig}: its user has no bearer token, which functions in their Lambda containers reach the cluster with (as a deployed function reaches one outside EKS)`,
    );
  const ca = endpoint.tls.ca;
  return {
    server: endpoint.server,
    caData: ca === undefined ? undefined : Buffer.from(Array.isArray(ca) ? ca.join('\n') : ca).toString('base64'),
    token: authorization.slice('Bearer '.length),
  };
}

async function invokeScheduled(spec: FunctionSpec, handler: LambdaHandler): Promise<unknown> {
  const event = {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '000000000000',
    time: new Date().toISOString(),
    region: 'local',
    resources: [`arn:aws:events:local:000000000000:rule/outrigger-${spec.name}`],
    detail: {},
  };
  return invokeAsLambda(spec, handler, event);
}
