// bench/composite: a CompositeController with N parents (default 1,000) on the node bed
// (docs/contributing/test-beds.md#nodes-and-pods), served end to end by the local runtime (forwarder, router,
// map function) as the `outrigger` identity, the passes acting as the controller's ServiceAccount.
// The sync hook is an HTTP webhook in this process: per parent, one ConfigMap (InPlace) holding the parent's
// `spec.value`, and with --pods one Pod (OnDelete) that kube-scheduler places on a kwok node; status
// `{ value }`. Counted from the apiserver's audit log (every request as `outrigger`, impersonating or not):
//   - the first sync of every parent (created at once);
//   - a parent change: sequential changes, each waited for, then a burst changing every parent at once: hook
//     calls and apiserver writes per change, and the time from the change's write to the child's update (a
//     watch of the ConfigMaps), p50/p99 by nearest rank;
//   - a resync with nothing changed: every parent's resync request queued as map-resync queues it (its schedule
//     is not run: its one-minute ticks would add passes to every other phase), hook calls and writes per parent.
// Prints its figures as the last line, in JSON.
//   npm run bench:composite [-- --parents 1000 --changes 50 --nodes 1 --pods]
import { mkdtemp, open, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { functions } from '../functions/index.ts';
import { startRuntime } from '../runtime/local.ts';
import { LocalSyncSink } from '../runtime/sync-sink.ts';
import { makeSyncRequest } from '../shared/lambda/sync-request.ts';
import { RESYNC_CAUSE } from '../shared/map/api.ts';
import { Resources, gvr, runWatchSource, type KubeObject } from '../shared/kube/index.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { DEFAULT_CONTROLLERS, GC_CONTROLLERS, startTestControlPlane } from '../test/testbed/control-plane.ts';
import { openCrd } from '../test/testbed/crds.ts';
import { controllersGrant, impersonatedAccount } from '../test/testbed/rbac.ts';

const { values } = parseArgs({
  options: {
    parents: { type: 'string', default: '1000' },
    changes: { type: 'string', default: '50' },
    nodes: { type: 'string', default: '1' },
    pods: { type: 'boolean', default: false },
  },
});
const PARENTS = Number(values.parents);
const CHANGES = Math.min(Number(values.changes), PARENTS);
const NODES = Number(values.nodes);
const PODS = values.pods;
if (PODS && NODES * 110 < PARENTS) throw new Error(`--pods needs room for ${PARENTS} Pods: at least ${Math.ceil(PARENTS / 110)} nodes`);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
/** The p-th percentile by the nearest-rank method. */
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)] ?? 0;
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

const GROUP = 'bench-composite.outrigger.test';
const widgets = gvr(GROUP, 'v1', 'widgets');
const configMaps = gvr('', 'v1', 'configmaps');
const SA = { namespace: 'outrigger-bench-composite', name: 'composer' };

let hookCalls = 0;
const hook = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    hookCalls += 1;
    const { parent } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { parent: KubeObject & { spec: { value: number } } };
    const name = parent.metadata.name!;
    const children: object[] = [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { value: String(parent.spec.value) } }];
    if (PODS)
      children.push({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: { containers: [{ name: 'c', image: 'registry.example/w:1' }] },
      });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ status: { value: parent.spec.value }, children }));
  });
});
await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/sync`;

const dir = await mkdtemp(join(tmpdir(), 'outrigger-bench-composite-'));
const auditLog = join(dir, 'audit.log');
await writeFile(
  join(dir, 'audit-policy.yaml'),
  'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules: [{level: Metadata}]\n',
);
const load0 = loadavg()[0]!;
const cp = await startTestControlPlane({
  controllers: NODES ? DEFAULT_CONTROLLERS : GC_CONTROLLERS,
  nodes: NODES,
  apiserverFlags: [`--audit-policy-file=${join(dir, 'audit-policy.yaml')}`, `--audit-log-path=${auditLog}`, '--audit-log-maxsize=0'],
});
log(`bed ready in ${cp.startedInMs} ms (${NODES} kwok nodes)`);

/** Outrigger's requests in the audit log since `offset` (its own and those it makes as the ServiceAccount): all, and writes. */
async function outriggerRequests(
  offset: number,
): Promise<{ requests: number; writes: number; byKind: Record<string, number>; end: number }> {
  const size = (await stat(auditLog)).size;
  const file = await open(auditLog, 'r');
  try {
    const buf = Buffer.alloc(size - offset);
    await file.read(buf, 0, buf.length, offset);
    const text = buf.toString('utf8');
    const complete = text.lastIndexOf('\n') + 1;
    const events = text
      .slice(0, complete)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { verb: string; user: { username: string }; objectRef?: { resource?: string; subresource?: string } })
      .filter((e) => e.user.username === 'outrigger');
    // An access review is a create that stores nothing (the definitions' readiness asks them).
    const writes = events.filter(
      (e) => ['create', 'update', 'patch', 'delete'].includes(e.verb) && !e.objectRef?.resource?.endsWith('accessreviews'),
    );
    const byKind: Record<string, number> = {};
    for (const e of writes) {
      const k = `${e.verb} ${e.objectRef?.resource ?? '?'}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
      byKind[k] = (byKind[k] ?? 0) + 1;
    }
    return { requests: events.length, writes: writes.length, byKind, end: offset + Buffer.byteLength(text.slice(0, complete)) };
  } finally {
    await file.close();
  }
}

const admin = cp.client('admin');
const ns = `bench-composite-${Date.now().toString(36)}`;
const abort = new AbortController();
try {
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  await applyManifests(admin, manifests(hookUrl));
  if (PODS)
    for (let i = 0; !(await admin.find(gvr('', 'v1', 'serviceaccounts'), { name: 'default', namespace: ns })); i += 1) {
      if (i > 600) throw new Error('no default ServiceAccount');
      await new Promise((r) => setTimeout(r, 100));
    }
  // When each parent's ConfigMap first showed each value.
  const seen = new Map<string, number>();
  const waiting = new Map<string, () => void>();
  const watching = runWatchSource({
    client: admin,
    resource: configMaps,
    namespace: ns,
    signal: abort.signal,
    onEvent: async (e) => {
      const key = `${e.object.metadata.name}=${(e.object as { data?: { value?: string } }).data?.value}`;
      if (!seen.has(key)) {
        seen.set(key, performance.now());
        waiting.get(key)?.();
      }
    },
  });
  const childShows = (name: string, value: number) =>
    new Promise<number>((resolve) => {
      const key = `${name}=${value}`;
      if (seen.has(key)) resolve(seen.get(key)!);
      else waiting.set(key, () => resolve(seen.get(key)!));
    });

  const runtime = await startRuntime({
    kubeconfig: cp.kubeconfigs.outrigger,
    namespace: ns,
    clusterId: 'bench-composite',
    stateDir: dir,
    functions: functions.filter((f) => ['router', 'map'].includes(f.name)),
    oneApiserver: true,
  });
  try {
    await runtime.settled();
    const names = Array.from({ length: PARENTS }, (_, i) => `w-${i}`);
    const limit = pLimit(16);

    // The first sync: every parent created at once.
    let offset = (await stat(auditLog)).size;
    let calls0 = hookCalls;
    const t0 = performance.now();
    await Promise.all(
      names.map((name) =>
        limit(() =>
          admin.create(widgets, {
            apiVersion: `${GROUP}/v1`,
            kind: 'Widget',
            metadata: { name, namespace: ns },
            spec: { value: 0 },
          } as KubeObject),
        ),
      ),
    );
    await Promise.all(names.map((n) => childShows(n, 0)));
    const firstMs = Math.round(performance.now() - t0);
    await runtime.settled();
    if (PODS) {
      for (let i = 0; ; i += 1) {
        const ready = (await admin.listAll<KubeObject & { status?: { phase?: string } }>(Resources.pods, { namespace: ns })).filter(
          (p) => p.status?.phase === 'Running',
        ).length;
        if (ready === PARENTS) break;
        if (i > 1200) throw new Error(`${ready} of ${PARENTS} Pods Running`);
        await new Promise((r) => setTimeout(r, 500));
      }
      await runtime.settled();
    }
    let audit = await outriggerRequests(offset);
    const first = {
      ms: firstMs,
      hookCallsPerParent: round((hookCalls - calls0) / PARENTS),
      writesPerParent: round(audit.writes / PARENTS),
      requestsPerParent: round(audit.requests / PARENTS),
      writes: audit.byKind,
    };
    log(`first sync: ${JSON.stringify(first)}`);

    // Sequential changes: one parent at a time, each waited for to its child, then the pipeline settled.
    offset = audit.end;
    calls0 = hookCalls;
    const sequential: number[] = [];
    for (let i = 0; i < CHANGES; i += 1) {
      const name = names[Math.floor((i * PARENTS) / CHANGES)]!;
      const shown = childShows(name, 1);
      const sent = performance.now();
      await admin.patch(widgets, { name, namespace: ns }, { spec: { value: 1 } }, 'merge');
      sequential.push((await shown) - sent);
      await runtime.settled();
    }
    audit = await outriggerRequests(offset);
    const change = {
      changes: CHANGES,
      hookCallsPerChange: round((hookCalls - calls0) / CHANGES),
      writesPerChange: round(audit.writes / CHANGES),
      requestsPerChange: round(audit.requests / CHANGES),
      writes: audit.byKind,
      p50Ms: Math.round(pct(sequential, 50)),
      p99Ms: Math.round(pct(sequential, 99)),
    };
    log(`sequential changes: ${JSON.stringify(change)}`);

    // A burst: every parent changed at once.
    offset = audit.end;
    calls0 = hookCalls;
    const sentAt = new Map<string, number>();
    const shownAll = names.map(async (n) => (await childShows(n, 2)) - sentAt.get(n)!);
    const tb = performance.now();
    await Promise.all(
      names.map((name) =>
        limit(async () => {
          sentAt.set(name, performance.now());
          await admin.patch(widgets, { name, namespace: ns }, { spec: { value: 2 } }, 'merge');
        }),
      ),
    );
    const burstLatencies = await Promise.all(shownAll);
    const burstMs = Math.round(performance.now() - tb);
    await runtime.settled();
    audit = await outriggerRequests(offset);
    const burst = {
      changes: PARENTS,
      ms: burstMs,
      hookCallsPerChange: round((hookCalls - calls0) / PARENTS),
      writesPerChange: round(audit.writes / PARENTS),
      requestsPerChange: round(audit.requests / PARENTS),
      writes: audit.byKind,
      p50Ms: Math.round(pct(burstLatencies, 50)),
      p99Ms: Math.round(pct(burstLatencies, 99)),
    };
    log(`burst: ${JSON.stringify(burst)}`);

    // A resync with nothing changed: every parent's request, as map-resync's tick queues it for a parent due.
    offset = audit.end;
    calls0 = hookCalls;
    const parents = await admin.listAll(widgets, { namespace: ns });
    const tr = performance.now();
    await new LocalSyncSink(runtime.queues).send(
      'map',
      parents.map((p) =>
        makeSyncRequest(
          { cluster: 'bench-composite', group: GROUP, kind: 'Widget', namespace: ns, name: p.metadata.name!, uid: p.metadata.uid! },
          [`${RESYNC_CAUSE}60/0`],
        ),
      ),
    );
    await runtime.settled();
    const resyncMs = Math.round(performance.now() - tr);
    audit = await outriggerRequests(offset);
    const resync = {
      ms: resyncMs,
      hookCallsPerParent: round((hookCalls - calls0) / PARENTS),
      writesPerParent: round(audit.writes / PARENTS),
      requestsPerParent: round(audit.requests / PARENTS),
      writes: audit.byKind,
    };
    log(`resync: ${JSON.stringify(resync)}`);

    console.log(
      JSON.stringify({
        bench: 'composite',
        date: new Date().toISOString(),
        cpus: availableParallelism(),
        loadAverage: { start: round(load0), end: round(loadavg()[0]!) },
        parents: PARENTS,
        nodes: NODES,
        podsPerParent: PODS ? 1 : 0,
        firstSync: first,
        sequentialChange: change,
        burstChange: burst,
        resyncNothingChanged: resync,
      }),
    );
  } finally {
    await runtime.stop();
  }
  abort.abort();
  await watching.catch(() => undefined);
} finally {
  abort.abort();
  hook.close();
  await cp.stop();
}

function manifests(url: string): string {
  return `
${openCrd(GROUP, 'Widget', 'widgets')}---
${controllersGrant('outrigger-composite-bench', [
  `{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: [""], resources: ["configmaps", "pods"], verbs: ["list", "watch"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${SA.namespace} }
---
${impersonatedAccount(
  SA.namespace,
  SA.name,
  [
    `{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["widgets/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps", "pods"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/*',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: widget-controller }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  resyncPeriodSeconds: 60
  parentResource: { apiVersion: ${GROUP}/v1, resource: widgets }
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy: { method: InPlace }
  - apiVersion: v1
    resource: pods
  hooks:
    sync:
      webhook: { url: "${url}" }
`;
}
