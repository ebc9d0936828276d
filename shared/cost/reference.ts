// The figures `outrigger cost` estimates with when it runs no bench, as `npm run bench:cost` last measured them
// (docs/operations/cost.md#what-was-measured), and the reference workloads that page prices.
import type { Coefficients, Fleet, Polling } from './model.ts';

/**
 * Recorded from `npm run bench:cost` (bench/cost.ts), with its defaults, on the date in `measured`: the per-change
 * figures and the storage poll's time per resource from the first run (load average 11-17), the scheduled functions'
 * steady figures from an `--idle-only` run after the bench warmed them up (load average 34). The messages per change,
 * their sizes and the history batch are a later run's, after the forwarder stopped sending a parent's unread status
 * steps (docs/operations/cost.md#parents-status-steps), on the idle machine; the per-invocation times and units stay
 * the loaded first run's (9.29 write units and 39.6 ms a history invocation in the later one). Handler times
 * are this loaded 2-core machine's against DynamoDB Local: upper bounds. The MapController figures are
 * `npm run bench:map`'s incremental pass (docs/measurements.md#a-passs-costs), with one GetItem and one PutItem of
 * its pass record (functions/map/handler.ts), not measured by bench:cost.
 */
export const MEASURED_COEFFICIENTS: Coefficients = {
  measured:
    'bench:cost on 2026-11-27 (10 nodes, 100 pods under 10 parents, 10 image bumps and 600 pod status flips a minute for 2 minutes), a 2-core machine at a load average of 11-17',
  change: {
    replicas: 10,
    routerMessages: 45.6,
    historyMessages: 45.6,
    routerMessageBytes: 1_480,
    historyMessageBytes: 329,
    routerBatch: 1,
    historyBatch: 2.4,
    router: { ms: 2.9, readUnits: 0, writeUnits: 0 },
    history: { ms: 87, readUnits: 1.34, writeUnits: 10.85 },
  },
  scheduled: {
    heartbeat: { everyMinutes: 1, perCluster: false, ms: 0, msPerCluster: 11, readUnits: 1, writeUnits: 1 },
    'history-resync': { everyMinutes: 15, perCluster: false, ms: 0, msPerCluster: 2, readUnits: 0, writeUnits: 0 },
    'map-resync': { everyMinutes: 1, perCluster: false, ms: 0, msPerCluster: 1, readUnits: 0, writeUnits: 0 },
    // Its time is per resource (storagePollMsPerResource); its units are the leader's lease and the reporter's last poll.
    'storage-poll': { everyMinutes: 10, perCluster: true, ms: 0, msPerCluster: 0, readUnits: 1, writeUnits: 3 },
  },
  mapInputChange: { ms: 100, readUnits: 1, writeUnits: 1 },
  storagePollMsPerResource: 16.52,
  storageBuiltinResources: 62,
};

/** The queues of a cluster that event source mappings poll: its events queue, and one per sync target. */
export function polledQueuesPerCluster(specs: ReadonlyArray<{ events?: unknown; sync?: { target: string } | undefined }>): number {
  return (specs.some((f) => f.events) ? 1 : 0) + new Set(specs.flatMap((f) => (f.sync ? [f.sync.target] : []))).size;
}

export interface Deployment {
  polledQueuesPerCluster: number;
  memoryMb: number;
  polling: Polling;
}

/** The reference workloads (docs/operations/cost.md): an idle cluster, a busy one, and ten busy ones. */
export function referenceFleets(d: Deployment): Array<{ name: string; fleet: Fleet }> {
  const idle: Fleet = { clusters: 1, changesPerDay: 0, replicas: 10, mapInputs: 0, mapInputChangesPerDay: 0, crds: 0, ...d };
  // 3,000 pods under 300 parents (10 each); 2,000 parent changes a day; 2 MapControllers over 500 inputs, each
  // input changing once a day (the issue names no rate); 200 CRDs. Pod status churn costs nothing in AWS: the
  // forwarder drops status-only changes of what it watches as metadata (docs/measurements.md#what-a-busy-cluster-costs).
  const busy: Fleet = { ...idle, changesPerDay: 2_000, mapInputs: 500, mapInputChangesPerDay: 500, crds: 200 };
  return [
    { name: 'idle cluster', fleet: idle },
    { name: 'busy cluster', fleet: busy },
    { name: '10-cluster fleet', fleet: { ...busy, clusters: 10 } },
  ];
}
