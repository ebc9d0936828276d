// The composite requests' handler (functions/composite/serve.ts, run by the map function) on the real apiserver and DynamoDB Local, its
// queue a recording sink: a definition's change queues every parent, a hook's resyncAfterSeconds becomes a timer in
// a group of its own that fires once due, a hook failure is a Warning Event and a retry unless a retry cannot cure it.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { compositeControllers, listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { UNRESOLVED_RETRY_RECEIVES } from '../../shared/composite/api.ts';
import { serveCompositeRequest, type CompositeServeContext } from '../../functions/composite/serve.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { NotYet, RetryLater } from '../../shared/lambda/retry.ts';
import { makeSyncRequest, type SyncRequest } from '../../shared/lambda/sync-request.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite-handler.outrigger.test';
const gizmos = gvr(GROUP, 'v1', 'gizmos');
const NS = 'outrigger-composite-handler';
let server: Server;
let answer: { status: number; body: unknown } = { status: 200, body: {} };

const sent: Array<{ target: string; request: SyncRequest; group: string | undefined }> = [];
const cache = clusterCache<CompositeSet>(0);
const ctx = (): CompositeServeContext => ({
  kube: outriggerClient(),
  state: testState(),
  syncSink: {
    send: (target, requests, groupOf) => {
      for (const request of requests) sent.push({ target, request, group: groupOf?.(request) });
      return Promise.resolve();
    },
  },
  hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
  controllers: cache,
  log: () => {},
});

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'Gizmo', 'gizmos')}---
${controllersGrant('outrigger-composite-handler-test', [
  // What the forwarder watches and the router lists, as Outrigger (docs/controllers/compositecontroller.md).
  `{ apiGroups: ["${GROUP}"], resources: ["gizmos"], verbs: ["list", "watch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'gizmo',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["gizmos"], verbs: ["get", "list", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["gizmos/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/gizmo-controller',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: gizmo-controller }
spec:
  serviceAccount: { namespace: ${NS}, name: gizmo }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: gizmos }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { webhook: { url: "${url}/sync" }, retries: 0 } }
`,
  );
  const kube = outriggerClient();
  for (let i = 0; i < 100; i += 1) {
    forgetDiscovery(kube);
    if ((await listCompositeSet(kube, 'it', cache)).composites.length) break;
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  await adminClient()
    .delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name: 'gizmo-controller' })
    .catch(() => undefined);
  await new Promise<void>((r) => server.close(() => r()));
});

const keyOf = (o: KubeObject) => ({
  cluster: 'it',
  group: GROUP,
  kind: 'Gizmo',
  namespace: o.metadata.namespace,
  name: o.metadata.name ?? '',
  uid: o.metadata.uid ?? '',
});

test("a definition's change writes its Ready condition and queues every parent it serves", async () => {
  const ns = await createNamespace('gizmo');
  const parent = await adminClient().create(gizmos, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gizmo',
    metadata: { name: uniqueName('g'), namespace: ns },
    spec: {},
  } as KubeObject);
  const cc = await adminClient().get(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name: 'gizmo-controller' });
  sent.length = 0;
  await serveCompositeRequest(
    makeSyncRequest(
      { cluster: 'it', group: 'metacontroller.k8s.io', kind: 'CompositeController', name: 'gizmo-controller', uid: cc.metadata.uid ?? '' },
      ['changed'],
    ),
    Date.now(),
    ctx(),
  );
  expect(sent.map((s) => [s.target, s.request.key.uid])).toContainEqual(['map', parent.metadata.uid]);
  const after = await adminClient().get(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name: 'gizmo-controller' });
  expect((after.status as { conditions: Array<{ type: string; status: string }> }).conditions).toEqual([
    expect.objectContaining({ type: 'Ready', status: 'True' }),
  ]);
});

test('resyncAfterSeconds: a timer in its own group, held back until due, then an ordinary request for the parent', async () => {
  const ns = await createNamespace('gizmo');
  const parent = await adminClient().create(gizmos, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gizmo',
    metadata: { name: 'timed', namespace: ns },
    spec: {},
  } as KubeObject);
  answer = { status: 200, body: { status: { ok: true }, children: [], resyncAfterSeconds: 2 } };
  sent.length = 0;
  const c = ctx();
  await serveCompositeRequest(makeSyncRequest(keyOf(parent), ['event']), Date.now(), c);
  expect((await adminClient().get(gizmos, { name: 'timed', namespace: ns })).status).toEqual({ ok: true });
  expect(sent).toHaveLength(1);
  const timer = sent[0]!;
  expect(timer.group).toMatch(/\/timer$/);
  // Received before it is due: held back, in whole seconds.
  await expect(serveCompositeRequest(timer.request, Date.now(), c)).rejects.toBeInstanceOf(NotYet);
  await new Promise((r) => setTimeout(r, 2_000));
  sent.length = 0;
  await serveCompositeRequest(timer.request, Date.now(), c);
  expect(sent).toHaveLength(1);
  expect(sent[0]!.group).toBeUndefined();
  expect(sent[0]!.request.causes[0]).toMatch(/^wake\//);
});

test('a hook failure is a Warning Event on the parent and a retry', async () => {
  const ns = await createNamespace('gizmo');
  const parent = await adminClient().create(gizmos, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gizmo',
    metadata: { name: 'broken', namespace: ns },
    spec: {},
  } as KubeObject);
  answer = { status: 500, body: { error: 'boom' } };
  await expect(serveCompositeRequest(makeSyncRequest(keyOf(parent), ['event']), Date.now(), ctx())).rejects.toBeInstanceOf(RetryLater);
  const events = await adminClient().listAll(gvr('events.k8s.io', 'v1', 'events'), { namespace: ns });
  expect(events.map((e) => (e as unknown as { reason: string }).reason)).toContain('HookHTTPError');
});

test('a HookRefused answer (a redirect) is a Warning Event and no retry: only a change of the hook can cure it', async () => {
  const ns = await createNamespace('gizmo');
  const parent = await adminClient().create(gizmos, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Gizmo',
    metadata: { name: 'refused', namespace: ns },
    spec: {},
  } as KubeObject);
  answer = { status: 307, body: {} };
  await serveCompositeRequest(makeSyncRequest(keyOf(parent), ['event']), Date.now(), ctx());
  const events = await adminClient().listAll(gvr('events.k8s.io', 'v1', 'events'), { namespace: ns });
  expect(events.map((e) => (e as unknown as { reason: string }).reason)).toContain('HookRefused');
});

test('a definition applied before its parent CRD is retried within seconds, and Ready once the kind is served', async () => {
  const admin = adminClient();
  const group = 'late-crd.outrigger.test';
  const name = uniqueName('late');
  await applyManifests(
    admin,
    `${impersonatedAccount(NS, 'late', [`{ apiGroups: ["${group}"], resources: ["latecomers"], verbs: ["get", "list", "patch"] }`], `compositecontroller/${name}`)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${name} }
spec:
  serviceAccount: { namespace: ${NS}, name: late }
  generateSelector: true
  parentResource: { apiVersion: ${group}/v1, resource: latecomers }
  hooks: { sync: { webhook: { url: "http://127.0.0.1:1/sync" } } }
`,
  );
  const uid = (await admin.get(compositeControllers, { name })).metadata.uid ?? '';
  const request = makeSyncRequest({ cluster: 'it', group: 'metacontroller.k8s.io', kind: 'CompositeController', name, uid }, ['event']);
  const ready = async () =>
    (
      (await admin.get(compositeControllers, { name })).status as { conditions?: Array<{ type: string; status: string; reason: string }> }
    ).conditions?.find((c) => c.type === 'Ready');
  try {
    // Not served yet: Ready=False, and the event comes back after its backoff (2 s, 4 s, ...), until its last receive.
    await expect(serveCompositeRequest(request, Date.now(), { ...ctx(), receiveCount: 1 })).rejects.toBeInstanceOf(RetryLater);
    expect(await ready()).toMatchObject({ status: 'False', reason: 'UnresolvableResource' });
    await expect(
      serveCompositeRequest(request, Date.now(), { ...ctx(), receiveCount: UNRESOLVED_RETRY_RECEIVES }),
    ).resolves.toBeUndefined();
    await applyManifests(admin, openCrd(group, 'Latecomer', 'latecomers'));
    // A retry once the apiserver serves the kind: Ready, with no resync.
    await eventually(() =>
      serveCompositeRequest(request, Date.now(), { ...ctx(), receiveCount: 2 }).then(
        () => true,
        (err: unknown) => {
          if (!(err instanceof RetryLater)) throw err;
          return undefined;
        },
      ),
    );
    expect(await ready()).toMatchObject({ status: 'True' });
  } finally {
    await admin.delete(compositeControllers, { name }).catch(() => undefined);
  }
});
