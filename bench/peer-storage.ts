// bench/peer's storage half: Outrigger's storage poll side by side with the controller it can replace,
// kube-storage-version-migrator's trigger (v0.0.5), on the same bed, with the same N CRDs (and every built-in
// resource: neither is limited to some groups). Each round runs one, then the other (alternating which goes
// first), each from its own clean slate: no StorageState, no migration, its own CRDs for both kinds applied
// (the trigger's from its module; Outrigger's from cluster/crds, whose StorageState has per-reporter entries).
// Each is then brought to its steady state: every resource's state there, its migration Succeeded, persisted
// narrowed to the current hash. What one steady poll costs is then measured P times:
//   - Outrigger: pollReporter for one reporter, as the schedule invokes it every 10 minutes, its leader step
//     included; wall time is the whole call (DynamoDB calls included). The first steady poll after the narrowing
//     is not measured.
//   - the trigger: its pass runs at its start and then every 10 minutes (a fixed period:
//     https://github.com/kubernetes-sigs/kube-storage-version-migrator/blob/v0.0.5/pkg/trigger/controller.go),
//     so each sample is a restart of its process on the settled bed, and the pass is its requests from the
//     first discovery request to the answer of its last StorageState status update (one per resource). Its start
//     (one list and one watch of migrations) is counted apart, and the apiserver's CPU is counted from the moment
//     that list has answered; what it does after the pass (a re-check of every migration its informer listed, a
//     restart's work) is not counted. Its client runs without a rate limit (`--trigger-qps shipped`: client-go's
//     default of 5 requests/s, as shipped, which paces a pass over 1,000 resources at about 10 minutes).
// For both: every request, from the apiserver's audit log (Outrigger by its identity, the trigger, which runs
// as the admin, by its user agent); the CPU of the apiserver and etcd processes over the poll; the client's own
// CPU. Setup (1,000 CRDs, first sight, narrowing) takes most of the time.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { migrations, storageStates, type StorageContext } from '../functions/storage/context.ts';
import { pollReporter } from '../functions/storage/poll.ts';
import { startDynamoDBLocal } from '../local/dynamodb.ts';
import { projectRoot } from '../local/paths.ts';
import { stopProcess, type Log } from '../local/process.ts';
import { DEFAULT_TABLE } from '../local/testbed.ts';
import { connect, resourcePath, type KubeObject } from '../shared/kube/index.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { ensureTable, openState } from '../shared/state/index.ts';
import { DEFAULT_PERIOD_MS } from '../shared/storage/index.ts';
import { auditTime, countByKind, processCpuSeconds, ratio, requestKind, round, type AuditEvent, type AuditedBed } from './peer-bed.ts';
import { createCrds, succeedAll } from './storage-fixtures.ts';
import { ensureTriggerBinary, triggerCrds } from './storage-trigger.ts';

export interface StorageHalfOptions {
  resources: number;
  rounds: number;
  polls: number;
  /** The trigger's client rate limit in the measured passes: none, or client-go's default, as shipped. */
  triggerRate: 'none' | 'shipped';
  log: Log;
}

const TRIGGER = 'trigger';
const OUTRIGGER = 'outrigger';
type Side = typeof TRIGGER | typeof OUTRIGGER;

interface Poll {
  /** Requests of the poll itself (the trigger's start apart). */
  requests: number;
  byKind: Record<string, number>;
  /** Requests of the trigger's start: its informer's list and watch of migrations. */
  startRequests: number;
  /** Outrigger: the call; the trigger: its first request received to its last answered. */
  ms: number;
  /** The same window for both: the poll's first request received to its last answered, from the audit log. */
  auditMs: number;
  bedCpuMs: number;
  clientCpuMs: number;
  resources: number;
}

/** The trigger's StorageState status (https://github.com/kubernetes-sigs/kube-storage-version-migrator/blob/v0.0.5/pkg/apis/migration/v1alpha1/types.go). */
interface TriggerState extends KubeObject {
  status?: { currentStorageVersionHash?: string; persistedStorageVersionHashes?: string[] };
}

const isTrigger = (e: AuditEvent) => e.userAgent?.startsWith('storage-version-migration-trigger/') ?? false;
const isOutrigger = (e: AuditEvent) => e.user.username === 'outrigger';
const isStart = (e: AuditEvent) => e.objectRef?.resource === 'storageversionmigrations' && ['list', 'watch'].includes(e.verb);
const isHeartbeat = (e: AuditEvent) => requestKind(e) === 'update storagestates/status';
const auditWindowMs = (es: readonly AuditEvent[]) =>
  es.length === 0
    ? 0
    : Math.max(...es.map((e) => auditTime(e.stageTimestamp))) - Math.min(...es.map((e) => auditTime(e.requestReceivedTimestamp)));

export async function storageHalf(bed: AuditedBed, opts: StorageHalfOptions) {
  const { cp } = bed;
  const { log } = opts;
  const admin = connect({ kind: 'kubeconfig', path: cp.kubeconfigs.admin });
  const [binary, theirCrds, dynamodb] = await Promise.all([ensureTriggerBinary(log), triggerCrds(), startDynamoDBLocal({ log })]);
  const ourCrds = (
    await Promise.all(
      ['storagestates.yaml', 'storageversionmigrations.yaml'].map((f) => readFile(join(projectRoot, 'cluster', 'crds', f), 'utf8')),
    )
  ).join('\n---\n');
  try {
    const state = openState({ tableName: DEFAULT_TABLE, endpoint: dynamodb.endpoint });
    await ensureTable(state);
    const run = randomUUID().slice(0, 6);
    await createCrds(admin, opts.resources, run, log);

    /** No StorageState, no migration, and the CRDs of whoever's turn it is. */
    const reset = async (crds: string) => {
      for (const r of [storageStates, migrations]) await admin.request('DELETE', resourcePath(r, {}), { verb: 'deletecollection' });
      for (const r of [storageStates, migrations]) {
        while ((await admin.list(r, { limit: 1 })).items.length > 0) await sleep(200);
      }
      await applyManifests(admin, crds);
      // The apiserver serves a CRD's new schema once its handler for the CRD is rebuilt, a moment after the update.
      await sleep(2_000);
    };

    const startTrigger = (rate: 'none' | 'shipped') => {
      const child = spawn(binary, [`--kubeconfig=${cp.kubeconfigs.admin}`, ...(rate === 'none' ? ['--kube-api-qps=-1'] : [])], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const tail: string[] = [];
      child.stderr!.on('data', (b: Buffer) => {
        tail.push(...b.toString().split('\n').filter(Boolean));
        tail.splice(0, Math.max(0, tail.length - 20));
      });
      return { child, tail };
    };

    /**
     * Follows the trigger's requests in the audit log from `offset` until `done` says so; fails when the trigger
     * exits or `timeoutMs` passes first.
     */
    const follow = async (
      offset: number,
      trigger: { child: ChildProcess; tail: string[] },
      done: (e: AuditEvent | undefined, quietMs: number) => Promise<boolean>,
      timeoutMs: number,
    ) => {
      const events: AuditEvent[] = [];
      const deadline = Date.now() + timeoutMs;
      let lastAt = Date.now();
      for (;;) {
        const got = await bed.auditSince(offset);
        offset = got.end;
        for (const e of got.events.filter(isTrigger)) {
          events.push(e);
          lastAt = Date.now();
          if (await done(e, 0)) return events;
        }
        if (await done(undefined, Date.now() - lastAt)) return events;
        if (trigger.child.exitCode !== null)
          throw new Error(`the trigger exited with ${trigger.child.exitCode}:\n${trigger.tail.join('\n')}`);
        if (Date.now() > deadline) throw new Error(`the trigger took over ${timeoutMs / 1000} s:\n${trigger.tail.join('\n')}`);
        await sleep(20);
      }
    };

    const triggerTurn = async (): Promise<Poll[]> => {
      await reset(theirCrds);
      // Its first pass (a StorageState and a migration per resource), then the migrations' success, which it
      // records itself (persisted narrowed to the current hash).
      const first = startTrigger('none');
      let states: TriggerState[] = [];
      try {
        const firstEvents = await follow(await bed.auditEnd(), first, async (e, quietMs) => !e && quietMs > 2_000, 600_000);
        log(`trigger, first sight: ${firstEvents.length} requests`);
        await succeedAll(admin);
        for (const deadline = Date.now() + 600_000; ; await sleep(1_000)) {
          states = await admin.listAll<TriggerState>(storageStates);
          const narrowed = (s: TriggerState) =>
            s.status?.persistedStorageVersionHashes?.length === 1 &&
            s.status.persistedStorageVersionHashes[0] === s.status.currentStorageVersionHash;
          if (states.length > 0 && states.every(narrowed)) break;
          if (Date.now() > deadline) throw new Error(`the trigger did not narrow every StorageState:\n${first.tail.join('\n')}`);
        }
        await bed.auditQuiet(1_000);
      } finally {
        await stopProcess(first.child);
      }
      const polls: Poll[] = [];
      for (let p = 0; p < opts.polls; p += 1) {
        const from = await bed.auditEnd();
        const trigger = startTrigger(opts.triggerRate);
        try {
          let cpuFrom: number | undefined;
          let heartbeats = 0;
          const events = await follow(
            from,
            trigger,
            async (e) => {
              if (e && isStart(e) && cpuFrom === undefined) cpuFrom = await bed.bedCpuSeconds();
              if (e && isHeartbeat(e)) heartbeats += 1;
              return heartbeats === states.length;
            },
            3_600_000,
          );
          const cpuTo = await bed.bedCpuSeconds();
          const clientCpu = await processCpuSeconds(trigger.child.pid!);
          // Audit events are written as requests complete, not quite in order: the pass ends with its last
          // heartbeat's answer, and a request received after it (its re-check of every migration it listed, a
          // restart's work) is not the pass's.
          const end = Math.max(...events.filter(isHeartbeat).map((e) => auditTime(e.stageTimestamp)));
          const pass = events.filter((e) => !isStart(e) && auditTime(e.requestReceivedTimestamp) <= end);
          polls.push({
            requests: pass.length,
            byKind: countByKind(pass),
            startRequests: events.filter(isStart).length,
            ms: auditWindowMs(pass),
            auditMs: auditWindowMs(pass),
            bedCpuMs: 1000 * (cpuTo - (cpuFrom ?? cpuTo)),
            clientCpuMs: 1000 * clientCpu,
            resources: states.length,
          });
        } finally {
          await stopProcess(trigger.child);
        }
        log(`trigger, steady pass ${p + 1}: ${JSON.stringify(polls.at(-1))}`);
      }
      return polls;
    };

    const outriggerTurn = async (r: number): Promise<Poll[]> => {
      await reset(ourCrds);
      const outrigger = () => connect({ kind: 'kubeconfig', path: cp.kubeconfigs.outrigger });
      const ctx: StorageContext = {
        cluster: `peer-${run}-${r}`,
        kube: outrigger(),
        state,
        holder: `peer-${run}`,
        reporters: ['apiserver'],
        mode: 'outrigger',
        periodMs: DEFAULT_PERIOD_MS,
        now: () => new Date(),
      };
      const reporter = { id: 'apiserver', client: outrigger() };
      const first = await pollReporter(ctx, reporter);
      log(`outrigger, first sight: ${first.created} states, ${first.leader?.created.length ?? 0} migrations`);
      await succeedAll(admin, () => true);
      await pollReporter(ctx, reporter);
      const polls: Poll[] = [];
      for (let p = 0; p < opts.polls; p += 1) {
        await bed.auditQuiet(300);
        const from = await bed.auditEnd();
        const cpu0 = await bed.bedCpuSeconds();
        const client0 = process.cpuUsage();
        const t0 = performance.now();
        const result = await pollReporter(ctx, reporter);
        const ms = performance.now() - t0;
        const client = process.cpuUsage(client0);
        const cpu1 = await bed.bedCpuSeconds();
        await bed.auditQuiet(300);
        const events = (await bed.auditSince(from)).events.filter(isOutrigger);
        polls.push({
          requests: events.length,
          byKind: countByKind(events),
          startRequests: 0,
          ms,
          auditMs: auditWindowMs(events),
          bedCpuMs: 1000 * (cpu1 - cpu0),
          clientCpuMs: (client.user + client.system) / 1000,
          resources: result.resources,
        });
        log(`outrigger, steady poll ${p + 1}: ${JSON.stringify(polls.at(-1))}`);
      }
      return polls;
    };

    const rounds: Record<Side, Poll[][]> = { [TRIGGER]: [], [OUTRIGGER]: [] };
    for (let r = 1; r <= opts.rounds; r += 1) {
      // Alternating order, so that neither always runs on a warmer bed.
      const order: Side[] = r % 2 === 1 ? [TRIGGER, OUTRIGGER] : [OUTRIGGER, TRIGGER];
      for (const side of order) rounds[side].push(side === TRIGGER ? await triggerTurn() : await outriggerTurn(r));
    }
    return summarise(rounds, opts);
  } finally {
    await dynamodb.stop();
  }
}

function summarise(rounds: Record<Side, Poll[][]>, opts: StorageHalfOptions) {
  const mean = (ps: readonly Poll[], pick: (p: Poll) => number) => ps.reduce((n, p) => n + pick(p), 0) / ps.length;
  const range = (xs: number[], d: number) => ({ min: round(Math.min(...xs), d), max: round(Math.max(...xs), d) });
  const side = (s: Side) => {
    const all = rounds[s].flat();
    const stats = (pick: (p: Poll) => number, d = 0) => ({ mean: round(mean(all, pick), d), ...range(all.map(pick), d) });
    const byKind: Record<string, number> = {};
    for (const p of all) for (const [k, v] of Object.entries(p.byKind)) byKind[k] = (byKind[k] ?? 0) + v / all.length;
    return {
      polls: all.length,
      resources: all[0]?.resources ?? 0,
      requestsPerPoll: stats((p) => p.requests, 1),
      ...(s === TRIGGER ? { startRequests: stats((p) => p.startRequests, 1) } : {}),
      pollMs: stats((p) => p.ms),
      auditWindowMs: stats((p) => p.auditMs),
      bedCpuMsPerPoll: stats((p) => p.bedCpuMs),
      clientCpuMsPerPoll: stats((p) => p.clientCpuMs),
      requestsByKind: Object.fromEntries(Object.entries(byKind).map(([k, v]) => [k, round(v, 1)])),
    };
  };
  // Outrigger / trigger, overall (means of every poll) and round by round (each round's means).
  const ratios = (pick: (p: Poll) => number) => {
    const perRound = rounds[OUTRIGGER].map((ps, i) => ratio(mean(ps, pick), mean(rounds[TRIGGER][i]!, pick)) ?? Number.NaN);
    return { overall: ratio(mean(rounds[OUTRIGGER].flat(), pick), mean(rounds[TRIGGER].flat(), pick)), ...range(perRound, 2) };
  };
  return {
    setup: { crds: opts.resources, rounds: opts.rounds, pollsPerTurn: opts.polls, triggerRateLimit: opts.triggerRate, reporters: 1 },
    measured: {
      [OUTRIGGER]:
        'one reporter’s poll (pollReporter, every group), its leader step included, on its settled StorageStates; wall time: the call, DynamoDB included',
      [TRIGGER]:
        'kube-storage-version-migrator v0.0.5’s trigger restarted on its settled StorageStates; its discovery pass: first request to the last StorageState status update answered (audit log); its start (list and watch of migrations) counted apart and not in the CPU',
    },
    [TRIGGER]: side(TRIGGER),
    [OUTRIGGER]: side(OUTRIGGER),
    ratios: {
      requestsPerPoll: ratios((p) => p.requests),
      bedCpuPerPoll: ratios((p) => p.bedCpuMs),
      pollMs: ratios((p) => p.ms),
      auditWindowMs: ratios((p) => p.auditMs),
      clientCpuPerPoll: ratios((p) => p.clientCpuMs),
    },
  };
}
