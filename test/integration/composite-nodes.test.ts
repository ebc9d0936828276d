// CompositeController and DecoratorController on the node bed (docs/contributing/test-beds.md#nodes-and-pods):
// kube-controller-manager's default controllers, kube-scheduler and two kwok nodes, so the children run as on a
// cluster: Pods become Running and Ready, a Job's Pods complete, the garbage collector follows ControllerRefs and
// the EndpointSlice controller fills a Service. The definitions are written as Metacontroller's docs write them
// (plain YAML, webhook hooks this file serves on loopback) plus Outrigger's serviceAccount, and run end to end in
// the local runtime (forwarder, router, map function: docs/controllers/compositecontroller.md#how-a-parent-is-synced).
// One control plane and one runtime for the whole file, watching one namespace.
/* eslint-disable max-lines -- every scenario needs the node bed (kube-controller-manager, kube-scheduler, two kwok nodes), started once here; a second file would start a second one */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { functions } from '../../functions/index.ts';
import { startRuntime, type Runtime } from '../../runtime/local.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { Resources, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { controllerOf } from '../../shared/ownership/index.ts';
import { DEFAULT_CONTROLLERS, startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { openCrd } from '../testbed/crds.ts';
import { eventually, uniqueName } from '../testbed/index.ts';
import { controllersGrant, impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite-nodes.outrigger.test';
const podSets = gvr(GROUP, 'v1', 'podsets');
const jobRuns = gvr(GROUP, 'v1', 'jobruns');
const mixes = gvr(GROUP, 'v1', 'mixes');
const jobs = gvr('batch', 'v1', 'jobs');
const deployments = gvr('apps', 'v1', 'deployments');
const services = gvr('', 'v1', 'services');
const secrets = gvr('', 'v1', 'secrets');
const endpointSlices = gvr('discovery.k8s.io', 'v1', 'endpointslices');
const SA = { namespace: 'outrigger-composite-nodes', name: 'composer' };
const WAIT_MS = 90_000;

type Pod = KubeObject & {
  spec: { nodeName?: string };
  status?: { phase?: string; podIP?: string; conditions?: { type: string; status: string }[] };
};
type Children = Record<string, Record<string, KubeObject & { status?: Record<string, unknown> }>>;
interface HookRequest {
  parent?: KubeObject;
  object?: KubeObject;
  children?: Children;
  attachments?: Children;
  input?: KubeObject;
}

let cp: TestControlPlane;
let admin: KubeClient;
let server: Server;
let runtime: Runtime;
let ns: string;
const logs: string[] = [];
/** Every request each hook path was sent, in order. */
const requests = new Map<string, HookRequest[]>();
const calls = (path: string) => requests.get(path) ?? [];

const isReady = (p: Pod) => (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
const pod = (name: string, labels: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { containers: [{ name: 'main', image: 'registry.example/app:1' }] },
});

/** The hooks, by path: each answers from what it is sent, as a Metacontroller hook does. */
const hooks: Record<string, (req: HookRequest) => unknown> = {
  // A set of `spec.replicas` Pods; status counts the Pods it was sent, and those Ready.
  '/podset': (req) => {
    const seen = Object.values(req.children?.['Pod.v1'] ?? {}) as Pod[];
    const name = req.parent!.metadata.name!;
    return {
      status: { replicas: seen.length, ready: seen.filter(isReady).length },
      children: Array.from({ length: (req.parent!.spec as { replicas: number }).replicas }, (_, i) => pod(`${name}-${i}`, { app: name })),
    };
  },
  // One Job of two completions; status reports the Job's own status as it was sent.
  '/jobrun': (req) => {
    const name = req.parent!.metadata.name!;
    const job = req.children?.['Job.batch/v1']?.[`${name}-job`];
    return {
      status: { succeeded: (job?.status as { succeeded?: number } | undefined)?.succeeded ?? 0 },
      children: [
        {
          apiVersion: 'batch/v1',
          kind: 'Job',
          metadata: { name: `${name}-job` },
          spec: {
            parallelism: 2,
            completions: 2,
            template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'registry.example/worker:1' }] } },
          },
        },
      ],
    };
  },
  // A Service per labelled Deployment, selecting its Pods.
  '/decorate': (req) => {
    const d = req.object!;
    const labels = (d.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    return {
      labels: { 'example.com/exposed': 'true' },
      attachments: [
        {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: `${d.metadata.name}-svc` },
          spec: { selector: labels, ports: [{ port: 80 }] },
        },
      ],
    };
  },
  // Mix and match: the composite's Pods follow `spec.pods`; the map's Pod is one per input Secret.
  '/mix': (req) => ({
    status: { composite: Object.keys(req.children?.['Pod.v1'] ?? {}).sort() },
    children: Array.from({ length: (req.parent!.spec as { pods: number }).pods }, (_, i) =>
      pod(`${req.parent!.metadata.name}-c${i}`, { mix: 'composite' }),
    ),
  }),
  '/map': (req) => ({ outputs: [pod(`${req.input!.metadata.name}-m`, { mix: 'map' })] }),
};

beforeAll(async () => {
  cp = await startTestControlPlane({ controllers: DEFAULT_CONTROLLERS, nodes: 2 });
  process.stderr.write(
    `[control plane] kube-controller-manager (every default controller), kube-scheduler and 2 kwok nodes ready in ${cp.startedInMs} ms\n`,
  );
  admin = cp.client('admin');
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as HookRequest;
      requests.set(path, [...calls(path), body]);
      const hook = hooks[path];
      res.writeHead(hook ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(hook ? hook(body) : {}));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  ns = uniqueName('cnodes');
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'PodSet', 'podsets')}---${openCrd(GROUP, 'JobRun', 'jobruns')}---${openCrd(GROUP, 'Mix', 'mixes')}---
${controllersGrant('outrigger-composite-nodes-test', [
  // What the forwarder watches, as Outrigger (the passes act as the ServiceAccount below).
  `{ apiGroups: ["${GROUP}"], resources: ["podsets", "jobruns", "mixes"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: [""], resources: ["pods", "services", "secrets"], verbs: ["list", "watch"] }`,
  `{ apiGroups: ["batch"], resources: ["jobs"], verbs: ["list", "watch"] }`,
  `{ apiGroups: ["apps"], resources: ["deployments"], verbs: ["list", "watch"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${SA.namespace} }
---
${impersonatedAccount(
  SA.namespace,
  SA.name,
  [
    `{ apiGroups: ["${GROUP}"], resources: ["podsets", "jobruns", "mixes"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["podsets/status", "jobruns/status", "mixes/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["pods", "services"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
    `{ apiGroups: [""], resources: ["secrets"], verbs: ["list", "watch"] }`,
    `{ apiGroups: ["batch"], resources: ["jobs"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
    `{ apiGroups: ["apps"], resources: ["deployments"], verbs: ["get", "list", "watch", "patch"] }`,
  ],
  'compositecontroller/*, decoratorcontroller/*, mapcontroller/*',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: podset-controller
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: podsets
  childResources:
  - apiVersion: v1
    resource: pods
  hooks:
    sync:
      webhook:
        url: ${url}/podset
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: jobrun-controller
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: jobruns
  childResources:
  - apiVersion: batch/v1
    resource: jobs
  hooks:
    sync:
      webhook:
        url: ${url}/jobrun
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: service-per-deployment
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  resources:
  - apiVersion: apps/v1
    resource: deployments
    labelSelector:
      matchLabels:
        expose: "yes"
  attachments:
  - apiVersion: v1
    resource: services
  hooks:
    sync:
      webhook:
        url: ${url}/decorate
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: mix-composite
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: mixes
  childResources:
  - apiVersion: v1
    resource: pods
  hooks:
    sync:
      webhook:
        url: ${url}/mix
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata:
  name: mix-map
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  parentResource: { apiVersion: ${GROUP}/v1, resource: mixes }
  inputResources: [{ apiVersion: v1, resource: secrets }]
  outputResources: [{ apiVersion: v1, resource: pods }]
  hooks:
    map: { webhook: { url: "${url}/map" }, timeoutSeconds: 5, retries: 0 }
`,
  );
  // Pods need the namespace's default ServiceAccount, which the ServiceAccount controller makes.
  await eventually(() => admin.find(gvr('', 'v1', 'serviceaccounts'), { name: 'default', namespace: ns }), WAIT_MS);
  runtime = await startRuntime({
    kubeconfig: cp.kubeconfigs.outrigger,
    namespace: ns,
    clusterId: uniqueName('cnodes'),
    stateDir: await mkdtemp(join(tmpdir(), 'outrigger-cnodes-')),
    functions: functions.filter((f) => ['router', 'map'].includes(f.name)),
    oneApiserver: true,
    log: (m) => logs.push(m),
  });
}, 600_000);

afterAll(async () => {
  await runtime?.stop();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  await cp?.stop();
});

/** Runs `body`; on failure, the runtime's last lines say which step of the pipeline stopped short. */
async function withLog(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${logs.slice(-40).join('\n')}`, { cause: err });
  }
}

const livePods = async (labelSelector: string) =>
  (await admin.listAll<Pod>(Resources.pods, { namespace: ns, labelSelector })).filter((p) => !p.metadata.deletionTimestamp);
// A parent has no status until its first sync writes one.
const statusOf = async (r: typeof podSets, name: string) =>
  ((await admin.get(r, { name, namespace: ns })).status ?? {}) as Record<string, unknown>;

test('a CompositeController runs a set of Pods: Running and Ready on the nodes, scaled down, one deleted by hand made again', async () => {
  await withLog(async () => {
    const parent = await admin.create(podSets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'PodSet',
      metadata: { name: 'web', namespace: ns },
      spec: { replicas: 3 },
    } as KubeObject);
    // Three Pods, each scheduled to a kwok node and Ready, each the parent's (ControllerRef and generated selector label).
    const running = await eventually(async () => {
      const ps = await livePods('app=web');
      return ps.length === 3 && ps.every((p) => p.spec.nodeName?.startsWith('node-') && isReady(p)) ? ps : undefined;
    }, WAIT_MS);
    for (const p of running) {
      expect(controllerOf(p)?.uid).toBe(parent.metadata.uid);
      expect(p.metadata.labels?.['controller-uid']).toBe(parent.metadata.uid);
    }
    // The Pods' status changes reach the parent by ControllerRef: the hook sees them Ready and says so.
    await eventually(async () => ((await statusOf(podSets, 'web')).ready === 3 ? true : undefined), WAIT_MS);

    // Scaled down: the Pod the hook stops answering is deleted, the others are left as they were.
    await admin.patch(podSets, { name: 'web', namespace: ns }, { spec: { replicas: 2 } }, 'merge');
    await eventually(async () => ((await livePods('app=web')).length === 2 ? true : undefined), WAIT_MS);
    const kept = await livePods('app=web');
    expect(kept.map((p) => p.metadata.name).sort()).toEqual(['web-0', 'web-1']);
    const uids = new Map(running.map((p) => [p.metadata.name, p.metadata.uid]));
    for (const p of kept) expect(p.metadata.uid).toBe(uids.get(p.metadata.name));
    await eventually(async () => ((await statusOf(podSets, 'web')).replicas === 2 ? true : undefined), WAIT_MS);

    // A Pod deleted by hand: once kwok lets it go, its deletion reaches the parent, whose pass makes it again.
    await admin.delete(Resources.pods, { name: 'web-0', namespace: ns });
    const again = await eventually(async () => {
      const p = (await livePods('app=web')).find((x) => x.metadata.name === 'web-0');
      return p && p.metadata.uid !== uids.get('web-0') && isReady(p) ? p : undefined;
    }, WAIT_MS);
    expect(controllerOf(again)?.uid).toBe(parent.metadata.uid);
    await eventually(async () => ((await statusOf(podSets, 'web')).ready === 2 ? true : undefined), WAIT_MS);
  });
}, 240_000);

test("a CompositeController owning a Job: the job controller's Pods run to completion; deleting the parent, the garbage collector takes Job and Pods", async () => {
  await withLog(async () => {
    const parent = await admin.create(jobRuns, {
      apiVersion: `${GROUP}/v1`,
      kind: 'JobRun',
      metadata: { name: 'nightly', namespace: ns },
      spec: {},
    } as KubeObject);
    const job = await eventually(() => admin.find(jobs, { name: 'nightly-job', namespace: ns }), WAIT_MS);
    expect(controllerOf(job)?.uid).toBe(parent.metadata.uid);
    // kube-controller-manager's job controller makes two Pods, which kwok runs to completion; the Job's status
    // changes reach the parent by ControllerRef, and the hook reports them.
    await eventually(async () => ((await statusOf(jobRuns, 'nightly')).succeeded === 2 ? true : undefined), WAIT_MS);
    const done = await admin.listAll<Pod>(Resources.pods, { namespace: ns, labelSelector: 'batch.kubernetes.io/job-name=nightly-job' });
    expect(done.map((p) => p.status?.phase)).toEqual(['Succeeded', 'Succeeded']);
    for (const p of done) expect(controllerOf(p)?.uid).toBe(job.metadata.uid);
    // The Job, complete, is left as it is (OnDelete), not made again: one Job all along.
    expect((await admin.get(jobs, { name: 'nightly-job', namespace: ns })).metadata.uid).toBe(job.metadata.uid);

    // The parent deleted (no finalize hook): the garbage collector takes the Job by its ControllerRef, then its Pods.
    await admin.delete(jobRuns, { name: 'nightly', namespace: ns });
    await eventually(async () => ((await admin.find(jobs, { name: 'nightly-job', namespace: ns })) ? undefined : true), WAIT_MS);
    await eventually(
      async () =>
        (await admin.listAll(Resources.pods, { namespace: ns, labelSelector: 'batch.kubernetes.io/job-name=nightly-job' })).length === 0
          ? true
          : undefined,
      WAIT_MS,
    );
  });
}, 240_000);

test("a DecoratorController adds a Service per labelled Deployment, whose Ready Pods become the Service's endpoints; an unlabelled one gets none", async () => {
  await withLog(async () => {
    const deployment = (name: string, labels: Record<string, string>) =>
      ({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name, namespace: ns, labels },
        spec: {
          replicas: 2,
          selector: { matchLabels: { run: name } },
          template: { metadata: { labels: { run: name } }, spec: { containers: [{ name: 'c', image: 'registry.example/api:1' }] } },
        },
      }) as KubeObject;
    const failedRoutings = () => runtime.queues.get('router')!.stats.failedReceives;
    const failedBefore = failedRoutings();
    const api = await admin.create(deployments, deployment('api', { expose: 'yes' }));
    await admin.create(deployments, deployment('quiet', {}));
    const svc = await eventually(() => admin.find(services, { name: 'api-svc', namespace: ns }), WAIT_MS);
    expect(controllerOf(svc)?.uid).toBe(api.metadata.uid);
    await eventually(
      async () =>
        (await admin.get(deployments, { name: 'api', namespace: ns })).metadata.labels?.['example.com/exposed'] === 'true'
          ? true
          : undefined,
      WAIT_MS,
    );
    // The deployment controller's ReplicaSet makes two Pods, kwok makes them Ready, and the EndpointSlice
    // controller puts their IPs behind the decorator's Service.
    const ips = await eventually(async () => {
      const ready = (await livePods('run=api')).filter(isReady);
      return ready.length === 2 ? ready.map((p) => p.status!.podIP!).sort() : undefined;
    }, WAIT_MS);
    await eventually(async () => {
      const slices = await admin.listAll<KubeObject & { endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[] }>(
        endpointSlices,
        { namespace: ns, labelSelector: 'kubernetes.io/service-name=api-svc' },
      );
      const listed = slices.flatMap((s) => (s.endpoints ?? []).filter((e) => e.conditions?.ready).flatMap((e) => e.addresses)).sort();
      return listed.join() === ips.join() ? true : undefined;
    }, WAIT_MS);
    // The Service deleted by hand, once the Deployment's own changes are over: its deletion reaches the Deployment
    // by ControllerRef (the router reads no Deployment: Outrigger's group may only list and watch them), and the
    // decorator makes it again.
    await runtime.settled();
    await admin.delete(services, { name: 'api-svc', namespace: ns });
    const again = await eventually(async () => {
      const s = await admin.find(services, { name: 'api-svc', namespace: ns });
      return s && s.metadata.uid !== svc.metadata.uid ? s : undefined;
    }, WAIT_MS);
    expect(controllerOf(again)?.uid).toBe(api.metadata.uid);
    // No event of the Service failed to route (reading the Deployment, as Outrigger, was forbidden: every one did).
    await runtime.settled();
    expect(failedRoutings()).toBe(failedBefore);
    // The unlabelled Deployment's Pods run too, but it is not decorated: no Service, no label, no hook call.
    await eventually(async () => ((await livePods('run=quiet')).filter(isReady).length === 2 ? true : undefined), WAIT_MS);
    expect(await admin.find(services, { name: 'quiet-svc', namespace: ns })).toBeUndefined();
    expect((await admin.get(deployments, { name: 'quiet', namespace: ns })).metadata.labels?.['example.com/exposed']).toBeUndefined();
    expect(calls('/decorate').filter((r) => r.object?.metadata.name === 'quiet')).toEqual([]);

    // The Deployment deleted: the garbage collector takes its Service (the decorator's ControllerRef) with its Pods.
    await admin.delete(deployments, { name: 'api', namespace: ns });
    await eventually(async () => ((await admin.find(services, { name: 'api-svc', namespace: ns })) ? undefined : true), WAIT_MS);
  });
}, 240_000);

test("mix and match: a CompositeController's Pods and a MapController's Pods of one parent run side by side, neither pass touching the other's", async () => {
  await withLog(async () => {
    await admin.create(secrets, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'in', namespace: ns, labels: { feed: 'mx' } },
    } as KubeObject);
    const parent = await admin.create(mixes, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Mix',
      metadata: { name: 'mx', namespace: ns },
      spec: { pods: 2, selector: { matchLabels: { feed: 'mx' } } },
    } as KubeObject);
    // Both controllers' Pods run: the composite's two (its ControllerRef) and the map's one (its ControllerRef too).
    const all = await eventually(async () => {
      const ps = [...(await livePods('mix=composite')), ...(await livePods('mix=map'))];
      return ps.length === 3 && ps.every(isReady) ? ps : undefined;
    }, WAIT_MS);
    for (const p of all) expect(controllerOf(p)?.uid).toBe(parent.metadata.uid);
    const mapPod = all.find((p) => p.metadata.name === 'in-m')!;
    // The Pods' readiness changes brought more passes; the composite's hook was only ever sent its own Pods.
    await eventually(async () => ((await statusOf(mixes, 'mx')).composite as string[] | undefined)?.join() === 'mx-c0,mx-c1', WAIT_MS);
    for (const r of calls('/mix')) expect(Object.keys(r.children?.['Pod.v1'] ?? {}).every((n) => n.startsWith('mx-c'))).toBe(true);
    // One status, both controllers' fields in it: the composite's answer and the map's counts and Synced condition.
    // Neither write undoes the other's, so the passes their writes bring write nothing, and the parent settles
    // (replacing the whole status, the composite's pass and the map's took turns undoing each other, for ever).
    const both = (s: Record<string, unknown>) =>
      s.composite !== undefined &&
      s.outputs !== undefined &&
      (s.conditions as { type: string }[] | undefined)?.some((c) => c.type === 'Synced');
    await eventually(async () => both(await statusOf(mixes, 'mx')), WAIT_MS);
    const settledAt = await eventually(async () => {
      await runtime.settled();
      const before = await admin.get(mixes, { name: 'mx', namespace: ns });
      await runtime.settled();
      const after = await admin.get(mixes, { name: 'mx', namespace: ns });
      return before.metadata.resourceVersion === after.metadata.resourceVersion ? after : undefined;
    }, WAIT_MS);
    expect(both(settledAt.status as Record<string, unknown>)).toBe(true);
    const passes = calls('/mix').length;
    await runtime.settled();
    expect(calls('/mix').length).toBe(passes);

    // The composite answers no Pods: its two are deleted, the map's is left running, the same Pod.
    await admin.patch(mixes, { name: 'mx', namespace: ns }, { spec: { pods: 0 } }, 'merge');
    await eventually(async () => ((await livePods('mix=composite')).length === 0 ? true : undefined), WAIT_MS);
    await eventually(async () => ((await statusOf(mixes, 'mx')).composite as string[] | undefined)?.length === 0, WAIT_MS);
    const left = await livePods('mix=map');
    expect(left.map((p) => [p.metadata.name, p.metadata.uid, isReady(p)])).toEqual([['in-m', mapPod.metadata.uid, true]]);
  });
}, 240_000);
