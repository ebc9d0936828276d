// A CompositeController as Metacontroller users write it, run unchanged on the node bed
// (docs/contributing/test-beds.md#nodes-and-pods; issue 31's "Done when"): its sync and customize hooks are an
// in-cluster Service over plain http, reached through the apiserver's service proxy as the controller's
// ServiceAccount (docs/reference/hooks.md#hooks-inside-the-cluster); its children are Deployments under
// RollingInPlace with an Available status check (docs/controllers/compositecontroller.md#rolling-updates), whose
// pods kube-controller-manager makes and kwok runs; the customize hook asks for a ConfigMap whose value the sync
// hook puts in each Deployment (docs/controllers/compositecontroller.md#related-objects). Outrigger is the local
// runtime (forwarder, router, and the map function serving composite parents), driven by the cluster's events only.
import { execFile } from 'node:child_process';
import type { IncomingHttpHeaders } from 'node:http';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { historyCommand } from '../../cli/history.ts';
import { functions } from '../../functions/index.ts';
import { kubectlBinary } from '../../local/apiserver.ts';
import { startRuntime, type Runtime } from '../../runtime/local.ts';
import { REVISION_LABEL } from '../../shared/composite/rollout.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { gvr, Resources, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { openCrd } from '../testbed/crds.ts';
import { proxyGrant, serviceTo, startHookServer, type HookServer } from '../testbed/hook-service.ts';
import { eventually, uniqueName } from '../testbed/index.ts';
import { controllersGrant, impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'shops.outrigger.test';
const shops = gvr(GROUP, 'v1', 'shops');
const deployments = gvr('apps', 'v1', 'deployments');
const configMaps = gvr('', 'v1', 'configmaps');
const compositeControllers = gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers');
/** The hooks' Service and the controller's ServiceAccount live here, as Metacontroller's manifests put them. */
const SYSTEM = 'shop-system';
const run = promisify(execFile);

// kube-controller-manager's default controllers but its pod garbage collector, which deletes a Pod bound to a node
// that does not exist: the hook Service's endpoint Pod (test/testbed/hook-service.ts) is such a Pod. The endpoints
// and EndpointSlice controllers leave a selector-less Service's Endpoints to whoever wrote them (the mirroring
// controller only copies them into EndpointSlices), so the Service keeps pointing at the test's server.
const CONTROLLERS = ['*', '-pod-garbage-collector-controller'];

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  parent: string;
}

let cp: TestControlPlane;
let admin: KubeClient;
let hooks: HookServer;
let runtime: Runtime;
let ns: string;
const received: Received[] = [];

type Related = Record<string, Record<string, { data?: Record<string, string> }>>;

/**
 * customize: the ConfigMaps labelled with the parent's name. sync: `spec.shards` Deployments of 2 replicas running
 * `spec.image`, each with the related ConfigMap's `greeting` in its environment; the status counts the children.
 */
function answer(path: string, body: { parent: KubeObject; children?: Record<string, object>; related?: Related }): unknown {
  const name = body.parent.metadata.name!;
  if (path === '/customize')
    return { relatedResources: [{ apiVersion: 'v1', resource: 'configmaps', labelSelector: { matchLabels: { shop: name } } }] };
  const spec = body.parent.spec as { image: string; shards: number };
  const greeting = Object.values(body.related?.['ConfigMap.v1'] ?? {})[0]?.data?.greeting ?? '';
  return {
    status: { deployments: Object.keys(body.children?.['Deployment.apps/v1'] ?? {}).length },
    children: Array.from({ length: spec.shards }, (_, i) => {
      const labels = { shop: name, shard: String(i) };
      return {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: `${name}-${i}`, labels },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: { containers: [{ name: 'web', image: spec.image, env: [{ name: 'GREETING', value: greeting }] }] },
          },
        },
      };
    }),
  };
}

beforeAll(async () => {
  cp = await startTestControlPlane({ controllers: CONTROLLERS, nodes: 3 });
  process.stderr.write(
    `[control plane] kube-controller-manager (default controllers but the pod garbage collector), kube-scheduler and 3 kwok nodes ready in ${cp.startedInMs} ms\n`,
  );
  admin = cp.client('admin');
  hooks = await startHookServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Parameters<typeof answer>[1];
      const path = req.url ?? '';
      received.push({ path, headers: req.headers, parent: body.parent.metadata.name ?? '' });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer(path, body)));
    });
  });
  ns = uniqueName('shops');
  await applyManifests(
    admin,
    `
apiVersion: v1
kind: Namespace
metadata: { name: ${SYSTEM} }
---
apiVersion: v1
kind: Namespace
metadata: { name: ${ns} }
`,
  );
  await serviceTo(admin, SYSTEM, 'shop-hooks', hooks);
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'Shop', 'shops')}---
${controllersGrant('outrigger-composite-realistic-test', [
  // What the forwarder watches (the parents, the children, the related kind), as Outrigger.
  `{ apiGroups: ["${GROUP}"], resources: ["shops"], verbs: ["list", "watch"] }`,
  `{ apiGroups: ["apps"], resources: ["deployments"], verbs: ["list", "watch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"] }`,
])}---
${impersonatedAccount(
  SYSTEM,
  'shop-controller',
  // What docs/controllers/compositecontroller.md says the account needs, and no more: the parents, the children,
  // the revisions of a rolling update, the related ConfigMaps; and the hooks' Service, below.
  [
    `{ apiGroups: ["${GROUP}"], resources: ["shops"], verbs: ["get", "list", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["shops/status"], verbs: ["patch"] }`,
    `{ apiGroups: ["apps"], resources: ["deployments"], verbs: ["list", "create", "patch", "delete"] }`,
    `{ apiGroups: ["apps"], resources: ["controllerrevisions"], verbs: ["get", "list", "create", "patch", "delete"] }`,
    `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list"] }`,
  ],
  'compositecontroller/shop-controller',
)}
---
${proxyGrant(SYSTEM, 'shop-hooks-proxy', { kind: 'ServiceAccount', name: 'shop-controller', namespace: SYSTEM }, ['create'])}
`,
  );
  runtime = await startRuntime({
    kubeconfig: cp.kubeconfigs.outrigger,
    namespace: ns,
    clusterId: uniqueName('shops'),
    stateDir: await mkdtemp(join(tmpdir(), 'outrigger-shops-')),
    functions: functions.filter((f) => ['router', 'map'].includes(f.name)),
    ...(process.env.OUTRIGGER_NODES_DEBUG ? { log: (m: string) => process.stderr.write(`[runtime] ${m}\n`) } : {}),
  });
}, 900_000); // a cold run may still be building kwok (test/testbed/prebuild.ts)

afterAll(async () => {
  await runtime?.stop();
  await hooks?.close();
  await cp?.stop();
});

/** `kubectl rollout status`, the project's kubectl against this bed: resolves once the rollout is complete. */
async function rolloutStatus(name: string): Promise<string> {
  const { stdout } = await run(kubectlBinary, ['rollout', 'status', `deployment/${name}`, '-n', ns, '--timeout=150s'], {
    env: { ...process.env, KUBECONFIG: cp.kubeconfigs.admin },
  });
  return stdout;
}

type Condition = { type: string; status: string; reason?: string; message?: string };
type Deployment = KubeObject & {
  spec: { template: { spec: { containers: { image: string; env?: { name: string; value: string }[] }[] } } };
  status?: { observedGeneration?: number; conditions?: Condition[] };
};
type Pod = KubeObject & {
  spec: { nodeName?: string; containers: { image: string; env?: { name: string; value: string }[] }[] };
  status?: { phase?: string; conditions?: Condition[] };
};

const NAMES = ['s-0', 's-1', 's-2'];
const children = async () =>
  (await admin.listAll(deployments, { namespace: ns }))
    .map((d) => d as Deployment)
    .sort((a, b) => a.metadata.name!.localeCompare(b.metadata.name!));
const available = (d: Deployment) => (d.status?.conditions ?? []).some((c) => c.type === 'Available' && c.status === 'True');
/** What the status check and RollingInPlace wait for before the next child moves. */
const settled = (d: Deployment) => (d.status?.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) && available(d);
const image = (d: Deployment) => d.spec.template.spec.containers[0]!.image;
const greeting = (d: Deployment) => d.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'GREETING')?.value;
const updated = async () =>
  ((await admin.get(shops, { name: 's', namespace: ns })).status as { conditions?: Condition[] } | undefined)?.conditions?.find(
    (c) => c.type === 'Updated',
  );

/**
 * The namespace's pods once there are 6, every one Running and Ready on a kwok node, running `want` with the
 * greeting `hello` (and none going).
 */
const podsRunning = (want: string, hello: string) =>
  eventually(async () => {
    const pods = (await admin.listAll(Resources.pods, { namespace: ns })) as Pod[];
    const ok =
      pods.length === 6 &&
      pods.every(
        (p) =>
          !p.metadata.deletionTimestamp &&
          p.spec.containers[0]!.image === want &&
          p.spec.containers[0]!.env?.find((e) => e.name === 'GREETING')?.value === hello &&
          /^node-\d$/.test(p.spec.nodeName ?? '') &&
          p.status?.phase === 'Running' &&
          (p.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
      );
    return ok ? pods : undefined;
  }, 120_000);

test('a CompositeController with in-cluster Service hooks, a customize hook and RollingInPlace Deployments runs unchanged: children created and running, a new image rolled one Deployment at a time, a related ConfigMap change applied', async () => {
  await admin.create(configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 's-settings', namespace: ns, labels: { shop: 's' } },
    data: { greeting: 'hello' },
  } as KubeObject);
  // Plain Metacontroller YAML, plus Outrigger's serviceAccount.
  await applyManifests(
    admin,
    `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: shop-controller }
spec:
  serviceAccount: { namespace: ${SYSTEM}, name: shop-controller }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: shops
    revisionHistory: { fieldPaths: [spec.image] }
  childResources:
  - apiVersion: apps/v1
    resource: deployments
    updateStrategy:
      method: RollingInPlace
      statusChecks:
        conditions: [{ type: Available, status: "True" }]
  hooks:
    customize:
      webhook: { service: { name: shop-hooks, namespace: ${SYSTEM}, port: 80 }, path: /customize, timeout: 10s }
    sync:
      webhook: { service: { name: shop-hooks, namespace: ${SYSTEM}, port: 80, protocol: http }, path: /sync, timeout: 10s }
`,
  );
  await eventually(async () => {
    const cc = await admin.get(compositeControllers, { name: 'shop-controller' });
    const ready = ((cc.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).find((c) => c.type === 'Ready');
    if (ready?.status === 'False') throw new Error(`the CompositeController is not served: ${ready.reason}: ${ready.message}`);
    return ready?.status === 'True' ? true : undefined;
  }, 60_000);

  await admin.create(shops, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Shop',
    metadata: { name: 's', namespace: ns },
    spec: { image: 'registry.example/shop:1', shards: 3 },
  } as KubeObject);

  // Three Deployments, each with the related ConfigMap's value, their pods running on the kwok nodes.
  const first = await eventually(async () => {
    const ds = await children();
    return ds.length === 3 ? ds : undefined;
  }, 120_000);
  expect(first.map((d) => d.metadata.name)).toEqual(NAMES);
  for (const d of first) {
    expect(image(d)).toBe('registry.example/shop:1');
    expect(greeting(d)).toBe('hello');
  }
  for (const name of NAMES) expect(await rolloutStatus(name)).toContain('successfully rolled out');
  await podsRunning('registry.example/shop:1', 'hello');
  const oldRevision = (await children())[0]!.metadata.labels?.[REVISION_LABEL];
  expect(oldRevision).toBeDefined();
  await eventually(async () => ((await updated())?.reason === 'OnLatestRevision' ? true : undefined), 60_000);

  // A new image: the Deployments move to the new revision one at a time, each only once those already moved have
  // seen their new spec and are Available. Every snapshot read while it rolls is recorded and checked.
  await admin.patch(shops, { name: 's', namespace: ns }, { spec: { image: 'registry.example/shop:2' } }, 'merge');
  const moved: string[][] = [];
  const problems: string[] = [];
  await eventually(async () => {
    const ds = await children();
    const onNew = ds.filter((d) => d.metadata.labels?.[REVISION_LABEL] !== oldRevision);
    const names = onNew.map((d) => d.metadata.name!);
    if (JSON.stringify(moved.at(-1)) !== JSON.stringify(names)) moved.push(names);
    // The moved ones are the first in the hook's order, and all but the last moved have settled.
    if (JSON.stringify(names) !== JSON.stringify(NAMES.slice(0, names.length))) problems.push(`moved out of order: ${names.join()}`);
    const unsettled = onNew.filter((d) => !settled(d)).map((d) => d.metadata.name!);
    if (unsettled.length > 1) problems.push(`${unsettled.join(' and ')} on the new revision at once, not settled`);
    for (const d of ds)
      if ((d.metadata.labels?.[REVISION_LABEL] !== oldRevision) !== (image(d) === 'registry.example/shop:2'))
        problems.push(`${d.metadata.name} has image ${image(d)} on revision ${d.metadata.labels?.[REVISION_LABEL]}`);
    return onNew.length === 3 && onNew.every(settled) ? true : undefined;
  }, 240_000);
  expect(problems).toEqual([]);
  // One by one: each snapshot adds at most one (a snapshot may miss a step, never reorder one).
  expect(moved.at(-1)).toEqual(NAMES);
  process.stderr.write(`[composite-realistic] Deployments on the new revision, as seen: ${JSON.stringify(moved)}\n`);
  for (const name of NAMES) expect(await rolloutStatus(name)).toContain('successfully rolled out');
  await podsRunning('registry.example/shop:2', 'hello');
  await eventually(async () => ((await updated())?.reason === 'OnLatestRevision' ? true : undefined), 60_000);

  // `kubectl outrigger history shop/s`: the two revisions, the second current.
  const listed = JSON.parse(await historyCommand(admin, 'shop/s', ns, { output: 'json' })) as {
    revisions: Array<{ revision: number; current: boolean }>;
  };
  expect(listed.revisions.map((r) => [r.revision, r.current])).toEqual([
    [1, false],
    [2, true],
  ]);

  // The related ConfigMap changes: its event reaches the parent (forwarder, router, map function), and every
  // Deployment takes the new value, which the deployment controller rolls out.
  await admin.patch(configMaps, { name: 's-settings', namespace: ns }, { data: { greeting: 'bonjour' } }, 'merge');
  await eventually(async () => ((await children()).every((d) => greeting(d) === 'bonjour') ? true : undefined), 120_000);
  for (const name of NAMES) expect(await rolloutStatus(name)).toContain('successfully rolled out');
  await podsRunning('registry.example/shop:2', 'bonjour');

  // Every hook call came through the apiserver's proxy: the customize and sync paths only, with the proxy's
  // forwarding header and without Outrigger's credentials or impersonation.
  expect(new Set(received.map((r) => r.path))).toEqual(new Set(['/customize', '/sync']));
  for (const r of received) {
    expect(r.headers['x-forwarded-for']).toBeDefined();
    expect(r.headers.authorization).toBeUndefined();
    expect(Object.keys(r.headers).filter((h) => h.startsWith('impersonate-'))).toEqual([]);
  }
  // Nothing failed on the way: no event the router could not route, no pass retried, nothing dead-lettered.
  expect([...runtime.queues].map(([name, q]) => [name, q.stats.failedReceives, q.stats.deadLettered])).toEqual(
    [...runtime.queues.keys()].map((name) => [name, 0, 0]),
  );
  // kube-controller-manager left the Service's endpoint as written: its Pod is there, its Endpoints name our server.
  await admin.get(Resources.pods, { name: 'shop-hooks-server', namespace: SYSTEM });
  const endpoints = await admin.get(gvr('', 'v1', 'endpoints'), { name: 'shop-hooks', namespace: SYSTEM });
  expect((endpoints as KubeObject & { subsets?: { addresses?: { ip: string }[] }[] }).subsets?.[0]?.addresses).toEqual([
    expect.objectContaining({ ip: hooks.address }),
  ]);
}, 600_000);
