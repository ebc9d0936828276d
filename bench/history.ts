// bench/history: controller history against the local kube-apiserver and DynamoDB Local. Prints its figures
// as the last line, in JSON.
//   - events/s and apiserver requests per event, for unchanged and for changed target state;
//   - p50/p99 from a StatefulSet update to its revision being visible, through the whole local runtime
//     (watch, router, history): each update on a settled pipeline, then back to back;
//   - truncating a history of 1,000 revisions.
//   - a history resync of a parent whose record holds its target state (its per-parent sync, as the policy queues
//     it): apiserver requests and DynamoDB calls per resync.
//   - with --scale (for example 1000,10000): that many parents each changed once, each change delivered as the router
//     delivers it (its cause and object), syncs 16 at a time: changes/s and apiserver requests per change, which
//     should not grow with the number of parents.
//   npm run bench:history [-- --unchanged 500 --changed 100 --resync 100 --latency 100 --truncate 1000 --scale 1000,10000]
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { functions, functionsOf } from '../functions/index.ts';
import { forgetPolicies, listPolicies, policyFor } from '../functions/history/policies.ts';
import { parentCause } from '../functions/history/resync.ts';
import { syncHistory } from '../functions/history/sync.ts';
import { truncateHistory } from '../functions/history/truncate.ts';
import { startTestbed } from '../local/testbed.ts';
import { startRuntime } from '../runtime/local.ts';
import { parentLabels } from '../shared/history/data.ts';
import { Resources, connect, gvr, runWatchSource, type KubeObject } from '../shared/kube/index.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { newControllerRef, type SyncKey } from '../shared/ownership/index.ts';
import { openState } from '../shared/state/index.ts';

const { values } = parseArgs({
  options: {
    unchanged: { type: 'string', default: '500' },
    changed: { type: 'string', default: '100' },
    resync: { type: 'string', default: '100' },
    latency: { type: 'string', default: '100' },
    truncate: { type: 'string', default: '1000' },
    scale: { type: 'string', default: '' },
  },
});
const statefulSets = gvr('apps', 'v1', 'statefulsets');
const WARMUP = 5;
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
/** The p-th percentile by the nearest-rank method: the smallest sample with at least p% of them at or below it. */
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)] ?? 0;
const round = (x: number, d = 1) => Number(x.toFixed(d));

const bed = await startTestbed({ withCluster: true, log });
try {
  const admin = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.admin });
  const kube = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.outrigger });
  const state = openState({ tableName: bed.tableName, endpoint: bed.dynamodb.endpoint });
  await applyManifests(
    admin,
    'apiVersion: outrigger.dev/v1alpha1\nkind: RevisionPolicy\nmetadata: {name: statefulsets}\nspec: {target: {apiVersion: apps/v1, kind: StatefulSet}, targetState: [spec.template], revisionHistoryLimit: 10, generated: {apiVersion: v1, kind: Pod}}\n',
  );
  forgetPolicies();
  const policy = policyFor(await listPolicies(kube, 'bench'), 'apps', 'StatefulSet')!;
  const makeSts = async (ns: string, name: string) => {
    await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }).catch(() => undefined);
    return admin.create<KubeObject>(statefulSets, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name, namespace: ns },
      spec: {
        serviceName: name,
        replicas: 0,
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'registry.example/app:0' }] } },
      },
    });
  };
  const setImage = (ns: string, name: string, image: string) =>
    admin.patch(
      statefulSets,
      { name, namespace: ns },
      { spec: { template: { spec: { containers: [{ name: 'c', image }] } } } },
      'strategic',
    );
  const keyOf = (o: KubeObject): SyncKey => ({
    cluster: 'bench',
    group: 'apps',
    kind: 'StatefulSet',
    namespace: o.metadata.namespace,
    name: o.metadata.name!,
    uid: o.metadata.uid!,
  });
  const deps = { kube, state, holder: 'bench' };

  // Unchanged target state (a parent-only event, e.g. scaling): the cached path.
  let sts = await makeSts('bench-unchanged', 'web');
  await syncHistory(deps, policy, keyOf(sts), ['ControllerRevision/x']);
  const unchangedN = Number(values.unchanged);
  kube.stats.reset();
  let t0 = performance.now();
  // As the router delivers a parent's own event: its cause and its object (at or after the recorded state).
  const rv = Number(sts.metadata.resourceVersion);
  for (let i = 0; i < unchangedN; i += 1)
    await syncHistory(deps, policy, keyOf(sts), [`StatefulSet/bench/${sts.metadata.uid}/${rv}/modified`], sts);
  const unchangedSeconds = (performance.now() - t0) / 1000;
  const unchangedRequests = { ...kube.stats.byVerb };
  const unchangedPerEvent = kube.stats.total / unchangedN;

  // A history resync of the same parent (its record holds its target state): what each costs, apiserver and DynamoDB.
  const resyncN = Number(values.resync);
  const stateCalls: Record<string, number> = {};
  const countedLeases = new Proxy(state.leases, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        stateCalls[String(property)] = (stateCalls[String(property)] ?? 0) + 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  kube.stats.reset();
  for (let i = 0; i < resyncN; i += 1)
    await syncHistory({ ...deps, state: { leases: countedLeases } }, policy, keyOf(sts), [
      parentCause(keyOf(sts), [`resync/history/${i}`]),
    ]);
  const resync = {
    syncs: resyncN,
    apiserverRequestsPerResync: round(kube.stats.total / resyncN, 2),
    byVerb: Object.fromEntries(Object.entries(kube.stats.byVerb).map(([k, v]) => [k, round(v / resyncN, 2)])),
    dynamodbCallsPerResync: Object.fromEntries(Object.entries(stateCalls).map(([k, v]) => [k, round(v / resyncN, 2)])),
  };

  // Changed target state: each event makes one revision.
  sts = await makeSts('bench-changed', 'web');
  const changedN = Number(values.changed);
  let syncMs = 0;
  let changedRequests = 0;
  const changedVerbs: Record<string, number> = {};
  for (let i = 1; i <= changedN; i += 1) {
    const p = await setImage('bench-changed', 'web', `registry.example/app:${i}`);
    kube.stats.reset();
    const s = performance.now();
    await syncHistory(deps, policy, keyOf(p), [`StatefulSet/bench/${p.metadata.uid}/${p.metadata.resourceVersion}/modified`], p);
    syncMs += performance.now() - s;
    changedRequests += kube.stats.total;
    for (const [k, v] of Object.entries(kube.stats.byVerb)) changedVerbs[k] = (changedVerbs[k] ?? 0) + v;
  }
  const changedPerEvent = Object.fromEntries(Object.entries(changedVerbs).map(([k, v]) => [k, round(v / changedN, 2)]));
  void changedRequests;

  // Update-to-revision latency through the whole local runtime.
  const latencyN = Number(values.latency);
  const runtime = await startRuntime({
    kubeconfig: bed.cluster!.kubeconfigs.outrigger,
    clusterId: 'bench',
    namespace: 'bench-latency',
    stateDir: await mkdtemp(join(tmpdir(), 'bench-history-')),
    // Without the storage controller's functions, which act on every resource of a cluster.
    functions: functions.filter((f) => f.name !== 'heartbeat' && !functionsOf('storage').includes(f.name)),
  });
  const latencies: number[] = [];
  const backToBackLatencies: number[] = [];
  try {
    await makeSts('bench-latency', 'web');
    await runtime.settled();
    const seen = new Map<string, number>();
    const waiting = new Map<string, () => void>();
    const abort = new AbortController();
    const watching = runWatchSource({
      client: kube,
      resource: Resources.controllerRevisions,
      namespace: 'bench-latency',
      signal: abort.signal,
      onEvent: async (e) => {
        const m = JSON.stringify(e.object.data).match(/lat:(\d+)/);
        if (m && !seen.has(m[1]!)) {
          seen.set(m[1]!, performance.now());
          waiting.get(m[1]!)?.();
        }
      },
    });
    // Woken by the watch event, not polled for: a polling loop would keep one of the two cores busy in this
    // process, which also runs the pipeline being measured.
    const revisionSeen = (i: number) => new Promise<void>((resolve) => (seen.has(String(i)) ? resolve() : waiting.set(String(i), resolve)));
    // The first WARMUP updates are not measured (JIT, connection pools, DynamoDB Local's own warm-up). Each
    // update is made on a settled pipeline (the latency of a change); then again back to back, each as soon
    // as the previous revision is visible, while the echoes of the previous change (its revision's events,
    // truncation) are still in flight in the parent's message group and on the same two cores.
    for (let i = 1; i <= 2 * (WARMUP + latencyN); i += 1) {
      const backToBack = i > WARMUP + latencyN;
      if (!backToBack) await runtime.settled();
      const start = performance.now();
      await setImage('bench-latency', 'web', `registry.example/lat:${i}`);
      await revisionSeen(i);
      const j = backToBack ? i - WARMUP - latencyN : i;
      if (j > WARMUP) (backToBack ? backToBackLatencies : latencies).push(seen.get(String(i))! - start);
    }
    abort.abort();
    await watching;
  } finally {
    await runtime.stop();
  }

  // Truncation of a history of N revisions down to the limit.
  const truncateN = Number(values.truncate);
  const big = await makeSts('bench-truncate', 'web');
  for (let i = 0; i < truncateN; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, truncateN - i) }, (_, j) =>
        kube.create<KubeObject>(Resources.controllerRevisions, {
          apiVersion: 'apps/v1',
          kind: 'ControllerRevision',
          metadata: {
            name: `web-r${i + j}`,
            namespace: 'bench-truncate',
            labels: parentLabels(big),
            ownerReferences: [newControllerRef(big)],
          },
          data: { n: i + j },
          revision: i + j + 1,
        }),
      ),
    );
  }
  kube.stats.reset();
  t0 = performance.now();
  const truncated = await truncateHistory(deps, policy, keyOf(big));
  const truncateSeconds = (performance.now() - t0) / 1000;
  const truncateRequests = kube.stats.total;

  // Many parents, each changed once: the per-change work must not depend on how many parents there are.
  const scale: Array<Record<string, unknown>> = [];
  for (const n of values.scale ? values.scale.split(',').map(Number) : []) {
    const ns = `bench-scale-${n}`;
    await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const writes = pLimit(32);
    const syncs = pLimit(16);
    const own = (o: KubeObject) =>
      syncHistory(deps, policy, keyOf(o), [`StatefulSet/bench/${o.metadata.uid}/${o.metadata.resourceVersion}/modified`], o);
    const created = await Promise.all(Array.from({ length: n }, (_, i) => writes(() => makeSts(ns, `s${i}`))));
    await Promise.all(created.map((o) => syncs(() => own(o))));
    const changed = await Promise.all(created.map((o) => writes(() => setImage(ns, o.metadata.name!, 'registry.example/app:1'))));
    kube.stats.reset();
    const s0 = performance.now();
    const outcomes = await Promise.all(changed.map((o) => syncs(() => own(o))));
    const seconds = (performance.now() - s0) / 1000;
    scale.push({
      parents: n,
      changesPerSec: Math.round(n / seconds),
      created: outcomes.filter((o) => o.outcome === 'created').length,
      apiserverRequestsPerChange: round(kube.stats.total / n, 2),
      byVerb: Object.fromEntries(Object.entries(kube.stats.byVerb).map(([k, v]) => [k, round(v / n, 2)])),
    });
    log(`scale ${n}: ${JSON.stringify(scale.at(-1))}`);
  }

  console.log(
    JSON.stringify({
      bench: 'history',
      unchanged: {
        events: unchangedN,
        eventsPerSec: Math.round(unchangedN / unchangedSeconds),
        apiserverRequestsPerEvent: round(unchangedPerEvent, 3),
        requests: unchangedRequests,
      },
      resync,
      changed: { events: changedN, eventsPerSec: Math.round(changedN / (syncMs / 1000)), apiserverRequestsPerEvent: changedPerEvent },
      updateToRevisionMs: {
        warmup: WARMUP,
        samples: latencies.length,
        p50: round(pct(latencies, 50)),
        p99: round(pct(latencies, 99)),
        max: round(Math.max(...latencies)),
      },
      backToBackUpdateToRevisionMs: {
        samples: backToBackLatencies.length,
        p50: round(pct(backToBackLatencies, 50)),
        p99: round(pct(backToBackLatencies, 99)),
        max: round(Math.max(...backToBackLatencies)),
      },
      truncation: {
        revisions: truncateN,
        deleted: truncated.deleted.length,
        kept: truncated.kept,
        seconds: round(truncateSeconds, 2),
        requests: truncateRequests,
      },
      ...(scale.length ? { scale } : {}),
      targets: { unchangedReadsPerEvent: 0, unchangedWritesPerEvent: 0, updateToRevisionP99Ms: 100 },
    }),
  );
} finally {
  await bed.stop();
}
