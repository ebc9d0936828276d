// `outrigger cost`: what a fleet described on the command line would cost a month, by the formula and figures
// `npm run bench:cost` measures with (shared/cost/; docs/operations/cost.md).
import { parseArgs } from 'node:util';
import { syncTargetsIn } from '../functions/index.ts';
import { clusterConfigSchema } from '../shared/clusters.ts';
import { DOCUMENTED_POLLING, estimate, type Estimate, type Fleet } from '../shared/cost/model.ts';
import { formatEstimate } from '../shared/cost/format.ts';
import { PRICES, pricesFor } from '../shared/cost/prices.ts';
import { MEASURED_COEFFICIENTS } from '../shared/cost/reference.ts';

/** Each function's memory unless the deployment says otherwise: infra/functions.ts's DEFAULT_MEMORY_MB (a unit test holds them equal). */
export const DEFAULT_MEMORY_MB = 512;

export const costUsage = `usage: outrigger cost [--clusters N] [--changes-per-day N] [--replicas N] [--map-inputs N]
                     [--map-input-changes-per-day N] [--crds N] [--storage on|off] [--metacontroller on|off]
                     [--region REGION] [--memory-mb N] [--pollers N] [--json]

What Outrigger would cost a month (30 days) for a fleet of N clusters alike, each with: parents' template changes
a day (--changes-per-day, each a rolling update of --replicas pods), MapController inputs (--map-inputs, and how
many change a day: --map-input-changes-per-day, default all once a day), CRDs under the storage poll (--crds).
--storage off and --metacontroller off price clusters configured so (storage.enabled, metacontroller.enabled:
false): fewer queues to poll, and no storage poll.
Prints dollars per AWS service (Lambda, SQS, DynamoDB, EventBridge) from the price table in shared/cost/prices.ts
(--region: ${Object.keys(PRICES).join(' or ')}), the forwarders' pods, and the same controllers run in each cluster
(Metacontroller, kube-storage-version-migrator, a history controller) on Fargate and as node shares. The
per-change figures are those bench:cost last recorded (shared/cost/reference.ts); --pollers is the event source
mappings' pollers on an idle queue (5 as deployed, with a maximum concurrency; AWS documents as few as 2 without).
docs/operations/cost.md explains each line.
`;

const count = (name: string, value: string | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} takes a number of 0 or more, not ${JSON.stringify(value)}`);
  return n;
};

export function parseCostArgs(argv: string[]): { fleet: Fleet; region: string; json: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      clusters: { type: 'string' },
      'changes-per-day': { type: 'string' },
      replicas: { type: 'string' },
      'map-inputs': { type: 'string' },
      'map-input-changes-per-day': { type: 'string' },
      crds: { type: 'string' },
      storage: { type: 'string', default: 'on' },
      metacontroller: { type: 'string', default: 'on' },
      region: { type: 'string', default: 'us-east-1' },
      'memory-mb': { type: 'string' },
      pollers: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const clusters = count('clusters', values.clusters, 1);
  if (clusters < 1 || !Number.isInteger(clusters)) throw new Error(`--clusters takes a whole number of 1 or more, not ${values.clusters}`);
  const mapInputs = count('map-inputs', values['map-inputs'], 0);
  const replicas = count('replicas', values.replicas, MEASURED_COEFFICIENTS.change.replicas);
  const pollers = count('pollers', values.pollers, DOCUMENTED_POLLING.pollers);
  if (pollers < 1) throw new Error('--pollers takes 1 or more');
  pricesFor(values.region);
  const onOff = (name: string, value: string): boolean => {
    if (value !== 'on' && value !== 'off') throw new Error(`--${name} takes on or off, not ${JSON.stringify(value)}`);
    return value === 'on';
  };
  const storage = onOff('storage', values.storage);
  const metacontroller = onOff('metacontroller', values.metacontroller);
  if (!metacontroller && mapInputs > 0)
    throw new Error('--map-inputs: a cluster with --metacontroller off serves no MapController; leave one of them out');
  // The queues a cluster so configured gets (infra/cluster.ts): its events queue and one per sync target it runs.
  const config = clusterConfigSchema.parse({
    id: 'estimate',
    access: { kind: 'kubeconfig' },
    storage: { enabled: storage },
    metacontroller: { enabled: metacontroller },
  });
  return {
    region: values.region,
    json: values.json,
    fleet: {
      clusters,
      changesPerDay: count('changes-per-day', values['changes-per-day'], 0),
      replicas,
      mapInputs,
      mapInputChangesPerDay: count('map-input-changes-per-day', values['map-input-changes-per-day'], mapInputs),
      crds: count('crds', values.crds, 0),
      polledQueuesPerCluster: 1 + syncTargetsIn(config).length,
      ...(storage ? {} : { storageOff: true }),
      ...(metacontroller ? {} : { metacontrollerOff: true }),
      memoryMb: count('memory-mb', values['memory-mb'], DEFAULT_MEMORY_MB),
      polling: { ...DOCUMENTED_POLLING, pollers },
    },
  };
}

export function costCommand(argv: string[]): string {
  const { fleet, region, json } = parseCostArgs(argv);
  const e: Estimate = estimate(fleet, MEASURED_COEFFICIENTS, pricesFor(region));
  if (json) return `${JSON.stringify({ ...e, coefficients: MEASURED_COEFFICIENTS.measured })}\n`;
  return `${formatEstimate(`${fleet.clusters} cluster(s)`, e)}\nfigures: ${MEASURED_COEFFICIENTS.measured}; prices read ${pricesFor(region).sqsFifoRequests.read}\n`;
}
