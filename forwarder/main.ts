// The forwarder's process: configuration from the environment, the Kubernetes client (in-cluster service
// account, or KUBECONFIG), the SQS client (AWS credentials from EKS Pod Identity or IRSA, through the SDK's
// default chain), health and Prometheus metrics on one port, and a graceful stop on SIGTERM.
//   OUTRIGGER_CLUSTER_ID            the cluster's id in envelopes and state keys (required)
//   OUTRIGGER_EVENT_QUEUE_URL       this cluster's SQS FIFO events queue (required; each cluster has its own)
//   OUTRIGGER_DEAD_LETTER_QUEUE_URL where events too large for SQS go, with their reason (its dead-letter queue)
//   OUTRIGGER_FORWARDER_STATE       checkpoint file (an emptyDir volume survives container restarts)
//   OUTRIGGER_NAMESPACE             watch namespaced resources in this namespace only
//   OUTRIGGER_SQS_ENDPOINT          an SQS-compatible endpoint (tests)
//   OUTRIGGER_MAX_BUFFERED          envelopes held in memory at most (default 1000)
//   OUTRIGGER_REFRESH_MS            how often what to watch is read again besides on each definition's event
//                                   (default 10000)
//   OUTRIGGER_CLUSTERS              this cluster's entry, as the functions have it (for its storage settings),
//                                   or OUTRIGGER_CLUSTERS_FILE naming a file that holds it;
//                                   default: the cluster with default settings
//   PORT                            health and metrics (default 8080): /healthz, /readyz, /metrics
import { createServer } from 'node:http';
import { SQSClient } from '@aws-sdk/client-sqs';
import { functions } from '../functions/index.ts';
import { Clusters, clustersFromEnv, parseClusters } from '../shared/clusters.ts';
import { connect } from '../shared/kube/index.ts';
import { setEnvironment } from '../shared/lambda/environment.ts';
import { Forwarder, SqsEnvelopeSink } from './forwarder.ts';
import { metricsText } from './metrics.ts';

function required(name: string): string {
  const v = process.env[name];
  if (!v) {
    process.stderr.write(`forwarder: ${name} is not set\n`);
    process.exit(2);
  }
  return v;
}

const cluster = required('OUTRIGGER_CLUSTER_ID');
const queueUrl = required('OUTRIGGER_EVENT_QUEUE_URL');
const endpoint = process.env.OUTRIGGER_SQS_ENDPOINT;
const log = (message: string, fields: Record<string, unknown> = {}) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), message, ...fields })}\n`);
const kube = connect({ kind: 'kubeconfig', path: process.env.KUBECONFIG || undefined });
// The controllers' sources read the cluster's settings from the functions' environment; the forwarder has the
// settings and nothing else of it (no table, no queues of the functions).
const unused = (what: string) => () => {
  throw new Error(`the forwarder has no ${what}`);
};
setEnvironment({
  clusters: new Clusters(process.env.OUTRIGGER_CLUSTERS || process.env.OUTRIGGER_CLUSTERS_FILE ? clustersFromEnv() : parseClusters(JSON.stringify([{ id: cluster, access: { kind: 'kubeconfig' } }]))),
  get state(): never {
    return unused('state table')();
  },
  get deadLetter(): never {
    return unused('dead-letter sink of the functions')();
  },
  get syncSink(): never {
    return unused('sync queues')();
  },
});
const sqs = new SQSClient(endpoint ? { endpoint, region: process.env.AWS_REGION ?? 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } } : {});
// What the router consumes is what must be watched: the same function the local runtime asks.
const router = functions.find((f) => f.name === 'router');
if (!router?.events) throw new Error('the function registry has no router');
const routerEvents = router.events;

const forwarder = new Forwarder({
  cluster,
  kube,
  sink: new SqsEnvelopeSink(sqs, queueUrl, process.env.OUTRIGGER_DEAD_LETTER_QUEUE_URL),
  resources: () => routerEvents.resources(cluster, kube),
  definitions: routerEvents.definitions,
  forget: () => routerEvents.forget?.(cluster),
  ...(routerEvents.wholeObjects ? { wholeObjects: () => routerEvents.wholeObjects!(cluster, kube) } : {}),
  namespace: process.env.OUTRIGGER_NAMESPACE || undefined,
  stateFile: process.env.OUTRIGGER_FORWARDER_STATE || undefined,
  maxBuffered: Number(process.env.OUTRIGGER_MAX_BUFFERED ?? 1000),
  refreshMs: Number(process.env.OUTRIGGER_REFRESH_MS ?? 10_000),
  log,
});

const server = createServer((req, res) => {
  if (req.url === '/healthz') {
    // Alive: the process answers. Ready: every watch listed and SQS takes what is sent.
    res.writeHead(200).end('ok\n');
  } else if (req.url === '/readyz') {
    const ok = forwarder.healthy();
    res.writeHead(ok ? 200 : 503).end(ok ? 'ready\n' : `not ready${forwarder.lastSendError ? `: ${forwarder.lastSendError}` : ''}\n`);
  } else if (req.url === '/metrics') {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(metricsText(forwarder.stats));
  } else {
    res.writeHead(404).end();
  }
});
server.listen(Number(process.env.PORT ?? 8080), () => log('forwarder listening', { port: Number(process.env.PORT ?? 8080), cluster }));

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130);
    stopping = true;
    log(`${signal}: sending what is buffered, then stopping`);
    void forwarder.stop({ flush: true }).then(() => {
      server.close();
      process.exit(0);
    });
  });
}

await forwarder.start();
log('forwarder started', { watches: forwarder.stats.watches });
