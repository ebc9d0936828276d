// bench/cost: what Outrigger makes AWS bill, measured on this machine and extrapolated per cluster-month
// (docs/operations/cost.md). Two measurements, then the formula (shared/cost/model.ts) with the price table
// (shared/cost/prices.ts):
//  1. Idle: the whole local runtime (every function) on the local apiserver; each scheduled function run
//     `--samples` times on the settled runtime, its handler time and DynamoDB capacity per invocation counted.
//  2. Busy: bench/pipeline-churn.ts on the nodes-and-pods bed (bench/churn.ts flipping pod status and rolling
//     parents), its SQS messages and bytes, Lambda invocations and handler time, DynamoDB capacity per change.
// Then the reference workloads (docs/operations/cost.md; an idle cluster; a cluster of 3,000 pods under 300 parents changing
// 2,000 times a day, 2 MapControllers over 500 inputs, 200 CRDs; ten of those), in each region of the table,
// beside the same controllers run in each cluster. Prints a table and, last, one JSON line.
//   npm run bench:cost [-- --minutes 2 --nodes 10 --pods 100 --parents 10 --spec-changes-per-minute 10
//     --pod-changes-per-minute 600 --samples 3 --idle-only]
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { functions } from '../functions/index.ts';
import { startRuntime } from '../runtime/local.ts';
import { environment } from '../shared/lambda/environment.ts';
import { connect } from '../shared/kube/index.ts';
import { storageStates } from '../functions/storage/context.ts';
import { DOCUMENTED_POLLING, estimate, type Coefficients, type Fleet } from '../shared/cost/model.ts';
import { referenceFleets, MEASURED_COEFFICIENTS, polledQueuesPerCluster } from '../shared/cost/reference.ts';
import { DEFAULT_MEMORY_MB } from '../infra/functions.ts';
import { PRICES } from '../shared/cost/prices.ts';
import { formatEstimate } from '../shared/cost/format.ts';
import { churnBench, countedFunctions } from './pipeline-churn.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '2' },
    nodes: { type: 'string', default: '10' },
    pods: { type: 'string', default: '100' },
    parents: { type: 'string', default: '10' },
    'spec-changes-per-minute': { type: 'string', default: '10' },
    'pod-changes-per-minute': { type: 'string', default: '600' },
    samples: { type: 'string', default: '3' },
    'idle-only': { type: 'boolean', default: false },
  },
});
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
const SCHEDULED = functions.filter((f) => f.schedule).map((f) => f.name);

type Counter = Record<string, number>;
const READS = new Set(['GetItemCommand', 'QueryCommand', 'ScanCommand', 'BatchGetItemCommand']);

/** Each scheduled function's handler time and DynamoDB units per invocation, on the settled local runtime. */
async function idle(samples: number) {
  const ms: Counter = {};
  const runs: Counter = {};
  const specs = await countedFunctions(functions, runs, ms);
  const runtime = await startRuntime({ stateDir: await mkdtemp(join(tmpdir(), 'outrigger-cost-')), functions: specs, log: () => {} });
  try {
    const units = { read: 0, write: 0 };
    environment().state.client.middlewareStack.add(
      (next, context) => async (args) => {
        (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity ??= 'TOTAL';
        const out = await next(args);
        const consumed = (out.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
        for (const c of (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as { CapacityUnits?: number }[]) {
          units[READS.has(context.commandName ?? '') ? 'read' : 'write'] += c.CapacityUnits ?? 0;
        }
        return out;
      },
      { step: 'initialize', name: 'benchCostCount' },
    );
    await runtime.settled();
    const out: Record<string, { ms: number; readUnits: number; writeUnits: number }> = {};
    // Steady state first: each schedule run twice, and what it set going (the first poll's states and migrations)
    // done, so that a sample counts a steady run's own work.
    for (let warm = 0; warm < 2; warm += 1)
      for (const name of SCHEDULED) {
        await runtime.runScheduled(name);
        await runtime.settled();
      }
    for (const name of SCHEDULED) {
      const before = { ms: ms[name] ?? 0, runs: runs[name] ?? 0, ...units };
      for (let i = 0; i < samples; i += 1) {
        await runtime.runScheduled(name);
        await runtime.settled();
      }
      const n = (runs[name] ?? 0) - before.runs;
      out[name] = {
        ms: Math.round(((ms[name] ?? 0) - before.ms) / n),
        readUnits: Number(((units.read - before.read) / n).toFixed(2)),
        writeUnits: Number(((units.write - before.write) / n).toFixed(2)),
      };
      log(`${name}: ${JSON.stringify(out[name])} per invocation (${n} runs)`);
    }
    // What the storage poll reported on: one StorageState per resource with a storage version hash.
    const states = (await connect({ kind: 'kubeconfig', path: runtime.kubeconfig }).listAll(storageStates)).length;
    return { scheduled: out, storageResources: states };
  } finally {
    await runtime.stop();
  }
}

const samples = Number(values.samples);
const t0 = performance.now();
const idleFigures = await idle(samples);
log(`idle: ${Math.round((performance.now() - t0) / 1000)} s`);

let busy: Awaited<ReturnType<typeof churnBench>> | undefined;
if (!values['idle-only']) {
  busy = await churnBench({
    nodes: Number(values.nodes),
    pods: Number(values.pods),
    parents: Number(values.parents),
    podChangesPerMinute: Number(values['pod-changes-per-minute']),
    specChangesPerMinute: Number(values['spec-changes-per-minute']),
    minutes: Number(values.minutes),
    log,
  });
  log(`busy: ${JSON.stringify(busy)}`);
}

/** This run's figures in the formula's terms; where the run measured nothing (--idle-only), the recorded ones. */
function coefficients(): Coefficients {
  const c = structuredClone(MEASURED_COEFFICIENTS);
  c.measured = `bench:cost on ${new Date().toISOString().slice(0, 10)}, this machine`;
  for (const [name, f] of Object.entries(idleFigures.scheduled)) {
    const s = c.scheduled[name];
    if (!s) continue;
    // Per cluster covered: the local runtime has one cluster, and the whole time is counted as that cluster's.
    if (s.perCluster) s.ms = f.ms;
    else s.msPerCluster = f.ms;
    s.readUnits = f.readUnits;
    s.writeUnits = f.writeUnits;
  }
  const poll = idleFigures.scheduled['storage-poll'];
  if (poll && idleFigures.storageResources > 0) {
    // Its time per resource reported on (the bed has its built-in resources and Outrigger's own CRDs).
    c.storagePollMsPerResource = Number((poll.ms / idleFigures.storageResources).toFixed(2));
    c.storageBuiltinResources = idleFigures.storageResources;
    c.scheduled['storage-poll']!.ms = 0;
  }
  if (busy) {
    const m = busy.perMinute;
    const changes = busy.churn.specChanges / busy.minutes;
    const per = (n: number | undefined) => (n ?? 0) / changes;
    const router = m.sqs['events (router)'];
    const history = m.sqs.history;
    const inv = m.lambdaInvocations as Counter;
    const handlerMs = m.lambdaHandlerMs as Counter;
    const byCall = m.dynamodbCapacityUnitsByCall as Counter;
    const read = Object.entries(byCall).reduce((n, [k, v]) => n + (READS.has(k) ? v : 0), 0);
    const write = Object.entries(byCall).reduce((n, [k, v]) => n + (READS.has(k) ? 0 : v), 0);
    c.change = {
      replicas: busy.pods / busy.parents,
      routerMessages: per(router?.messages),
      historyMessages: per(history?.messages),
      routerMessageBytes: router && router.messages ? router.bytes / router.messages : c.change.routerMessageBytes,
      historyMessageBytes: history && history.messages ? history.bytes / history.messages : c.change.historyMessageBytes,
      routerBatch: inv.router ? (router?.messages ?? 0) / inv.router : 1,
      historyBatch: inv.history ? (history?.messages ?? 0) / inv.history : 1,
      router: { ms: inv.router ? (handlerMs.router ?? 0) / inv.router : 0, readUnits: 0, writeUnits: 0 },
      // Every DynamoDB call of the window is history's (the router keeps no state): its units per invocation.
      history: {
        ms: inv.history ? (handlerMs.history ?? 0) / inv.history : 0,
        readUnits: inv.history ? read / inv.history : 0,
        writeUnits: inv.history ? write / inv.history : 0,
      },
    };
  }
  return c;
}

const c = coefficients();
const queues = polledQueuesPerCluster(functions);
const memoryMb = DEFAULT_MEMORY_MB;
const results = Object.values(PRICES).flatMap((prices) =>
  referenceFleets({ polledQueuesPerCluster: queues, memoryMb, polling: DOCUMENTED_POLLING }).map(({ name, fleet }) => ({
    name,
    ...estimate(fleet as Fleet, c, prices),
  })),
);
for (const r of results) process.stdout.write(`${formatEstimate(r.name, r)}\n`);
/**
 * The idle cluster's AWS dollars in other topologies, from this run's figures (docs/operations/cost.md#targets):
 * fewer polled queues a cluster, or mappings without a maximum concurrency, which AWS lets go down to 2 pollers.
 */
const idleIn = (prices: (typeof PRICES)[keyof typeof PRICES], polledQueuesPerCluster: number, pollers: number) => {
  const idleFleet = referenceFleets({ polledQueuesPerCluster, memoryMb, polling: { ...DOCUMENTED_POLLING, pollers } })[0]!.fleet;
  return estimate(idleFleet as Fleet, c, prices).aws.usd.total;
};
const targets = (region: string) => {
  const idleCluster = results.find((r) => r.region === region && r.name === 'idle cluster')!;
  const fleet = results.find((r) => r.region === region && r.name === '10-cluster fleet')!;
  const prices = Object.values(PRICES).find((p) => p.region === region)!;
  return {
    idleClusterAwsUsd: idleCluster.aws.usd.total,
    idleClusterAtMost1Usd: idleCluster.aws.usd.total <= 1,
    fleetFargateRatio: fleet.ratio.fargate,
    fleetAtMostQuarterOfFargate: fleet.ratio.fargate <= 0.25,
    idleClusterAwsUsdIf: {
      polledQueues3: idleIn(prices, 3, DOCUMENTED_POLLING.pollers),
      polledQueues2: idleIn(prices, 2, DOCUMENTED_POLLING.pollers),
      pollers2: idleIn(prices, queues, 2),
    },
  };
};
const summary = {
  bench: 'cost',
  measured: { idle: idleFigures, busy: busy ?? null, seconds: Math.round((performance.now() - t0) / 1000) },
  coefficients: c,
  polledQueuesPerCluster: queues,
  memoryMb,
  estimates: results.map((r) => ({
    name: r.name,
    region: r.region,
    counts: r.aws.counts,
    aws: r.aws.usd,
    outrigger: r.outrigger,
    inCluster: r.inCluster,
    ratio: r.ratio,
  })),
  targets: Object.fromEntries(Object.keys(PRICES).map((region) => [region, targets(region)])),
};
console.log(JSON.stringify(summary));
process.exit(0);
