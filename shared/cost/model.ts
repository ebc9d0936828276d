// The cost model (docs/operations/cost.md#the-formula): what a fleet's clusters make AWS bill in a 30-day month, from
// per-change and per-invocation figures measured by `npm run bench:cost` (bench/cost.ts) and the price table
// (shared/cost/prices.ts), beside the same controllers run in each cluster. Pure: the bench and `outrigger cost`
// both call it.
import type { RegionPrices } from './prices.ts';

/** A 30-day month. */
export const MINUTES_PER_MONTH = 43_200;
export const HOURS_PER_MONTH = MINUTES_PER_MONTH / 60;
/** SQS bills each 64 KB of a request's payload as one request. */
export const SQS_BILLING_CHUNK_BYTES = 64 * 1024;

/** What one kind of Lambda invocation costs, as measured. */
export interface InvocationFigures {
  /** Handler time per invocation (ms), as measured: an upper bound on a loaded machine. */
  ms: number;
  /** DynamoDB request units per invocation. */
  readUnits: number;
  writeUnits: number;
}

/** Per history change: one parent's template changed, and the rolling update that follows, at `replicas` pods. */
export interface ChangeFigures {
  replicas: number;
  /** Events-queue (router) and history-queue messages per change. */
  routerMessages: number;
  historyMessages: number;
  /** Payload bytes per message. */
  routerMessageBytes: number;
  historyMessageBytes: number;
  /** Messages per invocation (the batches the queues handed over). */
  routerBatch: number;
  historyBatch: number;
  router: InvocationFigures;
  history: InvocationFigures;
}

export interface ScheduledFigures {
  everyMinutes: number;
  /** One rule per cluster (the storage poll: one per reporter) instead of one for the fleet. */
  perCluster: boolean;
  /** Handler time per invocation: `ms` plus `msPerCluster` for each cluster it covers (fleet-wide ones). */
  ms: number;
  msPerCluster: number;
  /** DynamoDB units per cluster covered, per invocation. */
  readUnits: number;
  writeUnits: number;
}

export interface Coefficients {
  /** Where the figures come from: the bench run's date and machine. */
  measured: string;
  change: ChangeFigures;
  scheduled: Record<string, ScheduledFigures>;
  /** A MapController input changed: one map sync (bench:map, incremental). */
  mapInputChange: InvocationFigures;
  /** The storage poll's time per resource it reports on (built-in resources included). */
  storagePollMsPerResource: number;
  /** The built-in resources every poll reports on besides the CRDs. */
  storageBuiltinResources: number;
}

/** How AWS polls an SQS queue an event source mapping reads (docs/operations/cost.md#idle-polling). */
export interface Polling {
  /** Concurrent pollers on an idle queue: 5, or as few as 2 without a maximum concurrency. */
  pollers: number;
  /** Each poller's long poll: SQS's maximum wait. */
  waitSeconds: number;
}

export const DOCUMENTED_POLLING: Polling = { pollers: 5, waitSeconds: 20 };

export interface Fleet {
  clusters: number;
  /** Per cluster: parents' template changes a day, each a rolling update of `replicas` pods. */
  changesPerDay: number;
  replicas: number;
  /** Per cluster: MapController inputs, and how many of them change a day. */
  mapInputs: number;
  mapInputChangesPerDay: number;
  /** Per cluster: CRDs under the storage poll. */
  crds: number;
  /** Storage migration off in every cluster (storage.enabled: false): no storage poll. Default: on. */
  storageOff?: boolean;
  /** Metacontroller's APIs off in every cluster (metacontroller.enabled: false). Default: on. */
  metacontrollerOff?: boolean;
  /** Queues a cluster has that event source mappings poll (the events queue and one per sync target). */
  polledQueuesPerCluster: number;
  /** Every function's memory (infra/functions.ts: 512 MB unless configured). */
  memoryMb: number;
  polling: Polling;
}

/** A pod as the in-cluster way (or the forwarder) runs it: its resource requests. */
export interface Pod {
  name: string;
  cpu: number;
  memoryGiB: number;
  /** Whether the figure is a published request, or a stand-in where none is published. */
  published: boolean;
  /** What it runs for, where a cluster may turn that off (Fleet.storageOff, Fleet.metacontrollerOff). */
  serves?: 'storage' | 'metacontroller';
}

export interface Counts {
  lambda: Record<string, { invocations: number; gbSeconds: number }>;
  sqs: { send: number; receive: number; delete: number; changeVisibility: number; idleReceive: number };
  dynamodb: { readUnits: number; writeUnits: number };
  scheduledEvents: number;
}

export interface Bill {
  counts: Counts;
  usd: { lambda: number; sqs: number; dynamodb: number; eventbridge: number; total: number };
}

/** The scheduled function whose work grows with the cluster's resources. */
export const STORAGE_POLL = 'storage-poll';

const chunks = (bytes: number) => Math.max(1, Math.ceil(bytes / SQS_BILLING_CHUNK_BYTES));

/** Idle ReceiveMessage calls a month on one polled queue. */
export function idleReceivesPerQueue(polling: Polling): number {
  return polling.pollers * (60 / polling.waitSeconds) * MINUTES_PER_MONTH;
}

/** What the fleet makes AWS count in a month. */
export function monthlyCounts(fleet: Fleet, c: Coefficients): Counts {
  const gb = fleet.memoryMb / 1024;
  const lambda: Counts['lambda'] = {};
  const add = (fn: string, invocations: number, ms: number) => {
    const l = (lambda[fn] ??= { invocations: 0, gbSeconds: 0 });
    l.invocations += invocations;
    l.gbSeconds += (ms / 1000) * gb;
  };
  let readUnits = 0;
  let writeUnits = 0;
  const days = MINUTES_PER_MONTH / 1440;

  // History: changes scale with the rollout's size (each pod replaced is a few events).
  const scale = fleet.replicas / c.change.replicas;
  const changes = fleet.clusters * fleet.changesPerDay * days;
  const routerMessages = changes * c.change.routerMessages * scale;
  const historyMessages = changes * c.change.historyMessages * scale;
  const routerInvocations = routerMessages / c.change.routerBatch;
  const historyInvocations = historyMessages / c.change.historyBatch;
  add('router', routerInvocations, routerInvocations * c.change.router.ms);
  add('history', historyInvocations, historyInvocations * c.change.history.ms);
  readUnits += routerInvocations * c.change.router.readUnits + historyInvocations * c.change.history.readUnits;
  writeUnits += routerInvocations * c.change.router.writeUnits + historyInvocations * c.change.history.writeUnits;

  // MapController inputs: each change one map sync (its parent's), routed as one event.
  const mapSyncs = fleet.clusters * fleet.mapInputChangesPerDay * days;
  add('map', mapSyncs, mapSyncs * c.mapInputChange.ms);
  add('router', mapSyncs, mapSyncs * c.change.router.ms);
  readUnits += mapSyncs * c.mapInputChange.readUnits;
  writeUnits += mapSyncs * c.mapInputChange.writeUnits;

  // Scheduled functions: fleet-wide rules cover every cluster per invocation; per-cluster ones run per cluster.
  let scheduledEvents = 0;
  for (const [fn, s] of Object.entries(c.scheduled)) {
    if (fn === STORAGE_POLL && fleet.storageOff) continue;
    const perMonth = MINUTES_PER_MONTH / s.everyMinutes;
    const invocations = s.perCluster ? perMonth * fleet.clusters : perMonth;
    const covered = s.perCluster ? 1 : fleet.clusters;
    let ms = s.ms + s.msPerCluster * covered;
    // The storage poll reports on every resource of its cluster: its time grows with them (its DynamoDB work, the
    // leader's lease and the reporter's last poll, does not).
    if (fn === STORAGE_POLL) ms += c.storagePollMsPerResource * (fleet.crds + c.storageBuiltinResources);
    add(fn, invocations, invocations * ms);
    scheduledEvents += invocations;
    readUnits += invocations * covered * s.readUnits;
    writeUnits += invocations * covered * s.writeUnits;
  }

  // SQS: each message sent once (the forwarder and the router send what is waiting, a message a call at these
  // rates); each invocation one receive that returned its batch and one delete of it; idle polls on every
  // polled queue whatever the load.
  const send = routerMessages * chunks(c.change.routerMessageBytes) + historyMessages * chunks(c.change.historyMessageBytes) + 2 * mapSyncs;
  const receive = routerInvocations + historyInvocations + 2 * mapSyncs;
  const idleReceive = fleet.clusters * fleet.polledQueuesPerCluster * idleReceivesPerQueue(fleet.polling);
  return {
    lambda,
    sqs: { send, receive, delete: receive, changeVisibility: 0, idleReceive },
    dynamodb: { readUnits, writeUnits },
    scheduledEvents,
  };
}

const round2 = (n: number) => Math.round(n * 100) / 100;

export function bill(counts: Counts, prices: RegionPrices): Bill {
  const invocations = Object.values(counts.lambda).reduce((n, l) => n + l.invocations, 0);
  const gbSeconds = Object.values(counts.lambda).reduce((n, l) => n + l.gbSeconds, 0);
  const lambda = (invocations / 1e6) * prices.lambdaRequests.usd + gbSeconds * prices.lambdaGbSeconds.usd;
  const s = counts.sqs;
  const sqs = ((s.send + s.receive + s.delete + s.changeVisibility + s.idleReceive) / 1e6) * prices.sqsFifoRequests.usd;
  const dynamodb =
    (counts.dynamodb.readUnits / 1e6) * prices.dynamodbReadUnits.usd + (counts.dynamodb.writeUnits / 1e6) * prices.dynamodbWriteUnits.usd;
  const eventbridge = (counts.scheduledEvents / 1e6) * prices.scheduledEvents.usd;
  return {
    counts,
    usd: {
      lambda: round2(lambda),
      sqs: round2(sqs),
      dynamodb: round2(dynamodb),
      eventbridge: round2(eventbridge),
      total: round2(lambda + sqs + dynamodb + eventbridge),
    },
  };
}

/**
 * A pod on EKS Fargate: its requests plus the 256 MB Fargate adds for the kubelet and its peers, rounded up to
 * the smallest configuration that holds them (0.25 vCPU with 0.5, 1 or 2 GB; 0.5 vCPU with 1 to 4 GB; 1 vCPU
 * with 2 to 8 GB; docs/operations/cost.md#in-cluster).
 */
export function fargateSize(pod: Pick<Pod, 'cpu' | 'memoryGiB'>): { vcpu: number; memoryGiB: number } {
  const memory = pod.memoryGiB + 0.25;
  const options: Array<[number, number[]]> = [
    [0.25, [0.5, 1, 2]],
    [0.5, [1, 2, 3, 4]],
    [1, [2, 3, 4, 5, 6, 7, 8]],
    [2, [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]],
  ];
  for (const [vcpu, memories] of options) {
    if (vcpu < pod.cpu) continue;
    const m = memories.find((g) => g >= memory);
    if (m !== undefined) return { vcpu, memoryGiB: m };
  }
  throw new Error(`a pod of ${pod.cpu} vCPU and ${pod.memoryGiB} GiB is larger than this model's Fargate sizes`);
}

/** Pods a month: on Fargate (each sized as Fargate sizes it), and as their share of a general purpose node. */
export function podsMonthly(pods: readonly Pod[], prices: RegionPrices): { fargate: number; node: number } {
  let fargate = 0;
  let node = 0;
  for (const pod of pods) {
    const size = fargateSize(pod);
    fargate += (size.vcpu * prices.fargateVcpuHours.usd + size.memoryGiB * prices.fargateGbHours.usd) * HOURS_PER_MONTH;
    // The larger of its CPU and memory shares: what it keeps from other pods.
    const share = Math.max(pod.cpu / prices.nodeHours.vcpu, pod.memoryGiB / prices.nodeHours.memoryGiB);
    node += share * prices.nodeHours.usd * HOURS_PER_MONTH;
  }
  return { fargate: round2(fargate), node: round2(node) };
}

/**
 * The in-cluster way, per cluster: Metacontroller, kube-storage-version-migrator's migrator and trigger, and a
 * history controller. None publishes resource requests (their manifests and Metacontroller's chart set none), so
 * each is the Metacontroller chart's commented example (100m, 128Mi): on Fargate the smallest size.
 */
export const IN_CLUSTER_PODS: readonly Pod[] = [
  { name: 'metacontroller', cpu: 0.1, memoryGiB: 0.125, published: false, serves: 'metacontroller' },
  { name: 'storage-version-migrator migrator', cpu: 0.1, memoryGiB: 0.125, published: false, serves: 'storage' },
  { name: 'storage-version-migrator trigger', cpu: 0.1, memoryGiB: 0.125, published: false, serves: 'storage' },
  { name: 'history controller', cpu: 0.1, memoryGiB: 0.125, published: false },
];

/** Outrigger's own pods in each cluster: the forwarder's two replicas (deploy/forwarder/base/deployment.yaml). */
export const FORWARDER_PODS: readonly Pod[] = [
  { name: 'forwarder (leader)', cpu: 0.05, memoryGiB: 0.125, published: true },
  { name: 'forwarder (standby)', cpu: 0.05, memoryGiB: 0.125, published: true },
];

export interface Estimate {
  region: string;
  fleet: Fleet;
  aws: Bill;
  /** Outrigger's AWS bill and its forwarders, on Fargate and as node shares. */
  outrigger: { fargate: number; node: number };
  inCluster: { fargate: number; node: number };
  /** The in-cluster way's pods a cluster: those of the controllers the clusters run. */
  inClusterPods: number;
  /** Outrigger over the in-cluster way, each on Fargate, and each as node shares. */
  ratio: { fargate: number; node: number };
}

export function estimate(fleet: Fleet, c: Coefficients, prices: RegionPrices): Estimate {
  const aws = bill(monthlyCounts(fleet, c), prices);
  const forwarders = podsMonthly(FORWARDER_PODS, prices);
  // The in-cluster way runs only the controllers the clusters use, too.
  const off = (pod: Pod) => (pod.serves === 'storage' && fleet.storageOff) || (pod.serves === 'metacontroller' && fleet.metacontrollerOff);
  const inClusterPods = IN_CLUSTER_PODS.filter((pod) => !off(pod));
  const inCluster = podsMonthly(inClusterPods, prices);
  const outrigger = {
    fargate: round2(aws.usd.total + fleet.clusters * forwarders.fargate),
    node: round2(aws.usd.total + fleet.clusters * forwarders.node),
  };
  const fleetInCluster = { fargate: round2(fleet.clusters * inCluster.fargate), node: round2(fleet.clusters * inCluster.node) };
  const ratio = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 100) / 100 : 0);
  return {
    region: prices.region,
    fleet,
    aws,
    outrigger,
    inCluster: fleetInCluster,
    inClusterPods: inClusterPods.length,
    ratio: { fargate: ratio(outrigger.fargate, fleetInCluster.fargate), node: ratio(outrigger.node, fleetInCluster.node) },
  };
}
