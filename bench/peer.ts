// bench/peer: Outrigger side by side with the controllers it can replace, on one bed, in one run, each peer and
// Outrigger taking turns (alternating which goes first from round to round). Two halves:
//   - history: kube-controller-manager's StatefulSet controller (the test bed's build, 1.35.4) against
//     Outrigger's history pipeline (below);
//   - storage: kube-storage-version-migrator's trigger against Outrigger's storage poll, over N CRDs
//     (bench/peer-storage.ts says what is measured for each).
// Prints the comparison, with ratios (Outrigger / its peer), as its last line, in JSON.
//   npm run bench:peer [-- --only history|storage]
//     history: [--changes 40 --warmup 10 --noops 10 --rounds 1]
//     storage: [--resources 1000 --storage-rounds 2 --polls 3 --trigger-qps none|shipped]
// History: each round runs one, then the other, on the same apiserver: a namespace of its own, one StatefulSet
// with `replicas: 0`, W warm-up template changes, then N measured ones, each on a settled pipeline, then M
// changes of a label only (a no-op for history). Outrigger runs as the whole local pipeline (watch, router,
// queue, history, truncation), acting as its `outrigger` identity; kube-controller-manager runs only while its
// turn lasts. Counted for each:
//   - every apiserver request the controller made in the window (from the apiserver's audit log, by user and
//     user agent: its echoes, status writes and truncation included), per change and per no-op; the reads made
//     on a timer whatever the events (Outrigger's definition re-reads) apart, per minute, and with them;
//   - update sent -> revision visible (a watch of the namespace's ControllerRevisions), p50/p99 by nearest rank;
//   - CPU of the apiserver and etcd processes per change (their /proc times over the window).
// The warm-ups fill the history to its limit (10, the StatefulSet's default), so every measured change is one
// at the steady state: a revision made, the oldest deleted.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { functions } from '../functions/index.ts';
import { stopProcess } from '../local/process.ts';
import { clusterManifests } from '../local/testbed.ts';
import { startRuntime, type Runtime } from '../runtime/local.ts';
import { Resources, connect, gvr, runWatchSource, type KubeObject } from '../shared/kube/index.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { openState } from '../shared/state/index.ts';
import { statefulSet } from '../local/fixtures.ts';
import { countByKind, ratio, round, startAuditedBed, type AuditEvent } from './peer-bed.ts';
import { storageHalf } from './peer-storage.ts';

const { values } = parseArgs({
  options: {
    changes: { type: 'string', default: '40' },
    warmup: { type: 'string', default: '10' },
    noops: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '1' },
    only: { type: 'string' },
    resources: { type: 'string', default: '1000' },
    'storage-rounds': { type: 'string', default: '2' },
    polls: { type: 'string', default: '3' },
    'trigger-qps': { type: 'string', default: 'none' },
  },
});
const CHANGES = Number(values.changes);
const WARMUP = Number(values.warmup);
const NOOPS = Number(values.noops);
const ROUNDS = Number(values.rounds);
if (values.only !== undefined && !['history', 'storage'].includes(values.only)) throw new Error('--only is history or storage');
const ONLY = values.only as 'history' | 'storage' | undefined;
if (!['none', 'shipped'].includes(values['trigger-qps'])) throw new Error('--trigger-qps is none or shipped');
const KCM = 'kube-controller-manager';
const OUTRIGGER = 'outrigger';
type Peer = typeof KCM | typeof OUTRIGGER;

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
/** The p-th percentile by the nearest-rank method: the smallest sample with at least p% of them at or below it. */
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)] ?? 0;

const dir = await mkdtemp(join(tmpdir(), 'outrigger-peer-'));
const bed = await startAuditedBed(dir, log);
const { cp, binary, auditSince, auditEnd, bedCpuSeconds } = bed;

/**
 * Whose request an audit event is: Outrigger acts as its own identity; kube-controller-manager as the admin, with
 * the user agent of the bed's binary (which the apiserver's own loopback requests share, as system:apiserver).
 */
const peerOf = (e: AuditEvent): Peer | undefined => {
  if (e.user.username === 'outrigger') return OUTRIGGER;
  if (e.user.username !== 'system:apiserver' && (e.userAgent?.startsWith('testcluster/') || e.userAgent?.startsWith(KCM))) return KCM;
  return undefined;
};

/**
 * Reads made on a timer, whatever the events: each Outrigger process re-reads its controller definitions at most
 * every 5 s (docs/controllers/history.md#a-new-policy-on-a-live-cluster). Counted apart, per second of the window, and in the totals.
 */
const periodic = (e: AuditEvent) => ['revisionpolicies', 'mapcontrollers'].includes(e.objectRef?.resource ?? '');

interface Sample {
  latencies: number[];
  /** Periodic reads in the changes' window and in the no-ops' window. */
  periodicInChanges: number;
  periodicInNoops: number;
  periodic: number;
  seconds: number;
  requests: Record<string, number>;
  noopRequestsByKind: Record<string, number>;
  changeRequests: number;
  noopRequests: number;
  cpuSeconds: number;
  /** Outrigger's turn: DynamoDB Local's own round trips on the runtime's table, for the AWS latency model (docs/measurements.md#in-aws). */
  dynamo?: { getMs: number[]; acquireMs: number[] };
}

/** The lease operations a change waits on, timed alone: `acquire` is the one conditional write before the create. */
async function dynamoRoundTrips(runtime: Runtime, n = 40): Promise<{ getMs: number[]; acquireMs: number[] }> {
  const state = openState({ tableName: runtime.tableName, endpoint: runtime.dynamodbEndpoint });
  const getMs: number[] = [];
  const acquireMs: number[] = [];
  for (let i = 0; i < n; i += 1) {
    let t = performance.now();
    await state.leases.get(runtime.clusterId, 'bench/round-trip');
    getMs.push(performance.now() - t);
    t = performance.now();
    const lease = await state.leases.acquire(runtime.clusterId, 'bench/round-trip', 'bench', 60_000);
    acquireMs.push(performance.now() - t);
    if (lease) await state.leases.release(lease);
  }
  state.client.destroy();
  return { getMs, acquireMs };
}

const admin = connect({ kind: 'kubeconfig', path: cp.kubeconfigs.admin });
try {
  await applyManifests(admin, await clusterManifests());
  const t0 = performance.now();
  const history = ONLY === 'storage' ? undefined : await historyHalf();
  const t1 = performance.now();
  if (history) log(`history half: ${Math.round((t1 - t0) / 1000)} s`);
  const storage =
    ONLY === 'history'
      ? undefined
      : await storageHalf(bed, {
          resources: Number(values.resources),
          rounds: Number(values['storage-rounds']),
          polls: Number(values.polls),
          triggerRate: values['trigger-qps'] === 'shipped' ? 'shipped' : 'none',
          log,
        });
  if (storage) log(`storage half: ${Math.round((performance.now() - t1) / 1000)} s`);
  // Figures from a machine other runs share (docs/measurements.md) say how busy it was.
  const machine = { cores: availableParallelism(), loadAverage: loadavg().map((l) => round(l, 2)) };
  console.log(JSON.stringify({ bench: 'peer', machine, ...(history ? { history } : {}), ...(storage ? { storage } : {}) }));
} finally {
  await cp.stop();
}

/** kube-controller-manager's StatefulSet controller against Outrigger's history pipeline, ROUNDS rounds. */
async function historyHalf() {
  const results: Record<Peer, Sample[]> = { [KCM]: [], [OUTRIGGER]: [] };
  // Outrigger keeps its own history beside the revisions kube-controller-manager made in its turns
  // (docs/controllers/history.md#coexistence); each turn's StatefulSet is deleted before the next turn, so neither ever sees the other's.
  await applyManifests(
    admin,
    'apiVersion: outrigger.dev/v1alpha1\nkind: RevisionPolicy\nmetadata: {name: statefulsets}\nspec: {target: {apiVersion: apps/v1, kind: StatefulSet}, targetState: [spec.template], revisionHistoryLimit: 10, generated: {apiVersion: v1, kind: Pod}, statusRevisionPaths: [status.currentRevision, status.updateRevision], foreignHistory: Coexist}\n',
  );

  const turn = async (peer: Peer, r: number): Promise<Sample> => {
    const ns = `peer-${peer === KCM ? 'kcm' : 'outrigger'}-${r}`;
    await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    let kcm: ChildProcess | undefined;
    let runtime: Runtime | undefined;
    if (peer === KCM) {
      kcm = spawn(
        binary,
        [
          'controller-manager',
          `--kubeconfig=${cp.kubeconfigs.admin}`,
          '--controllers=statefulset-controller',
          '--leader-elect=false',
          '--secure-port=0',
          '--v=0',
        ],
        { stdio: 'ignore' },
      );
    } else {
      runtime = await startRuntime({
        kubeconfig: cp.kubeconfigs.outrigger,
        clusterId: 'peer',
        namespace: ns,
        stateDir: await mkdtemp(join(dir, 'state-')),
        functions: functions.filter((f) => ['router', 'history'].includes(f.name)),
        log: () => {},
      });
    }
    // Settled: Outrigger's queues are empty and nobody's requests reach the apiserver for a moment.
    const settle = async () => {
      if (runtime) await runtime.settled();
      await bed.auditQuiet(250, 5_000);
    };
    const seen = new Map<number, number>();
    const waiting = new Map<number, () => void>();
    const abort = new AbortController();
    // As the admin, so that the watch is nobody's request but the bench's.
    const watching = runWatchSource({
      client: admin,
      resource: Resources.controllerRevisions,
      namespace: ns,
      signal: abort.signal,
      onEvent: async (e) => {
        const m = JSON.stringify(e.object.data ?? '').match(/lat:(\d+)/);
        const i = m ? Number(m[1]) : undefined;
        if (i !== undefined && !seen.has(i)) {
          seen.set(i, performance.now());
          waiting.get(i)?.();
        }
      },
    });
    const revisionSeen = (i: number) => new Promise<void>((resolve) => (seen.has(i) ? resolve() : waiting.set(i, resolve)));
    const image = (i: number) => ({ spec: { template: { spec: { containers: [{ name: 'c', image: `registry.example/lat:${i}` }] } } } });
    try {
      await admin.create<KubeObject>(statefulSets, statefulSet('web', ns, 'registry.example/lat:0'));
      await revisionSeen(0);
      const latencies: number[] = [];
      let from = 0;
      let cpu0 = 0;
      let t0 = 0;
      for (let i = 1; i <= WARMUP + CHANGES; i += 1) {
        await settle();
        if (i === WARMUP + 1) {
          from = await auditEnd();
          cpu0 = await bedCpuSeconds();
          t0 = performance.now();
        }
        const start = performance.now();
        await admin.patch(statefulSets, { name: 'web', namespace: ns }, image(i), 'strategic');
        await revisionSeen(i);
        if (i > WARMUP) latencies.push(seen.get(i)! - start);
      }
      await settle();
      const changed = await auditSince(from);
      const cpuSeconds = (await bedCpuSeconds()) - cpu0;
      for (let i = 1; i <= NOOPS; i += 1) {
        await admin.patch(statefulSets, { name: 'web', namespace: ns }, { metadata: { labels: { noop: String(i) } } }, 'merge');
        await settle();
      }
      const noops = await auditSince(changed.end);
      const seconds = (performance.now() - t0) / 1000;
      const dynamo = runtime ? await dynamoRoundTrips(runtime) : undefined;
      const mine = (es: AuditEvent[]) => es.filter((e) => peerOf(e) === peer);
      const byKind = (es: AuditEvent[]) => countByKind(mine(es));
      const requests = byKind(changed.events);
      const noopRequests = byKind(noops.events);
      log(
        `${peer} round ${r}: ${mine(changed.events).length} requests for ${CHANGES} changes, ${mine(noops.events).length} for ${NOOPS} no-ops`,
      );
      return {
        latencies,
        periodicInChanges: mine(changed.events).filter(periodic).length,
        periodicInNoops: mine(noops.events).filter(periodic).length,
        periodic: mine([...changed.events, ...noops.events]).filter(periodic).length,
        seconds,
        requests,
        noopRequestsByKind: noopRequests,
        changeRequests: mine(changed.events).length,
        noopRequests: mine(noops.events).length,
        cpuSeconds,
        ...(dynamo ? { dynamo } : {}),
      };
    } finally {
      abort.abort();
      await watching.catch(() => undefined);
      if (kcm) await stopProcess(kcm);
      await runtime?.stop();
      // The next turn's controller must not find this one's StatefulSet (kube-controller-manager syncs every one at start).
      await admin.delete(statefulSets, { name: 'web', namespace: ns }).catch(() => undefined);
    }
  };

  for (let r = 1; r <= ROUNDS; r += 1) {
    // Alternating order, so that neither always runs on a warmer bed.
    const order: Peer[] = r % 2 === 1 ? [KCM, OUTRIGGER] : [OUTRIGGER, KCM];
    for (const peer of order) results[peer].push(await turn(peer, r));
  }

  const summary = (peer: Peer) => {
    const ss = results[peer];
    const latencies = ss.flatMap((s) => s.latencies);
    const sum = (pick: (s: Sample) => Record<string, number>, per: number) => {
      const out: Record<string, number> = {};
      for (const s of ss) for (const [k, v] of Object.entries(pick(s))) out[k] = (out[k] ?? 0) + v;
      return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, round(v / (per * ss.length), 2)]));
    };
    return {
      // Made for the change: every request in the window but the periodic reads.
      requestsPerChange: round(ss.reduce((n, s) => n + s.changeRequests - s.periodicInChanges, 0) / (CHANGES * ss.length), 2),
      requestsPerNoop: round(ss.reduce((n, s) => n + s.noopRequests - s.periodicInNoops, 0) / (NOOPS * ss.length), 2),
      withPeriodic: {
        requestsPerChange: round(ss.reduce((n, s) => n + s.changeRequests, 0) / (CHANGES * ss.length), 2),
        requestsPerNoop: round(ss.reduce((n, s) => n + s.noopRequests, 0) / (NOOPS * ss.length), 2),
      },
      periodicReadsPerMinute: round((60 * ss.reduce((n, s) => n + s.periodic, 0)) / ss.reduce((n, s) => n + s.seconds, 0), 1),
      updateToRevisionMs: {
        samples: latencies.length,
        p50: round(pct(latencies, 50)),
        p99: round(pct(latencies, 99)),
        max: round(Math.max(...latencies)),
      },
      bedCpuMsPerChange: round((1000 * ss.reduce((n, s) => n + s.cpuSeconds, 0)) / (CHANGES * ss.length)),
      requestsByKind: sum((s) => s.requests, CHANGES),
      noopRequestsByKind: sum((s) => s.noopRequestsByKind, NOOPS),
      ...(ss.some((s) => s.dynamo)
        ? {
            dynamoLocalMs: {
              getP50: round(
                pct(
                  ss.flatMap((s) => s.dynamo?.getMs ?? []),
                  50,
                ),
              ),
              acquireP50: round(
                pct(
                  ss.flatMap((s) => s.dynamo?.acquireMs ?? []),
                  50,
                ),
              ),
            },
          }
        : {}),
    };
  };
  const kcm = summary(KCM);
  const outrigger = summary(OUTRIGGER);
  return {
    setup: { changes: CHANGES, warmup: WARMUP, noops: NOOPS, rounds: ROUNDS, replicas: 0 },
    [KCM]: kcm,
    outrigger,
    ratios: {
      requestsPerChange: ratio(outrigger.requestsPerChange, kcm.requestsPerChange),
      requestsPerNoop: ratio(outrigger.requestsPerNoop, kcm.requestsPerNoop),
      requestsPerChangeWithPeriodic: ratio(outrigger.withPeriodic.requestsPerChange, kcm.withPeriodic.requestsPerChange),
      p50: ratio(outrigger.updateToRevisionMs.p50, kcm.updateToRevisionMs.p50),
      // The same, with DynamoDB Local's lease write (the one DynamoDB round trip a change waits on) taken out.
      p50WithoutDynamoLocal: ratio(
        outrigger.updateToRevisionMs.p50 - (outrigger.dynamoLocalMs?.acquireP50 ?? 0),
        kcm.updateToRevisionMs.p50,
      ),
      p99: ratio(outrigger.updateToRevisionMs.p99, kcm.updateToRevisionMs.p99),
      bedCpuPerChange: ratio(outrigger.bedCpuMsPerChange, kcm.bedCpuMsPerChange),
    },
    targets: { requestsPerChange: 3, requestsPerNoop: 0, p50Ratio: 2 },
  };
}
