// MapController lifecycle options (docs/controllers/mapcontroller.md#lifecycle) on the real apiserver: the finalize hook and
// the controller's finalizer on parents, resyncAfterSeconds (through the local runtime: router, map function, its
// FIFO queue and wake-up timers), and updateStrategy InPlace and Recreate for an output with immutable fields.
// Webhook hooks are a real HTTP server in this process; the runtime's are Lambda handlers on its Invoke endpoint.
/* eslint-disable max-lines -- the lifecycle scenarios share one hook server and the nine parent CRDs and grants applied once in beforeAll */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { forgetMapControllers, listMapControllers, mapControllerFor, type ResolvedMapController } from '../../functions/map/controllers.ts';
import type { MapContext } from '../../functions/map/pass.ts';
import { syncMap } from '../../functions/map/sync.ts';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { passTiming, serveMapRequest, type MapServeContext } from '../../functions/map/handler.ts';
import type { MapControllerSet } from '../../functions/map/controllers.ts';
import { Clusters } from '../../shared/clusters.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import type { Environment } from '../../shared/lambda/environment.ts';
import { QueueUrls } from '../../shared/lambda/queues.ts';
import { sqsRetry } from '../../shared/lambda/retry.ts';
import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest, parseSyncRequest } from '../../shared/lambda/sync-request.ts';
import { SqsSyncSink } from '../../shared/lambda/sync-sink.ts';
import { lambdaContext } from '../../runtime/lambda-context.ts';
import { asRecord } from './sqs-records.ts';
import { CreateQueueCommand, DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { finalizerName, MAP_KEY_LABEL, PARENT_LABEL } from '../../shared/map/api.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import {
  adminClient,
  createNamespace,
  deleteMapControllersCalling,
  eventually,
  outriggerClient,
  startTestRuntime,
  testQueue,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';

const GROUP = 'lifecycle.outrigger.test';
const configMaps = gvr('', 'v1', 'configmaps');
const keepers = gvr(GROUP, 'v1', 'keepers');
const droppers = gvr(GROUP, 'v1', 'droppers');
const stampers = gvr(GROUP, 'v1', 'stampers');
const restampers = gvr(GROUP, 'v1', 'restampers');
const wakers = gvr(GROUP, 'v1', 'wakers');
const closers = gvr(GROUP, 'v1', 'closers');
const sleepers = gvr(GROUP, 'v1', 'sleepers');
const lockers = gvr(GROUP, 'v1', 'lockers');
const quitters = gvr(GROUP, 'v1', 'quitters');
const mapControllers = gvr('metacontroller.k8s.io', 'v1alpha1', 'mapcontrollers');

interface HookRequest {
  parent: KubeObject;
  input?: KubeObject;
  outputs: Record<string, Record<string, KubeObject>>;
}
/** Per parent name, how its finalize hook answers; and each call's request. */
const finalizeAnswers = new Map<string, (req: HookRequest) => unknown>();
const finalizeCalls = new Map<string, HookRequest[]>();
/** Per parent name, the data its map hook answers for each output (default: the input's). */
const stamps = new Map<string, Record<string, string>>();
const mapCalls = new Map<string, number>();
/** Per parent name, when its /map-wake hook was called; it answers resyncAfterSeconds: 2 while `sleepWake` is set. */
const wakeCalls = new Map<string, number[]>();
let sleepWake = true;

const copyOf = (input: KubeObject, data?: Record<string, string>, extra: Record<string, unknown> = {}): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `${input.metadata.name}-copy` },
    data: data ?? (input as { data?: Record<string, string> }).data ?? {},
    ...extra,
  }) as KubeObject;

function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as HookRequest;
    const parent = body.parent.metadata.name ?? '';
    let answer: unknown;
    if (req.url === '/finalize') {
      finalizeCalls.set(parent, [...(finalizeCalls.get(parent) ?? []), body]);
      answer = finalizeAnswers.get(parent)?.(body) ?? { outputs: [], finalized: true };
    } else {
      mapCalls.set(parent, (mapCalls.get(parent) ?? 0) + 1);
      if (req.url === '/map-wake') wakeCalls.set(parent, [...(wakeCalls.get(parent) ?? []), Date.now()]);
      // /map-immutable answers immutable ConfigMaps with the data the test stamps.
      answer = {
        outputs: [req.url === '/map-immutable' ? copyOf(body.input!, stamps.get(parent), { immutable: true }) : copyOf(body.input!)],
        ...(req.url === '/map-wake' && sleepWake ? { resyncAfterSeconds: 2 } : {}),
      };
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  });
}

let server: Server;
let url: string;

const controller = (name: string, plural: string, hooks: string, output = '{ apiVersion: v1, resource: configmaps }') => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: ${name}, labels: { outrigger.test/runtime: map-lifecycle } }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: ${GROUP}/v1, resource: ${plural} }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [${output}]
  hooks:
${hooks}
`;
const hook = (path: string) => `{ webhook: { url: "${url}${path}" }, timeoutSeconds: 2, retries: 0 }`;

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const admin = adminClient();
  await applyManifests(admin, MAP_TEST_IDENTITY);
  const plurals = ['keepers', 'droppers', 'stampers', 'restampers', 'wakers', 'closers', 'sleepers', 'quitters'];
  // Lockers: no patch on the parents themselves, so a finalize hook's finalizer cannot be set.
  const all = [...plurals, 'lockers'];
  await applyManifests(
    admin,
    `${all.map((p) => openCrd(GROUP, p[0]!.toUpperCase() + p.slice(1, -1), p)).join('---\n')}---
${controllersGrant('outrigger-map-lifecycle-test', [
  // patch on the parents themselves: a finalize hook's finalizer is set and removed on the parent.
  `{ apiGroups: ["${GROUP}"], resources: [${plurals.map((p) => `"${p}"`).join(', ')}], verbs: ["get", "list", "watch", "patch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["lockers"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: [${all.map((p) => `"${p}/status"`).join(', ')}], verbs: ["patch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
])}---
${controller('lifecycle-keeper', 'keepers', `    map: ${hook('/map')}\n    finalize: ${hook('/finalize')}`)}---
${controller('lifecycle-dropper', 'droppers', `    map: ${hook('/map')}\n    finalize: ${hook('/finalize')}`)}---
${controller('lifecycle-stamper', 'stampers', `    map: ${hook('/map-immutable')}`)}---
${controller('lifecycle-restamper', 'restampers', `    map: ${hook('/map-immutable')}`, '{ apiVersion: v1, resource: configmaps, updateStrategy: { method: Recreate } }')}---
${controller('lifecycle-sleeper', 'sleepers', `    map: ${hook('/map-wake')}`)}---
${controller('lifecycle-locker', 'lockers', `    map: ${hook('/map')}\n    finalize: ${hook('/finalize')}`)}
`,
  );
}, 60_000);

afterAll(async () => {
  await deleteMapControllersCalling(url);
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

/** The resolved MapController for a parent kind, once Outrigger sees it valid (and at `generation` when given). */
async function controllerFor(kube: KubeClient, kind: string, generation = 0): Promise<ResolvedMapController> {
  for (let i = 0; ; i += 1) {
    forgetMapControllers();
    forgetDiscovery(kube);
    const set = await listMapControllers(kube, 'it');
    const mc = mapControllerFor(set, GROUP, kind);
    if (mc && mc.generation >= generation) return mc;
    if (i > 100) throw new Error(`no valid MapController for ${kind}: ${JSON.stringify(set.invalid)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const context = (kube: KubeClient): MapContext => ({
  kube,
  hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
  concurrency: 4,
});
const keyOf = (o: KubeObject): SyncKey => ({
  cluster: 'it',
  group: GROUP,
  kind: o.kind ?? '',
  namespace: o.metadata.namespace,
  name: o.metadata.name ?? '',
  uid: o.metadata.uid ?? '',
});

async function parentWithInputs(resource: typeof keepers, kind: string, ns: string, name: string, inputs: string[]): Promise<KubeObject> {
  const admin = adminClient();
  for (const i of inputs)
    await admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: i, namespace: ns, labels: { set: name } },
      data: { from: i },
    } as KubeObject);
  return admin.create(resource, {
    apiVersion: `${GROUP}/v1`,
    kind,
    metadata: { name, namespace: ns },
    spec: { selector: { matchLabels: { set: name } } },
  } as KubeObject);
}

const outputsOf = async (ns: string, parent: KubeObject) =>
  (await adminClient().listAll(configMaps, { namespace: ns, labelSelector: `${PARENT_LABEL}=${parent.metadata.uid ?? ''}` }))
    .map((o) => o.metadata.name)
    .sort();

describe('finalize hook', () => {
  test('a parent carries the finalizer; deleted, its finalize hook is called with it and its outputs until it answers finalized, deleting what it does not keep and releasing what it keeps; then the parent goes', async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    const ns = await createNamespace('map-finalize');
    const mc = await controllerFor(kube, 'Keeper');
    const parent = await parentWithInputs(keepers, 'Keeper', ns, 'k1', ['in-a', 'in-b']);
    const ctx = context(kube);

    expect(await syncMap(ctx, mc, keyOf(parent))).toMatchObject({ created: 2, problems: [] });
    expect((await admin.get(keepers, { name: 'k1', namespace: ns })).metadata.finalizers).toEqual([finalizerName('lifecycle-keeper')]);
    expect(await outputsOf(ns, parent)).toEqual(['in-a-copy', 'in-b-copy']);
    // A pass with nothing changed writes nothing to the parent (the finalizer is there).
    kube.stats.reset();
    expect(await syncMap(ctx, mc, keyOf(parent))).toMatchObject({ created: 0, updated: 0, statusWritten: false });
    expect(kube.stats.byVerb['patch/merge'] ?? 0).toBe(0);

    await admin.delete(keepers, { name: 'k1', namespace: ns });
    const deleting = await admin.get(keepers, { name: 'k1', namespace: ns });
    expect(deleting.metadata.deletionTimestamp).toBeDefined();

    // Not done yet, keeping in-a-copy: in-b-copy is deleted, the parent stays with its finalizer.
    finalizeAnswers.set('k1', () => ({
      outputs: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'in-a-copy' } }],
      finalized: false,
      resyncAfterSeconds: 3,
    }));
    const mapCallsBefore = mapCalls.get('k1') ?? 0;
    const started = Date.now();
    const first = await syncMap(ctx, mc, keyOf(deleting));
    expect(first).toMatchObject({ finalized: false, deleted: 1, problems: [] });
    expect(first.wakeAt! - started).toBeGreaterThanOrEqual(2_900);
    expect(first.wakeAt! - Date.now()).toBeLessThanOrEqual(3_000);
    const request = finalizeCalls.get('k1')![0]!;
    expect(request.parent.metadata.uid).toBe(parent.metadata.uid);
    expect(Object.keys(request.outputs['ConfigMap.v1'] ?? {}).sort()).toEqual([`${ns}/in-a-copy`, `${ns}/in-b-copy`]);
    expect(await outputsOf(ns, parent)).toEqual(['in-a-copy']);
    const still = await admin.get(keepers, { name: 'k1', namespace: ns });
    expect(still.metadata.finalizers).toEqual([finalizerName('lifecycle-keeper')]);
    expect(
      (still.status as { conditions: Array<{ type: string; reason: string; message: string }> }).conditions.find(
        (c) => c.type === 'Synced',
      ),
    ).toMatchObject({ reason: 'Deleting', message: 'the parent is being deleted: its finalize hook has not finished' });
    // The map hook is never called for a parent being deleted.
    expect(mapCalls.get('k1') ?? 0).toBe(mapCallsBefore);

    // Done, still keeping in-a-copy: it is released (it outlives the parent), the finalizer goes, and so does the parent.
    finalizeAnswers.set('k1', (req) => ({ outputs: Object.values(req.outputs['ConfigMap.v1'] ?? {}), finalized: true }));
    expect(await syncMap(ctx, mc, keyOf(deleting))).toMatchObject({ finalized: true, released: 1, deleted: 0, problems: [] });
    expect(finalizeCalls.get('k1')).toHaveLength(2);
    expect(await admin.find(keepers, { name: 'k1', namespace: ns })).toBeUndefined();
    const kept = await admin.get(configMaps, { name: 'in-a-copy', namespace: ns });
    expect(kept.metadata.ownerReferences ?? []).toEqual([]);
    expect(kept.metadata.labels?.[MAP_KEY_LABEL]).toBeUndefined();
    expect(kept.metadata.labels?.[PARENT_LABEL]).toBeUndefined();
    expect(await admin.find(configMaps, { name: 'in-b-copy', namespace: ns })).toBeUndefined();
  }, 60_000);

  test('a finalize hook answering finalized with no outputs has every output deleted before the parent goes', async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    const ns = await createNamespace('map-finalize');
    const mc = await controllerFor(kube, 'Keeper');
    const parent = await parentWithInputs(keepers, 'Keeper', ns, 'k2', ['in-c', 'in-d']);
    const ctx = context(kube);
    await syncMap(ctx, mc, keyOf(parent));
    expect(await outputsOf(ns, parent)).toEqual(['in-c-copy', 'in-d-copy']);
    await admin.delete(keepers, { name: 'k2', namespace: ns });
    finalizeAnswers.set('k2', () => ({ outputs: [], finalized: true }));
    expect(await syncMap(ctx, mc, keyOf(await admin.get(keepers, { name: 'k2', namespace: ns })))).toMatchObject({
      finalized: true,
      deleted: 2,
      released: 0,
      problems: [],
    });
    expect(await outputsOf(ns, parent)).toEqual([]);
    expect(await admin.find(keepers, { name: 'k2', namespace: ns })).toBeUndefined();
  }, 60_000);

  test('dropping the finalize hook from the spec removes the finalizer from parents; no hook, no finalizer', async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    const ns = await createNamespace('map-finalize');
    const mc = await controllerFor(kube, 'Dropper');
    const parent = await parentWithInputs(droppers, 'Dropper', ns, 'd1', ['in-e']);
    const ctx = context(kube);
    await syncMap(ctx, mc, keyOf(parent));
    expect((await admin.get(droppers, { name: 'd1', namespace: ns })).metadata.finalizers).toEqual([finalizerName('lifecycle-dropper')]);
    // Someone else's finalizer is left as it is.
    await admin.patch(
      droppers,
      { name: 'd1', namespace: ns },
      { metadata: { finalizers: [finalizerName('lifecycle-dropper'), 'example.com/other'] } },
      'merge',
    );
    const changed = await admin.patch(
      gvr('metacontroller.k8s.io', 'v1alpha1', 'mapcontrollers'),
      { name: 'lifecycle-dropper' },
      [{ op: 'remove', path: '/spec/hooks/finalize' }],
      'json',
    );
    const without = await controllerFor(kube, 'Dropper', changed.metadata.generation);
    expect(without.spec.hooks.finalize).toBeUndefined();
    expect(await syncMap(ctx, without, keyOf(parent))).toMatchObject({ problems: [] });
    expect((await admin.get(droppers, { name: 'd1', namespace: ns })).metadata.finalizers).toEqual(['example.com/other']);
    // A new parent gets none.
    const other = await parentWithInputs(droppers, 'Dropper', ns, 'd2', []);
    await syncMap(ctx, without, keyOf(other));
    expect((await admin.get(droppers, { name: 'd2', namespace: ns })).metadata.finalizers).toBeUndefined();
  }, 60_000);
});

describe('a MapController with a finalize hook, deleted', () => {
  test('releases its parents: its finalizer goes from each, then the MapController goes, and the parents can be deleted', async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    const ns = await createNamespace('map-quit');
    const name = uniqueName('lifecycle-quitter');
    await applyManifests(admin, controller(name, 'quitters', `    map: ${hook('/map')}\n    finalize: ${hook('/finalize')}`));
    const mc = await controllerFor(kube, 'Quitter');
    const ctx: MapServeContext = {
      kube,
      state: testState(),
      syncSink: { send: async () => undefined },
      hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
      controllers: clusterCache<MapControllerSet>(60_000),
      log: () => undefined,
    };
    const controllerKey = { cluster: 'it', group: 'metacontroller.k8s.io', kind: 'MapController', name, uid: mc.uid };
    // The MapController's change (its creation, as the router sends it) queues its parents.
    await serveMapRequest(makeSyncRequest(controllerKey, ['MapController/created']), Date.now(), ctx);
    const parents = [
      await parentWithInputs(quitters, 'Quitter', ns, 'q1', ['in-q1']),
      await parentWithInputs(quitters, 'Quitter', ns, 'q2', []),
    ];
    for (const p of parents) await syncMap(context(kube), mc, keyOf(p));
    for (const p of parents)
      expect((await admin.get(quitters, { name: p.metadata.name!, namespace: ns })).metadata.finalizers).toEqual([finalizerName(name)]);

    await admin.delete(mapControllers, { name });
    await serveMapRequest(makeSyncRequest(controllerKey, ['MapController/deleting']), Date.now(), ctx);
    for (const p of parents)
      expect((await admin.get(quitters, { name: p.metadata.name!, namespace: ns })).metadata.finalizers ?? []).toEqual([]);
    await eventually(async () => (await admin.find(mapControllers, { name })) === undefined, 10_000);
    for (const p of parents) await admin.delete(quitters, { name: p.metadata.name!, namespace: ns });
    await eventually(async () => (await admin.listAll(quitters, { namespace: ns })).length === 0, 10_000);
    // Its finalize hook was never asked: the controller is gone, not the parents' deletion.
    for (const p of parents) expect(finalizeCalls.get(p.metadata.name!)).toBeUndefined();
  }, 60_000);
});

describe('finalize hook without patch on the parents', () => {
  test("a ServiceAccount that may not patch the parent: Forbidden in the parent's status, naming the finalizer, and the outputs are mapped all the same", async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    const ns = await createNamespace('map-finalize');
    const mc = await controllerFor(kube, 'Locker');
    const parent = await parentWithInputs(lockers, 'Locker', ns, 'l1', ['in-l']);
    const result = await syncMap(context(kube), mc, keyOf(parent));
    expect(result).toMatchObject({
      created: 1,
      problems: [
        {
          reason: 'Forbidden',
          what: 'finalizer',
          message: `the controller's ServiceAccount may not patch lockers.${GROUP} to set its finalizer`,
        },
      ],
    });
    const now = await admin.get(lockers, { name: 'l1', namespace: ns });
    expect(now.metadata.finalizers).toBeUndefined();
    expect(
      (now.status as { conditions: Array<{ type: string; status: string; reason: string }> }).conditions.find((c) => c.type === 'Synced'),
    ).toMatchObject({ status: 'False', reason: 'Forbidden' });
    expect(await outputsOf(ns, parent)).toEqual(['in-l-copy']);
  }, 60_000);
});

describe('updateStrategy', () => {
  test('an output whose immutable field changes: InPlace reports WriteFailed and leaves it; Recreate deletes and creates it with the new answer', async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    const ns = await createNamespace('map-strategy');
    const inPlace = await controllerFor(kube, 'Stamper');
    const recreate = await controllerFor(kube, 'Restamper');
    expect(recreate.outputs[0]!.updateMethod).toBe('Recreate');
    expect(inPlace.outputs[0]!.updateMethod).toBe('InPlace');
    const ctx = context(kube);
    const s = await parentWithInputs(stampers, 'Stamper', ns, 's1', ['in-s']);
    const r = await parentWithInputs(restampers, 'Restamper', ns, 'r1', ['in-r']);
    stamps.set('s1', { v: '1' });
    stamps.set('r1', { v: '1' });
    expect(await syncMap(ctx, inPlace, keyOf(s))).toMatchObject({ created: 1, problems: [] });
    expect(await syncMap(ctx, recreate, keyOf(r))).toMatchObject({ created: 1, problems: [] });
    const before = await admin.get(configMaps, { name: 'in-r-copy', namespace: ns });

    stamps.set('s1', { v: '2' });
    stamps.set('r1', { v: '2' });
    const failed = await syncMap(ctx, inPlace, keyOf(s));
    expect(failed.problems).toMatchObject([{ reason: 'WriteFailed', message: 'the apiserver refused a write: HTTP 422 Invalid' }]);
    expect((await admin.get(configMaps, { name: 'in-s-copy', namespace: ns })).data).toEqual({ v: '1' });
    // As today: it stays failed on the next pass too.
    expect((await syncMap(ctx, inPlace, keyOf(s))).problems).toMatchObject([{ reason: 'WriteFailed' }]);

    expect(await syncMap(ctx, recreate, keyOf(r))).toMatchObject({ recreated: 1, created: 0, updated: 0, problems: [] });
    const after = await admin.get(configMaps, { name: 'in-r-copy', namespace: ns });
    expect(after.data).toEqual({ v: '2' });
    expect(after.metadata.uid).not.toBe(before.metadata.uid);
    expect(after.metadata.ownerReferences?.[0]).toMatchObject({ uid: r.metadata.uid, controller: true });
    // Nothing changed: nothing recreated, nothing written.
    kube.stats.reset();
    expect(await syncMap(ctx, recreate, keyOf(r))).toMatchObject({ recreated: 0, updated: 0, unchanged: 1, statusWritten: false });
    expect((await admin.get(configMaps, { name: 'in-r-copy', namespace: ns })).metadata.uid).toBe(after.metadata.uid);
  }, 60_000);
});

describe('in the local runtime (router, map function, FIFO queue)', () => {
  test('resyncAfterSeconds: 2 has the hook called again about every 2 s with no change; the parent of a finalize hook that is not done yet stays until it is', async () => {
    const admin = adminClient();
    const ns = await createNamespace('map-wake');
    const calls: number[] = [];
    let wake = true;
    const finalizeCallTimes: number[] = [];
    const hooks = new Map<string, (event: HookRequest) => Promise<unknown>>([
      [
        'lifecycle-wake-map',
        async (req) => {
          if (req.parent.kind === 'Waker') calls.push(Date.now());
          return { outputs: [copyOf(req.input!)], ...(wake && req.parent.kind === 'Waker' ? { resyncAfterSeconds: 2 } : {}) };
        },
      ],
      // Not done until 2.5 s after its first call, keeping every output (so no output event brings a pass) and
      // asking to be called again after 1 s; then done, keeping nothing.
      [
        'lifecycle-close-finalize',
        async (req) => {
          finalizeCallTimes.push(Date.now());
          return Date.now() < finalizeCallTimes[0]! + 2_500
            ? { outputs: Object.values(req.outputs['ConfigMap.v1'] ?? {}), finalized: false, resyncAfterSeconds: 1 }
            : { outputs: [], finalized: true };
        },
      ],
    ]);
    await applyManifests(
      admin,
      `${controller('lifecycle-waker', 'wakers', '    map: { lambda: { functionName: lifecycle-wake-map } }')}---
${controller('lifecycle-closer', 'closers', '    map: { lambda: { functionName: lifecycle-wake-map } }\n    finalize: { lambda: { functionName: lifecycle-close-finalize } }')}`,
    );
    await controllerFor(outriggerClient(), 'Waker');
    await controllerFor(outriggerClient(), 'Closer');
    // It serves this file's definitions only (controllerSelector): a runtime that served every one would sync
    // other files' parents as a deployment of its own, cluster-scoped ones in every namespace.
    const runtime = await startTestRuntime('map-wake', ['router', 'map'], {
      namespace: ns,
      hooks,
      controllerSelector: 'outrigger.test/runtime=map-lifecycle',
    });
    try {
      await parentWithInputs(wakers, 'Waker', ns, 'w1', ['in-w']);
      const gapsOf = () => calls.slice(1).map((t, i) => (t - calls[i]!) / 1000);
      // The first calls come close together: the output's own events (its creation names it) bring passes that
      // answer it again. After them, only the wake-ups: three in a row.
      const steady = () => gapsOf().slice(gapsOf().findIndex((g) => g >= 1.5));
      await eventually(async () => gapsOf().some((g) => g >= 1.5) && steady().length >= 3, 30_000);
      wake = false;
      console.log(JSON.stringify({ figure: 'resyncAfterSeconds 2: gaps between hook calls (s)', gaps: gapsOf() }));
      // Each call no sooner than asked; how much later a busy machine makes it is the printed figure's, not an assert's.
      for (const g of steady()) expect(g).toBeGreaterThanOrEqual(1.7);
      // Once it stops asking, it is called at most once more (a timer already set), then no more.
      await new Promise((r) => setTimeout(r, 3_000));
      const settledCalls = calls.length;
      await new Promise((r) => setTimeout(r, 4_000));
      expect(calls.length).toBe(settledCalls);
      const map = runtime.queues.get('map')!;
      expect(map.stats.deadLettered).toBe(0);

      // finalize, end to end: the deletion's event brings the hook; not done, called again 1 s later; then done.
      const closer = await parentWithInputs(closers, 'Closer', ns, 'c1', ['in-c1']);
      await eventually(
        async () =>
          (await admin.get(closers, { name: 'c1', namespace: ns })).metadata.finalizers?.includes(finalizerName('lifecycle-closer')) ===
          true,
        30_000,
      );
      await eventually(async () => (await outputsOf(ns, closer)).length === 1, 30_000);
      const deletedAt = Date.now();
      await admin.delete(closers, { name: 'c1', namespace: ns });
      await eventually(() => finalizeCallTimes.length > 0, 30_000);
      // Not done yet: the parent stays, with its finalizer and the outputs the hook keeps.
      await new Promise((r) => setTimeout(r, finalizeCallTimes[0]! + 2_000 - Date.now()));
      const waiting = await admin.get(closers, { name: 'c1', namespace: ns });
      expect(waiting.metadata.finalizers).toEqual([finalizerName('lifecycle-closer')]);
      expect(await outputsOf(ns, closer)).toEqual(['in-c1-copy']);
      await eventually(async () => (await admin.find(closers, { name: 'c1', namespace: ns })) === undefined, 30_000);
      const finalizeGaps = finalizeCallTimes.slice(1).map((t, i) => (t - finalizeCallTimes[i]!) / 1000);
      console.log(
        JSON.stringify({
          figure: 'finalize: delete to parent gone (s); gaps between finalize calls (s), each not-done answer asking for 1 s',
          seconds: (Date.now() - deletedAt) / 1000,
          finalizeGaps,
        }),
      );
      // The first calls come from the deletion's events; once they settle, only the wake-up each answer asked for
      // calls it again, about 1 s later, until it is done.
      expect(finalizeGaps.filter((g) => g >= 0.75).length).toBeGreaterThanOrEqual(2);
      expect(finalizeGaps.at(-1)).toBeGreaterThanOrEqual(0.75);
      expect(Math.max(...finalizeGaps)).toBeLessThan(3);
      expect(await outputsOf(ns, closer)).toEqual([]);
    } finally {
      await runtime.stop();
    }
  }, 120_000);
});

describe('resyncAfterSeconds on SQS (ElasticMQ), as Lambda runs the map function', () => {
  test("the timer is held back by its visibility in a group of its own: the parent's own events are not held up, and the hook is called again about 2 s later", async () => {
    const kube = outriggerClient();
    const ns = await createNamespace('map-wake-sqs');
    await controllerFor(kube, 'Sleeper');
    const { sqs, url: anyQueue } = await testQueue('map-wake');
    const queues = new QueueUrls(`${anyQueue.slice(0, anyQueue.lastIndexOf('/') + 1)}${uniqueName('mw')}-`);
    const queueUrl = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: queues.name('it', 'map'), Attributes: { FifoQueue: 'true', VisibilityTimeout: '60' } }),
      )
    ).QueueUrl!;
    const arn = `arn:aws:sqs:elasticmq:000000000000:${queues.name('it', 'map')}`;
    const env: Environment = {
      clusters: new Clusters([]),
      state: testState(),
      deadLetter: new MemoryDeadLetterSink(),
      syncSink: new SqsSyncSink(queues, sqs),
      queues,
      retry: sqsRetry(queues, sqs),
    };
    const hooks = new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
    const controllers = clusterCache<MapControllerSet>(60_000);
    const lambda = syncFunction(
      'map',
      (request, tools) =>
        serveMapRequest(request, tools.sentAt, {
          kube,
          state: tools.env.state,
          syncSink: tools.env.syncSink,
          hooks,
          controllers,
          log: () => undefined,
          ...passTiming(tools),
        }),
      {
        environment: () => env,
      },
    ) as unknown as (
      event: { Records: SQSRecord[] },
      context: unknown,
    ) => Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }>;
    /** One message at a time, as the event source mapping hands it over, deleted unless it failed (or was held). */
    const handled: Array<{ at: number; causes: string[]; group: string; held: boolean; receiveCount: number }> = [];
    const pump = async (until: () => boolean, timeoutMs: number) => {
      for (const deadline = Date.now() + timeoutMs; !until() && Date.now() < deadline;) {
        const got = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 1,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['All'],
          }),
        );
        for (const m of got.Messages ?? []) {
          const response = await lambda({ Records: [asRecord(m, arn)] }, lambdaContext({ name: 'map', timeoutSeconds: 60 }));
          const held = response.batchItemFailures.length > 0;
          if (!held) await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle! }));
          handled.push({
            at: Date.now(),
            causes: parseSyncRequest(m.Body ?? '').causes,
            group: m.Attributes?.MessageGroupId ?? '',
            held,
            receiveCount: Number(m.Attributes?.ApproximateReceiveCount),
          });
        }
      }
    };
    const p = await parentWithInputs(sleepers, 'Sleeper', ns, 'z1', ['in-z']);
    const request = (cause: string) =>
      makeSyncRequest({ cluster: 'it', group: GROUP, kind: 'Sleeper', namespace: ns, name: 'z1', uid: p.metadata.uid ?? '' }, [cause]);
    await new SqsSyncSink(queues, sqs).send('map', [request('ConfigMap/first-event')]);
    // The pass calls the hook and sends the timer; the timer's first receive holds it back.
    await pump(() => handled.some((h) => h.held), 15_000);
    expect(wakeCalls.get('z1')).toHaveLength(1);
    const timer = handled.find((h) => h.held)!;
    expect(timer.causes[0]).toMatch(/^timer\//);
    expect(timer.group).toBe(`it/${p.metadata.uid ?? ''}/timer`);
    // The next answer asks for nothing more.
    sleepWake = false;
    // Meanwhile an event for the parent is served at once: its group is not the timer's.
    const sentAt = Date.now();
    await new SqsSyncSink(queues, sqs).send('map', [request('ConfigMap/second-event')]);
    await pump(() => handled.some((h) => h.causes[0] === 'ConfigMap/second-event'), 10_000);
    const eventServedMs = handled.find((h) => h.causes[0] === 'ConfigMap/second-event')!.at - sentAt;
    // Its pass keeps the answer (nothing changed, the wish not yet due): no call.
    expect(wakeCalls.get('z1')).toHaveLength(1);
    // Then the timer comes back when due, sends the parent a wake request in its own group, and that pass calls the hook.
    await pump(() => (wakeCalls.get('z1')?.length ?? 0) >= 2, 15_000);
    const [t1, t2] = wakeCalls.get('z1')!;
    const gapSeconds = (t2! - t1!) / 1000;
    console.log(
      JSON.stringify({
        figure: 'resyncAfterSeconds 2 on ElasticMQ: gap between hook calls (s); an event served while the timer was held (ms)',
        gapSeconds,
        eventServedMs,
        handled: handled.map((h) => ({ cause: h.causes[0]?.split('/')[0], held: h.held, receiveCount: h.receiveCount })),
      }),
    );
    expect(eventServedMs).toBeLessThan(1_900);
    expect(gapSeconds).toBeGreaterThanOrEqual(1.9);
    expect(gapSeconds).toBeLessThan(4);
    const fired = handled.filter((h) => h.causes[0]?.startsWith('timer/') && !h.held);
    expect(fired).toHaveLength(1);
    expect(fired[0]!.receiveCount).toBe(2);
    expect(handled.find((h) => h.causes[0]?.startsWith('wake/'))!.group).toBe(`it/${p.metadata.uid ?? ''}`);
    // No wish any more: nothing else comes.
    await pump(() => false, 3_000);
    expect(wakeCalls.get('z1')).toHaveLength(2);
  }, 60_000);
});
