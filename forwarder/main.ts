// The forwarder's process: configuration from the environment, the Kubernetes client (in-cluster service
// account, or KUBECONFIG), the SQS client (AWS credentials from EKS Pod Identity or IRSA, through the SDK's
// default chain), health and Prometheus metrics on one port, and a graceful stop on SIGTERM.
// Its environment variables: docs/reference/configuration.md#the-forwarder.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DEFINITION_RESYNC_MS, definitionsWatched } from '../functions/cluster-cache.ts';
import { functions } from '../functions/index.ts';
import { clustersFromEnv, parseClusters } from '../shared/clusters.ts';
import { connect } from '../shared/kube/index.ts';
import type { Log } from '../shared/log.ts';
import { ConfigMapCheckpoint, type CheckpointStore } from './checkpoint.ts';
import { Forwarder, SqsEnvelopeSink } from './forwarder.ts';
import { LeaderElector } from './leader.ts';
import { metricsText } from './metrics.ts';

function refuse(message: string): never {
  process.stderr.write(`forwarder: ${message}\n`);
  process.exit(2);
}

function required(name: string): string {
  return process.env[name] || refuse(`${name} is not set`);
}

function seconds(name: string, fallback: number): number {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(v) || v <= 0) refuse(`${name} must be a positive number of seconds`);
  return v * 1000;
}

/** The forwarder's own namespace: where its Lease and checkpoint live. */
function ownNamespace(): string {
  if (process.env.OUTRIGGER_POD_NAMESPACE) return process.env.OUTRIGGER_POD_NAMESPACE;
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim();
  } catch {
    return refuse(
      'OUTRIGGER_POD_NAMESPACE is not set and no service account namespace is mounted: where do the Lease and checkpoint live?',
    );
  }
}

function bytes(name: string, fallback: number): number {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isSafeInteger(v) || v <= 0) refuse(`${name} must be a positive number of bytes`);
  return v;
}

const cluster = required('OUTRIGGER_CLUSTER_ID');
const queueUrl = required('OUTRIGGER_EVENT_QUEUE_URL');
const endpoint = process.env.OUTRIGGER_SQS_ENDPOINT;
// A JSON line a record: the level before the message and the fields right after it, where readers of the
// log (the tests among them) look for `"message":"...","<field>":`.
const log: Log = (level, message, fields = {}) =>
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
const kube = connect({ kind: 'kubeconfig', path: process.env.KUBECONFIG || undefined });
let configs;
try {
  configs =
    process.env.OUTRIGGER_CLUSTERS || process.env.OUTRIGGER_CLUSTERS_FILE
      ? clustersFromEnv()
      : parseClusters(JSON.stringify([{ id: cluster, access: { kind: 'kubeconfig' } }]));
} catch (err) {
  refuse((err as Error).message);
}
// Its own entry tells the controllers' sources its settings (storage: which migrations API to watch).
const config =
  configs.find((c) => c.id === cluster) ??
  refuse(`the cluster configuration has no entry for OUTRIGGER_CLUSTER_ID ${cluster} (it names ${configs.map((c) => c.id).join(', ')})`);
const sqs = new SQSClient(
  endpoint ? { endpoint, region: process.env.AWS_REGION ?? 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } } : {},
);
// What the router consumes is what must be watched: the same function the local runtime asks.
const router = functions.find((f) => f.name === 'router');
if (!router?.events) throw new Error('the function registry has no router');
const routerEvents = router.events;

if (process.env.OUTRIGGER_CHECKPOINT_CONFIGMAP && process.env.OUTRIGGER_FORWARDER_STATE)
  refuse('OUTRIGGER_CHECKPOINT_CONFIGMAP and OUTRIGGER_FORWARDER_STATE are both set: set one');
const needsNamespace = Boolean(process.env.OUTRIGGER_CHECKPOINT_CONFIGMAP || process.env.OUTRIGGER_LEADER_ELECTION_LEASE);
const namespace = needsNamespace ? ownNamespace() : undefined;
const checkpoint: CheckpointStore | undefined = process.env.OUTRIGGER_CHECKPOINT_CONFIGMAP
  ? new ConfigMapCheckpoint({ kube, namespace: namespace!, name: process.env.OUTRIGGER_CHECKPOINT_CONFIGMAP, log })
  : undefined;
const identity = process.env.OUTRIGGER_POD_NAME || `${hostname()}-${process.pid}`;
const elector = process.env.OUTRIGGER_LEADER_ELECTION_LEASE
  ? new LeaderElector({
      kube,
      namespace: namespace!,
      name: process.env.OUTRIGGER_LEADER_ELECTION_LEASE,
      identity,
      leaseDurationMs: seconds('OUTRIGGER_LEASE_DURATION_SECONDS', 15),
      renewDeadlineMs: seconds('OUTRIGGER_RENEW_DEADLINE_SECONDS', 10),
      retryPeriodMs: seconds('OUTRIGGER_RETRY_PERIOD_SECONDS', 2),
      log,
    })
  : undefined;

// This cluster's forwarder key (`outrigger forwarder-key`), from the Secret mounted at OUTRIGGER_FORWARDER_KEY_FILE:
// signed envelopes spare history a read of the parent per change. Without it, envelopes go unsigned (still correct).
function forwarderKey(): string | undefined {
  const file = process.env.OUTRIGGER_FORWARDER_KEY_FILE;
  let text: string;
  try {
    if (!file) throw new Error('OUTRIGGER_FORWARDER_KEY_FILE is not set');
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    log('warn', 'no forwarder key: envelopes are sent unsigned, and history reads each parent it records', { error: String(err) });
    return undefined;
  }
  if (!/^[0-9a-f]{64}$/.test(text)) refuse(`${file} does not hold a forwarder key (64 hex digits, as outrigger forwarder-key prints)`);
  return text;
}

// This process watches the definitions and forgets what it keeps of them on each one's event: no re-read on its
// refresh timer (docs/operations/cost.md#definitions-are-watched).
definitionsWatched(DEFINITION_RESYNC_MS);
const forwarder = new Forwarder({
  cluster,
  key: forwarderKey(),
  kube,
  sink: new SqsEnvelopeSink(sqs, queueUrl, process.env.OUTRIGGER_DEAD_LETTER_QUEUE_URL),
  resources: () => routerEvents.resources(config, kube),
  definitions: routerEvents.definitions,
  forget: () => routerEvents.forget?.(cluster),
  ...(routerEvents.wholeObjects ? { wholeObjects: () => routerEvents.wholeObjects!(config, kube) } : {}),
  ...(routerEvents.statusChanges ? { statusChanges: () => routerEvents.statusChanges!(config, kube) } : {}),
  ...(routerEvents.statusReads ? { statusReads: () => routerEvents.statusReads!(config, kube) } : {}),
  namespace: process.env.OUTRIGGER_NAMESPACE || undefined,
  stateFile: process.env.OUTRIGGER_FORWARDER_STATE || undefined,
  checkpoint,
  maxBuffered: Number(process.env.OUTRIGGER_MAX_BUFFERED ?? 1000),
  maxBufferedBytes: bytes('OUTRIGGER_MAX_BUFFERED_BYTES', 16 * 1024 * 1024),
  pageBytes: bytes('OUTRIGGER_LIST_PAGE_BYTES', 4 * 1024 * 1024),
  refreshMs: Number(process.env.OUTRIGGER_REFRESH_MS ?? 10_000),
  log,
});

const server = createServer((req, res) => {
  if (req.url === '/healthz') {
    // Alive: the process answers. Ready: every watch listed and SQS takes what is sent.
    res.writeHead(200).end('ok\n');
  } else if (req.url === '/readyz' && elector && !elector.isLeader) {
    // A standby is ready: it is what a rollout waits for before stopping the leader, which hands it the Lease.
    res.writeHead(200).end(`standby; leader: ${elector.leader || 'none'}\n`);
  } else if (req.url === '/readyz') {
    const ok = forwarder.healthy();
    res.writeHead(ok ? 200 : 503).end(ok ? 'ready\n' : `not ready${forwarder.lastSendError ? `: ${forwarder.lastSendError}` : ''}\n`);
  } else if (req.url === '/metrics') {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(metricsText(forwarder.stats));
  } else {
    res.writeHead(404).end();
  }
});
server.listen(Number(process.env.PORT ?? 8080), () => {
  const address = server.address();
  log('info', 'forwarder listening', { port: typeof address === 'object' && address ? address.port : process.env.PORT, cluster });
});

let stopping = false;
let started = false;
const standby = new AbortController();
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130);
    stopping = true;
    if (!started) {
      log('info', `${signal}: stopping (not leading)`);
      standby.abort();
      process.exit(0);
    }
    log('info', `${signal}: sending what is buffered, then stopping`);
    // Flushed and checkpointed before the Lease goes back, so that the next leader reads the last checkpoint.
    void forwarder
      .stop({ flush: true })
      .catch((err: unknown) => log('error', 'stopping failed', { error: String(err) }))
      .then(() => elector?.release())
      .then(() => {
        server.close();
        process.exit(0);
      });
  });
}

if (elector) {
  log('info', 'leader election: standing by', { lease: process.env.OUTRIGGER_LEADER_ELECTION_LEASE, namespace, identity });
  await elector.acquire((reason) => {
    // Another replica may lead now: not one more event from this one. Kubernetes restarts the container, which
    // stands by again.
    log('error', 'leader election: lost the lease; exiting', { reason });
    process.exit(1);
  }, standby.signal);
}
started = true;
await forwarder.start();
log('info', 'forwarder started', {
  watches: forwarder.stats.watches,
  checkpoint: checkpoint?.where ?? process.env.OUTRIGGER_FORWARDER_STATE,
});
