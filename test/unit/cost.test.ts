// The cost formula (shared/cost/model.ts) that `npm run bench:cost` and `outrigger cost` share
// (docs/operations/cost.md#the-formula).
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { DEFAULT_MEMORY_MB as CLI_MEMORY_MB, costCommand, parseCostArgs } from '../../cli/cost.ts';
import { functions } from '../../functions/index.ts';
import { DEFAULT_MEMORY_MB } from '../../infra/functions.ts';
import {
  DOCUMENTED_POLLING,
  estimate,
  fargateSize,
  idleReceivesPerQueue,
  MINUTES_PER_MONTH,
  monthlyCounts,
  podsMonthly,
  type Fleet,
} from '../../shared/cost/model.ts';
import { US_EAST_1, PRICES } from '../../shared/cost/prices.ts';
import { MEASURED_COEFFICIENTS, polledQueuesPerCluster, referenceFleets } from '../../shared/cost/reference.ts';

const idle: Fleet = {
  clusters: 1,
  changesPerDay: 0,
  replicas: 10,
  mapInputs: 0,
  mapInputChangesPerDay: 0,
  crds: 0,
  polledQueuesPerCluster: 6,
  memoryMb: 512,
  polling: DOCUMENTED_POLLING,
};

describe('the cost formula', () => {
  it('counts idle polling as five long polls of 20 s on every polled queue', () => {
    expect(idleReceivesPerQueue(DOCUMENTED_POLLING)).toBe(5 * 3 * MINUTES_PER_MONTH);
    expect(idleReceivesPerQueue({ pollers: 2, waitSeconds: 20 })).toBe(259_200);
    const e = estimate(idle, MEASURED_COEFFICIENTS, US_EAST_1);
    expect(e.aws.counts.sqs.idleReceive).toBe(6 * 648_000);
    // $0.50 per million FIFO requests.
    expect(e.aws.usd.sqs).toBe(1.94);
  });

  it('bills each 64 KB of a message as one request', () => {
    const c = structuredClone(MEASURED_COEFFICIENTS);
    const busy = { ...idle, changesPerDay: 1_000 };
    const small = monthlyCounts(busy, c).sqs.send;
    c.change.routerMessageBytes = 100 * 1024;
    const large = monthlyCounts(busy, c).sqs.send;
    const routerMessages = 1_000 * 30 * c.change.routerMessages;
    expect(large - small).toBeCloseTo(routerMessages, 0);
  });

  it('grows with changes and clusters, and fleet-wide schedules do not multiply with clusters', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 50_000 }),
        fc.integer({ min: 0, max: 50_000 }),
        fc.integer({ min: 1, max: 50 }),
        (a, b, clusters) => {
          const lo = estimate({ ...idle, clusters, changesPerDay: Math.min(a, b) }, MEASURED_COEFFICIENTS, US_EAST_1);
          const hi = estimate({ ...idle, clusters, changesPerDay: Math.max(a, b) }, MEASURED_COEFFICIENTS, US_EAST_1);
          expect(hi.aws.usd.total).toBeGreaterThanOrEqual(lo.aws.usd.total);
          const counts = monthlyCounts({ ...idle, clusters }, MEASURED_COEFFICIENTS);
          expect(counts.lambda.heartbeat!.invocations).toBe(MINUTES_PER_MONTH);
          expect(counts.lambda['storage-poll']!.invocations).toBe((MINUTES_PER_MONTH / 10) * clusters);
          expect(counts.sqs.idleReceive).toBe(clusters * 6 * 648_000);
        },
      ),
    );
  });

  it('sizes a pod as EKS Fargate does: its requests and 256 MB, rounded up to a configuration', () => {
    expect(fargateSize({ cpu: 0.05, memoryGiB: 0.125 })).toEqual({ vcpu: 0.25, memoryGiB: 0.5 });
    expect(fargateSize({ cpu: 0.1, memoryGiB: 0.5 })).toEqual({ vcpu: 0.25, memoryGiB: 1 });
    expect(fargateSize({ cpu: 0.3, memoryGiB: 1 })).toEqual({ vcpu: 0.5, memoryGiB: 2 });
    // 0.25 vCPU and 0.5 GB for 720 hours.
    expect(podsMonthly([{ name: 'p', cpu: 0.1, memoryGiB: 0.125, published: false }], US_EAST_1).fargate).toBe(
      Math.round((0.25 * 0.04048 + 0.5 * 0.004445) * 720 * 100) / 100,
    );
  });

  it('has every price with its source and the day it was read, in two regions', () => {
    expect(Object.keys(PRICES).length).toBeGreaterThanOrEqual(2);
    for (const prices of Object.values(PRICES))
      for (const [name, p] of Object.entries(prices)) {
        if (typeof p !== 'object') continue;
        expect({ name, source: /^https:\/\//.test(p.source), read: /^\d{4}-\d{2}-\d{2}$/.test(p.read) }).toEqual({
          name,
          source: true,
          read: true,
        });
      }
  });
});

describe('what the formula reads of the deployment', () => {
  it('polls the events queue and one queue per sync target of each cluster', () => {
    const targets = new Set(functions.flatMap((f) => (f.sync ? [f.sync.target] : [])));
    expect(polledQueuesPerCluster(functions)).toBe(1 + targets.size);
  });

  it("polls 5 queues a cluster, however many controllers: a controller's requests share a queue unless its function must be its own", () => {
    // events (the cluster's identity), history (truncation included), storage, migrator (its own token), map
    // (CompositeControllers included). A sixth costs every cluster $0.32 a month idle (docs/operations/cost.md#idle-polling).
    expect(polledQueuesPerCluster(functions)).toBe(5);
  });

  it("takes each schedule's period and scope from the function registry", () => {
    const scheduled = Object.fromEntries(functions.filter((f) => f.schedule).map((f) => [f.name, f.schedule!]));
    expect(Object.keys(MEASURED_COEFFICIENTS.scheduled).sort()).toEqual(Object.keys(scheduled).sort());
    for (const [name, s] of Object.entries(MEASURED_COEFFICIENTS.scheduled)) {
      expect({ name, everyMinutes: s.everyMinutes, perCluster: s.perCluster }).toEqual({
        name,
        everyMinutes: scheduled[name]!.everyMinutes,
        perCluster: scheduled[name]!.perReporter ?? false,
      });
    }
  });

  it("prices functions at infra's default memory", () => {
    expect(CLI_MEMORY_MB).toBe(DEFAULT_MEMORY_MB);
  });
});

describe('outrigger cost', () => {
  it('estimates the fleet described on the command line with the reference figures', () => {
    const { fleet } = parseCostArgs(['--clusters', '10', '--changes-per-day', '2000', '--map-inputs', '500', '--crds', '200']);
    const reference = referenceFleets({
      polledQueuesPerCluster: fleet.polledQueuesPerCluster,
      memoryMb: 512,
      polling: DOCUMENTED_POLLING,
    }).find((f) => f.name === '10-cluster fleet')!.fleet;
    expect(fleet).toEqual(reference);
    const out = JSON.parse(
      costCommand(['--clusters', '10', '--changes-per-day', '2000', '--map-inputs', '500', '--crds', '200', '--json']),
    ) as {
      aws: { usd: { total: number } };
    };
    expect(out.aws.usd.total).toBe(estimate(reference, MEASURED_COEFFICIENTS, US_EAST_1).aws.usd.total);
    // 5 polled queues a cluster (events, history, storage, migrator, map) × 648,000 idle receives at $0.50 a million.
    expect(costCommand([])).toMatch(/SQS +\$1\.62/);
  });

  it('prices a cluster that runs history alone (storage and Metacontroller APIs off) at 2 polled queues, under $1 idle', () => {
    const { fleet } = parseCostArgs(['--storage', 'off', '--metacontroller', 'off']);
    expect({ queues: fleet.polledQueuesPerCluster, storageOff: fleet.storageOff, metacontrollerOff: fleet.metacontrollerOff }).toEqual({
      queues: 2,
      storageOff: true,
      metacontrollerOff: true,
    });
    const e = JSON.parse(costCommand(['--storage', 'off', '--metacontroller', 'off', '--json'])) as {
      aws: { usd: { total: number }; counts: { lambda: Record<string, unknown> } };
      inClusterPods: number;
    };
    // No storage poll; the in-cluster way it is weighed against runs the history controller alone.
    expect({ belowOneDollar: e.aws.usd.total <= 1, storagePoll: 'storage-poll' in e.aws.counts.lambda, pods: e.inClusterPods }).toEqual({
      belowOneDollar: true,
      storagePoll: false,
      pods: 1,
    });
    // Storage off alone: the events, history and map queues.
    expect(parseCostArgs(['--storage', 'off']).fleet.polledQueuesPerCluster).toBe(3);
    expect(() => parseCostArgs(['--metacontroller', 'no'])).toThrow('--metacontroller takes on or off');
    expect(() => parseCostArgs(['--metacontroller', 'off', '--map-inputs', '500'])).toThrow('serves no MapController');
  });

  it('refuses what is not a fleet', () => {
    expect(() => parseCostArgs(['--clusters', '0'])).toThrow('--clusters');
    expect(() => parseCostArgs(['--changes-per-day', '-1'])).toThrow('--changes-per-day');
    expect(() => parseCostArgs(['--region', 'mars-1'])).toThrow('no prices for region mars-1');
    expect(() => parseCostArgs(['--cluster', '2'])).toThrow();
  });
});
