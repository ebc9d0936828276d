// MapController (docs/controllers/mapcontroller.md) on the real apiserver, as the `outrigger` identity under the project's RBAC plus what
// each controller's author grants. Hooks are real: the SnapshotSchedule example's Lambda handlers behind the
// local Lambda Invoke endpoint (called with the AWS SDK's Lambda client), and HTTP webhooks the tests serve.
/* eslint-disable max-lines -- the scenarios share the example's Lambda Invoke endpoint, a webhook server and the CRDs and RBAC applied once in beforeAll */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { forgetMapControllers, listMapControllers, mapControllerFor, mapControllers, mapSource } from '../../functions/map/controllers.ts';
import { routeEnvelope } from '../../functions/router/route.ts';
import { makeEnvelope } from '../../shared/envelope/index.ts';
import { BatchResolver } from '../../shared/ownership/index.ts';
import type { MapContext } from '../../functions/map/pass.ts';
import { syncMap } from '../../functions/map/sync.ts';
import { exampleHooks, startLambdaEndpoint, type LambdaEndpoint } from '../../local/lambda-endpoint.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { MAP_KEY_LABEL } from '../../shared/map/api.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, eventually, outriggerClient, startTestRuntime, testCluster, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';

const schedules = gvr('snapshot.outrigger.dev', 'v1', 'snapshotschedules');
const snapshots = gvr('snapshot.storage.k8s.io', 'v1', 'volumesnapshots');
const pvcs = gvr('', 'v1', 'persistentvolumeclaims');
const configMaps = gvr('', 'v1', 'configmaps');

let lambda: LambdaEndpoint;
let hookServer: Server;
let hookUrl: string;

beforeAll(async () => {
  const admin = adminClient();
  const dir = new URL('../../examples/snapshot-schedule/', import.meta.url);
  for (const f of ['crds.yaml', 'rbac.yaml']) await applyManifests(admin, await readFile(new URL(f, dir), 'utf8'));
  await applyManifests(admin, MAPPER_MANIFESTS);
  await applyManifests(admin, MAP_TEST_IDENTITY);
  // Passes below call syncMap as Outrigger itself; the map function acts as the example's ServiceAccount.
  await applyManifests(
    admin,
    `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: outrigger-map-snapshot-schedule-test }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: outrigger-map-snapshot-schedule }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: "outrigger:controllers" }]
`,
  );
  lambda = await startLambdaEndpoint(await exampleHooks());
  hookServer = createServer(webhook);
  await new Promise<void>((r) => hookServer.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  await lambda?.stop();
  await new Promise<void>((r) => hookServer?.close(() => r()));
});

function context(kube: KubeClient): MapContext & { hooks: Hooks } {
  return {
    kube,
    hooks: new Hooks({ lambdaEndpoint: lambda.url, minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
    concurrency: 8,
  };
}

async function controllerFor(kube: KubeClient, group: string, kind: string) {
  forgetMapControllers();
  forgetDiscovery(kube);
  for (let i = 0; i < 50; i += 1) {
    const set = await listMapControllers(kube, 'it');
    const mc = mapControllerFor(set, group, kind);
    if (mc) return mc;
    forgetMapControllers();
    forgetDiscovery(kube);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no valid MapController for ${kind}: ${JSON.stringify((await listMapControllers(kube, 'it')).invalid)}`);
}

const keyOf = (o: KubeObject): SyncKey => ({
  cluster: 'it',
  group: o.apiVersion?.split('/')[0] ?? '',
  kind: o.kind ?? '',
  namespace: o.metadata.namespace,
  name: o.metadata.name ?? '',
  uid: o.metadata.uid ?? '',
});
const writes = (kube: KubeClient) =>
  Object.entries(kube.stats.byVerb)
    .filter(([v]) => !['get', 'list'].includes(v))
    .reduce((n, [, x]) => n + x, 0);

describe('MapController: SnapshotSchedule, the docs example, with Lambda hooks', () => {
  test('PVCs get a snapshot per interval; a resync with nothing due writes nothing; a deleted PVC keeps its snapshots until their TTL; status counts', async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    const ns = await createNamespace('map');
    await applyManifests(admin, await readFile(new URL('../../examples/snapshot-schedule/controller.yaml', import.meta.url), 'utf8'));
    const mc = await controllerFor(kube, 'snapshot.outrigger.dev', 'SnapshotSchedule');
    const pvc = (name: string, app: string) =>
      admin.create(pvcs, {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name, namespace: ns, labels: { app } },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      } as KubeObject);
    await pvc('data-a', 'my-app');
    await pvc('data-b', 'my-app');
    await pvc('other', 'other-app');
    // Interval 4 s and TTL 6 s, the clock aligned to just after an interval starts (T0), so the steps below fall
    // in known intervals: first and second pass in [T0, T0+4), the next ones in [T0+4, T0+8), the last at T0+10.
    const parent = await admin.create(schedules, {
      apiVersion: 'snapshot.outrigger.dev/v1',
      kind: 'SnapshotSchedule',
      metadata: { name: 'my-app-snapshots', namespace: ns },
      spec: { snapshotInterval: '4s', snapshotTTL: '6s', selector: { matchLabels: { app: 'my-app' } } },
    } as KubeObject);
    const ctx = context(kube);
    const list = async () => (await admin.listAll(snapshots, { namespace: ns })).map((s) => s.metadata.name!).sort();

    const sleepUntil = (t: number) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));
    const t0 = Math.ceil(Date.now() / 4_000) * 4_000;
    await sleepUntil(t0 + 100);
    const first = await syncMap(ctx, mc, keyOf(parent));
    expect(first).toMatchObject({ inputs: 2, hookCalls: 2, created: 2, problems: [] });
    const made = await admin.listAll(snapshots, { namespace: ns });
    expect(made.map((s) => (s.spec as { source: { persistentVolumeClaimName: string } }).source.persistentVolumeClaimName).sort()).toEqual([
      'data-a',
      'data-b',
    ]);
    expect(
      made.every(
        (s) => s.metadata.ownerReferences?.[0]?.uid === parent.metadata.uid && s.metadata.ownerReferences?.[0]?.controller === true,
      ),
    ).toBe(true);

    // Nothing due, nothing changed: the hooks are called again, nothing is written (the status included).
    kube.stats.reset();
    const again = await syncMap(ctx, mc, keyOf(parent));
    expect(again).toMatchObject({ hookCalls: 2, created: 0, updated: 0, deleted: 0, statusWritten: false });
    expect(writes(kube)).toBe(0);

    // The next interval: one more snapshot per PVC.
    await sleepUntil(t0 + 4_100);
    expect(await syncMap(ctx, mc, keyOf(parent))).toMatchObject({ created: 2, deleted: 0 });
    expect(await list()).toHaveLength(4);

    // Conditions on outputs are counted per type (the example's `ready`).
    const one = (await admin.listAll(snapshots, { namespace: ns }))[0]!;
    await admin.patch(
      snapshots,
      { name: one.metadata.name!, namespace: ns, subresource: 'status' },
      { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
      'merge',
    );
    await syncMap(ctx, mc, keyOf(parent));
    const status = (await admin.get(schedules, { name: 'my-app-snapshots', namespace: ns })).status as Record<string, unknown>;
    expect(status).toMatchObject({
      inputs: { persistentvolumeclaims: { total: 2 } },
      outputs: { volumesnapshots: { total: 4, ready: 1 } },
    });
    expect((status.conditions as Array<{ type: string; status: string }>).find((c) => c.type === 'Synced')?.status).toBe('True');

    // data-a goes: its snapshots are detached; the tombstone hook keeps them while within their TTL.
    const aSnaps = (await admin.listAll(snapshots, { namespace: ns }))
      .filter((s) => s.metadata.name!.startsWith('data-a-'))
      .map((s) => s.metadata.name!);
    // (The admission plugin's pvc-protection finalizer, which no controller removes here, is dropped by hand.)
    await admin.delete(pvcs, { name: 'data-a', namespace: ns });
    await admin.patch(pvcs, { name: 'data-a', namespace: ns }, { metadata: { finalizers: null } }, 'merge');
    const detached = await syncMap(ctx, mc, keyOf(parent));
    expect(detached).toMatchObject({ inputs: 1, detachedKept: 2, problems: [] });
    expect((await list()).filter((n) => n.startsWith('data-a-'))).toEqual(aSnaps.sort());
    // Past the TTL they are deleted; data-b's expired ones are dropped by the map hook.
    await sleepUntil(t0 + 10_100);
    const expired = await syncMap(ctx, mc, keyOf(parent));
    expect(expired.problems).toEqual([]);
    expect((await list()).filter((n) => n.startsWith('data-a-'))).toEqual([]);
    expect((await list()).filter((n) => n.startsWith('data-b-'))).toEqual([`data-b-${(t0 + 8_000) / 1000}`]);
    expect(lambda.invocations.get('outrigger-snapshot-schedule-tombstone')).toBeGreaterThanOrEqual(2);
  }, 60_000);
});

// A generic parent for the tests below: `Mapper` selects ConfigMaps and makes ConfigMaps; its spec.mode tells
// the test webhook how to answer.
const MAPPER_MANIFESTS = `
${openCrd('map.outrigger.test', 'Mapper', 'mappers')}---
${controllersGrant('outrigger-map-mapper-test', [`{ apiGroups: ["map.outrigger.test"], resources: ["mappers"], verbs: ["get", "list", "watch"] }`, `{ apiGroups: ["map.outrigger.test"], resources: ["mappers/status"], verbs: ["patch"] }`, `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`])}`;

const mappers = gvr('map.outrigger.test', 'v1', 'mappers');

/** The test's map hook: copies each ConfigMap (same labels: the copies match the selector too), or misbehaves. */
function webhook(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { parent: KubeObject; input: KubeObject };
    const mode = (body.parent.spec as { mode?: string }).mode ?? 'copy';
    const copy = (over: Partial<KubeObject['metadata']> = {}, kind = 'ConfigMap') => ({
      apiVersion: 'v1',
      kind,
      metadata: { name: `${body.input.metadata.name}-copy`, labels: body.input.metadata.labels, ...over },
      data: (body.input as { data?: unknown }).data ?? {},
    });
    const answer = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(text);
    };
    if (mode === 'timeout') return void setTimeout(() => answer(200, JSON.stringify({ outputs: [copy()] })), 3_000);
    if (mode === 'fail') return answer(500, '{"error":"boom"}');
    if (mode === 'garbage') return answer(200, '{"outputs": [');
    if (mode === 'other-namespace') return answer(200, JSON.stringify({ outputs: [copy({ namespace: 'kube-system' })] }));
    if (mode === 'unlisted-kind') return answer(200, JSON.stringify({ outputs: [copy({}, 'Secret')] }));
    answer(200, JSON.stringify({ outputs: [copy()] }));
  });
}

describe('MapController: same resource in and out, bad hooks, the Three Laws', () => {
  let ns: string;
  let mc: Awaited<ReturnType<typeof controllerFor>>;
  const admin = () => adminClient();

  beforeAll(async () => {
    await applyManifests(
      adminClient(),
      `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: mapper-controller }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: map.outrigger.test/v1, resource: mappers }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks:
    map: { webhook: { url: "${hookUrl}/map" }, timeoutSeconds: 1, retries: 1 }
`,
    );
    mc = await controllerFor(outriggerClient(), 'map.outrigger.test', 'Mapper');
  });

  // Its parents' hooks fail on purpose: with the controller gone, no later runtime's resync retries them.
  afterAll(async () => {
    await adminClient()
      .delete(mapControllers, { name: 'mapper-controller' })
      .catch(() => undefined);
  });

  beforeEach(async () => {
    ns = await createNamespace('mapper');
  });

  async function setup(mode = 'copy') {
    for (const name of ['one', 'two'])
      await admin().create(configMaps, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: ns, labels: { app: 'x' } },
        data: { v: name },
      } as KubeObject);
    return admin().create(mappers, {
      apiVersion: 'map.outrigger.test/v1',
      kind: 'Mapper',
      metadata: { name: uniqueName('m'), namespace: ns },
      spec: { mode, selector: { matchLabels: { app: 'x' } } },
    } as KubeObject);
  }
  const names = async () =>
    (await admin().listAll(configMaps, { namespace: ns }))
      .map((c) => c.metadata.name!)
      .filter((n) => n !== 'kube-root-ca.crt')
      .sort();

  test('an output that matches the selector is never an input: no recursion across passes', async () => {
    const parent = await setup();
    const ctx = context(outriggerClient());
    expect(await syncMap(ctx, mc, keyOf(parent))).toMatchObject({ inputs: 2, created: 2, problems: [] });
    for (let i = 0; i < 2; i += 1)
      expect(await syncMap(ctx, mc, keyOf(parent))).toMatchObject({ inputs: 2, hookCalls: 2, created: 0, updated: 0 });
    expect(await names()).toEqual(['one', 'one-copy', 'two', 'two-copy']);
  });

  test.each([
    ['timeout', 'HookTimeout', /did not answer within 1 s/],
    ['fail', 'HookHTTPError', /answered HTTP 500/],
    ['garbage', 'HookMalformedAnswer', /not JSON/],
    ['other-namespace', 'InvalidOutput', /is in namespace kube-system, but a parent in .* may own outputs in .* only/],
    ['unlisted-kind', 'InvalidOutput', /v1 Secret is not one of the controller's outputResources/],
  ])(
    'a hook that answers %s: a condition names it, a log line has it, nothing is deleted',
    async (mode, reason, message) => {
      const parent = await setup();
      const ctx = context(outriggerClient());
      const logged: Array<Record<string, unknown>> = [];
      ctx.log = (_level, _m, fields) => logged.push(fields ?? {});
      await syncMap(ctx, mc, keyOf(parent));
      const before = await names();
      await admin().patch(mappers, { name: parent.metadata.name!, namespace: ns }, { spec: { mode } }, 'merge');
      const fresh = await admin().get(mappers, { name: parent.metadata.name!, namespace: ns });
      const result = await syncMap(ctx, mc, keyOf(fresh));
      expect(result).toMatchObject({ deleted: 0, created: 0 });
      expect(result.problems.map((p) => p.reason)).toEqual([reason, reason]);
      expect(await names()).toEqual(before);
      const condition = (
        (await admin().get(mappers, { name: parent.metadata.name!, namespace: ns })).status as {
          conditions: Array<{ type: string; status: string; reason: string; message: string }>;
        }
      ).conditions.find((c) => c.type === 'Synced')!;
      expect(condition).toMatchObject({ status: 'False', reason });
      expect(condition.message).toMatch(message);
      expect(logged.some((f) => f.reason === reason)).toBe(true);
    },
    30_000,
  );

  test('never touches an object another controller owns, nor one nobody owns, even with the map labels', async () => {
    const parent = await setup();
    const ctx = context(outriggerClient());
    // `one-copy` already exists and is nobody's: the map pass must not take it over.
    await admin().create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'one-copy', namespace: ns },
      data: { mine: 'yes' },
    } as KubeObject);
    // An object with this parent's map labels but controlled by someone else is not an output.
    const other = await admin().create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'foreign', namespace: ns },
    } as KubeObject);
    await admin().create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'impostor',
        namespace: ns,
        labels: { [MAP_KEY_LABEL]: 'gone', 'map.outrigger.dev/parent': parent.metadata.uid! },
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'foreign', uid: other.metadata.uid!, controller: true }],
      },
    } as KubeObject);
    const result = await syncMap(ctx, mc, keyOf(parent));
    expect(result.problems.map((p) => p.message)).toEqual([expect.stringMatching(/one-copy exists and is not this parent's/)]);
    expect(result).toMatchObject({ created: 1, deleted: 0 });
    expect((await admin().get(configMaps, { name: 'one-copy', namespace: ns })).data).toEqual({ mine: 'yes' });
    expect(await names()).toContain('impostor');
    // Status counts what the parent owns: `two-copy`, not the impostor that merely carries its labels.
    expect(
      (
        (await admin().get(mappers, { name: parent.metadata.name!, namespace: ns })).status as {
          outputs: Record<string, { total: number }>;
        }
      ).outputs.configmaps!.total,
    ).toBe(1);
  });

  test('a parent being deleted gets its status only', async () => {
    const parent = await setup();
    const ctx = context(outriggerClient());
    await syncMap(ctx, mc, keyOf(parent));
    await admin().patch(
      mappers,
      { name: parent.metadata.name!, namespace: ns },
      { metadata: { finalizers: ['test.outrigger.dev/hold'] } },
      'merge',
    );
    await admin().delete(mappers, { name: parent.metadata.name!, namespace: ns });
    await admin().delete(configMaps, { name: 'two', namespace: ns });
    const result = await syncMap(ctx, mc, keyOf(parent));
    expect(result).toMatchObject({ hookCalls: 0, created: 0, updated: 0, deleted: 0 });
    expect(await names()).toContain('two-copy');
    const status = (await admin().get(mappers, { name: parent.metadata.name!, namespace: ns })).status as {
      conditions: Array<{ type: string; reason: string }>;
    };
    expect(status.conditions.find((c) => c.type === 'Synced')?.reason).toBe('Deleting');
    await admin().patch(mappers, { name: parent.metadata.name!, namespace: ns }, { metadata: { finalizers: null } }, 'merge');
  });

  test('triggers: an input change reaches the parents whose selector matches, whoever owns the input; an output reaches its parent by ControllerRef; a status-only parent change reaches nobody', async () => {
    const parent = await setup();
    const kube = outriggerClient();
    await syncMap(context(kube), mc, keyOf(parent));
    const kinds = await mapSource.kinds(testCluster('it'), kube);
    const route = async (type: 'added' | 'modified' | 'deleted', object: KubeObject, oldObject?: KubeObject) =>
      (
        await routeEnvelope(
          makeEnvelope({ cluster: 'it', type, object, oldObject, source: 'test' }),
          new BatchResolver(kube, 'it', kinds),
          kinds,
        )
      ).map((r) => `${r.target}:${r.key.name}`);
    const typedCm = async (name: string) => ({
      ...(await admin().get(configMaps, { name, namespace: ns })),
      apiVersion: 'v1',
      kind: 'ConfigMap',
    });
    // An input controlled by something else still reaches the parent.
    const owned = await admin().create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'owned',
        namespace: ns,
        labels: { app: 'x' },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'p', uid: '00000000-0000-0000-0000-000000000001', controller: true }],
      },
    } as KubeObject);
    expect(await route('added', { ...owned, apiVersion: 'v1', kind: 'ConfigMap' })).toEqual([`map:${parent.metadata.name}`]);
    // An input whose labels stop matching reaches it too (its outputs are now detached), and a non-matching one does not.
    const one = await typedCm('one');
    expect(await route('modified', { ...one, metadata: { ...one.metadata, labels: { app: 'y' } } }, one)).toEqual([
      `map:${parent.metadata.name}`,
    ]);
    expect(
      await route(
        'modified',
        { ...one, metadata: { ...one.metadata, labels: { app: 'y' } } },
        { ...one, metadata: { ...one.metadata, labels: { app: 'z' } } },
      ),
    ).toEqual([]);
    // An output reaches its parent (by ControllerRef, and as a matching ConfigMap: one key after dedupe).
    expect(new Set(await route('deleted', await typedCm('one-copy')))).toEqual(new Set([`map:${parent.metadata.name}`]));
    // The parent: a spec change syncs; its own status write (generation already observed) does not.
    const synced = {
      ...(await admin().get(mappers, { name: parent.metadata.name!, namespace: ns })),
      apiVersion: 'map.outrigger.test/v1',
      kind: 'Mapper',
    };
    expect(await route('modified', synced)).toEqual([]);
    expect(
      await route('modified', { ...synced, metadata: { ...synced.metadata, generation: (synced.metadata.generation ?? 1) + 1 } }),
    ).toEqual([`map:${parent.metadata.name}`]);
  });
});

describe('MapController through the local runtime', () => {
  test('watch → router → map handler → Lambda hooks: snapshots appear for matching PVCs, follow label changes and survive a deleted PVC; the status write does not loop', async () => {
    const admin = adminClient();
    await applyManifests(admin, await readFile(new URL('../../examples/snapshot-schedule/controller.yaml', import.meta.url), 'utf8'));
    const ns = await createNamespace('map-rt');
    const runtime = await startTestRuntime('map-rt', ['router', 'map', 'map-resync'], { namespace: ns });
    try {
      const snapsOf = async (pvc: string) =>
        (await admin.listAll(snapshots, { namespace: ns })).filter(
          (s) => (s.spec as { source: { persistentVolumeClaimName: string } }).source.persistentVolumeClaimName === pvc,
        );
      const until = (check: () => Promise<boolean>) => eventually(check, 30_000);
      const claim = (name: string, labels: Record<string, string>) =>
        admin.create(pvcs, {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name, namespace: ns, labels },
          spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
        } as KubeObject);
      await admin.create(schedules, {
        apiVersion: 'snapshot.outrigger.dev/v1',
        kind: 'SnapshotSchedule',
        metadata: { name: 'nightly', namespace: ns },
        spec: { snapshotInterval: '1h', snapshotTTL: '1d', selector: { matchLabels: { app: 'db' } } },
      } as KubeObject);
      await claim('db-0', { app: 'db' });
      await claim('web-0', { app: 'web' });
      await until(async () => (await snapsOf('db-0')).length === 1);
      // A PVC relabelled into the selector is picked up by its own event.
      await admin.patch(pvcs, { name: 'web-0', namespace: ns }, { metadata: { labels: { app: 'db' } } }, 'merge');
      await until(async () => (await snapsOf('web-0')).length === 1);
      // db-0 goes; the tombstone hook keeps its snapshot (its TTL is a day).
      await admin.delete(pvcs, { name: 'db-0', namespace: ns });
      await admin.patch(pvcs, { name: 'db-0', namespace: ns }, { metadata: { finalizers: null } }, 'merge');
      await until(
        async () =>
          (
            (await admin.get(schedules, { name: 'nightly', namespace: ns })).status as
              { inputs?: { persistentvolumeclaims?: { total: number } } } | undefined
          )?.inputs?.persistentvolumeclaims?.total === 1,
      );
      await runtime.settled();
      expect(await snapsOf('db-0')).toHaveLength(1);
      // Settled means settled: the parent's own status writes do not start new passes.
      const map = runtime.queues.get('map')!;
      const delivered = map.stats.delivered;
      await new Promise((r) => setTimeout(r, 1_500));
      await runtime.settled();
      expect(map.stats.delivered).toBe(delivered);
      // The one-minute resync queues the parent without any event (resyncPeriodSeconds 60). The runtime ran it
      // once at start: within the same minute the same resync request is deduplicated by the queue, as SQS does.
      const offered = map.stats.sent + map.stats.deduplicated;
      const resync = (await runtime.runScheduled('map-resync')) as { queued: number };
      expect(resync.queued).toBeGreaterThanOrEqual(1);
      expect(map.stats.sent + map.stats.deduplicated).toBeGreaterThan(offered);
    } finally {
      await runtime.stop();
    }
  }, 120_000);
});
