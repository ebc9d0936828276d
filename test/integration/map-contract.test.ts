// What MapController guarantees about outputs and status (docs/controllers/mapcontroller.md), on the real apiserver as the
// `outrigger` identity: outputs are exactly what the hook answered, status shrinks, and the shapes of parent the
// seed allows (no status subresource, cluster-scoped, several inputs and outputs, detached outputs with and
// without a tombstone hook). The hooks are a real HTTP server in this process; each parent's answers are set by
// its test.
/* eslint-disable max-lines -- the contract scenarios share one hook server whose answers each parent sets, and the eight CRDs and grants applied once in beforeAll */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { clusterCache, type ClusterCache } from '../../functions/cluster-cache.ts';
import {
  forgetMapControllers,
  listMapControllers,
  mapControllerFor,
  type MapControllerSet,
  type ResolvedMapController,
} from '../../functions/map/controllers.ts';
import { serveMapRequest, type MapServeContext } from '../../functions/map/handler.ts';
import { makeSyncRequest, type SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { MapContext } from '../../functions/map/pass.ts';
import { syncMap } from '../../functions/map/sync.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { connect, forgetDiscovery, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import {
  adminClient,
  createNamespace,
  deleteMapControllersCalling,
  eventually,
  outriggerClient,
  testbed,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';

const GROUP = 'contract.outrigger.test';
const configMaps = gvr('', 'v1', 'configmaps');
const shapers = gvr(GROUP, 'v1', 'shapers');
const gadgets = gvr(GROUP, 'v1', 'gadgets');
const seeds = gvr(GROUP, 'v1', 'seeds');
const bares = gvr(GROUP, 'v1', 'bares');
const racers = gvr(GROUP, 'v1', 'racers');
const jobbers = gvr(GROUP, 'v1', 'jobbers');
const jobs = gvr('batch', 'v1', 'jobs');
const regions = gvr(GROUP, 'v1', 'regions');

interface HookRequest {
  parent: KubeObject;
  input?: KubeObject;
  mapKey: string;
  outputs: Record<string, Record<string, KubeObject>>;
}
type Answer = { status?: number; body: unknown };
/** Per parent name, how the map and tombstone hooks answer; the default map answer copies a ConfigMap input. */
const mapAnswers = new Map<string, (req: HookRequest, url: string) => Answer>();
const tombstoneAnswers = new Map<string, (req: HookRequest) => Answer>();
const calls = { map: 0, tombstone: 0 };
const mapCallsOf = new Map<string, number>();

const copyOf = (req: HookRequest, data?: Record<string, string>): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: `${req.input!.metadata.name}-copy`,
      ...(req.input!.metadata.namespace ? { namespace: req.input!.metadata.namespace } : {}),
    },
    data: data ?? (req.input as { data?: Record<string, string> }).data ?? {},
  }) as KubeObject;

function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as HookRequest;
    const tombstone = req.url?.startsWith('/tombstone') ?? false;
    calls[tombstone ? 'tombstone' : 'map'] += 1;
    if (!tombstone) mapCallsOf.set(body.parent.metadata.name ?? '', (mapCallsOf.get(body.parent.metadata.name ?? '') ?? 0) + 1);
    const how = (tombstone ? tombstoneAnswers : mapAnswers).get(body.parent.metadata.name ?? '');
    const answer = how ? how(body, req.url ?? '') : tombstone ? { body: { outputs: [] } } : { body: { outputs: [copyOf(body)] } };
    res.writeHead(answer.status ?? 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer.body));
  });
}

const crd = (kind: string, plural: string, opts: Parameters<typeof openCrd>[3] = {}) => `${openCrd(GROUP, kind, plural, opts)}---`;
/** `resource` (core v1) or `<apiVersion>/<resource>`. */
const rule = (r: string) =>
  `{ apiVersion: ${r.includes('/') ? r.slice(0, r.lastIndexOf('/')) : 'v1'}, resource: ${r.slice(r.lastIndexOf('/') + 1)} }`;
const mapController = (name: string, parents: string, inputs: string[], outputs: string[], tombstone: boolean) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: ${name} }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: ${GROUP}/v1, resource: ${parents} }
  inputResources: [${inputs.map(rule).join(', ')}]
  outputResources: [${outputs.map(rule).join(', ')}]
  hooks:
    map: { webhook: { url: "${url}/map" }, timeoutSeconds: 2, retries: 0 }
    ${tombstone ? `tombstone: { webhook: { url: "${url}/tombstone" }, timeoutSeconds: 2, retries: 0 }` : ''}
---`;

let server: Server;
let url: string;
const controllers: Record<string, ResolvedMapController> = {};

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const admin = adminClient();
  await applyManifests(adminClient(), MAP_TEST_IDENTITY);
  await applyManifests(
    admin,
    `${crd('Shaper', 'shapers')}${crd('Gadget', 'gadgets')}${crd('Seed', 'seeds')}${crd('Bare', 'bares', { status: false })}${crd('Region', 'regions', { scope: 'Cluster' })}${crd('Racer', 'racers')}${crd('Jobber', 'jobbers')}${crd('Spreader', 'spreaders')}
${controllersGrant('outrigger-map-contract-test', [
  `{ apiGroups: ["${GROUP}"], resources: ["shapers", "bares", "regions", "racers", "jobbers", "spreaders"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["shapers/status", "regions/status", "racers/status", "jobbers/status"], verbs: ["patch"] }`,
  // A parent without a status subresource has its status written on the object itself.
  `{ apiGroups: ["${GROUP}"], resources: ["bares"], verbs: ["patch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["seeds"], verbs: ["list", "watch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["gadgets"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
  `{ apiGroups: ["batch"], resources: ["jobs"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
])}---
${mapController('contract-shaper', 'shapers', ['configmaps', `${GROUP}/v1/seeds`], ['configmaps', `${GROUP}/v1/gadgets`], true)}
${mapController('contract-bare', 'bares', ['configmaps'], ['configmaps'], false)}
${mapController('contract-region', 'regions', ['configmaps'], ['configmaps'], false)}
${mapController('contract-jobber', 'jobbers', ['configmaps'], ['batch/v1/jobs'], false)}
${mapController('contract-racer', 'racers', ['configmaps'], ['configmaps'], false).replace('/map"', '/map?definition=1"')}
`,
  );
  const kube = outriggerClient();
  for (const kind of ['Shaper', 'Bare', 'Region', 'Racer', 'Jobber']) {
    for (let i = 0; ; i += 1) {
      forgetMapControllers();
      forgetDiscovery(kube);
      const mc = mapControllerFor(await listMapControllers(kube, 'it'), GROUP, kind);
      if (mc) {
        controllers[kind] = mc;
        break;
      }
      if (i > 100) throw new Error(`no MapController for ${kind}: ${JSON.stringify((await listMapControllers(kube, 'it')).invalid)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}, 60_000);

afterAll(async () => {
  await deleteMapControllersCalling(url);
  await new Promise<void>((r) => server.close(() => r()));
});

const context = (kube: KubeClient = outriggerClient()): MapContext => ({
  kube,
  hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
  concurrency: 4,
});
const keyOf = (o: KubeObject, kind: string): SyncKey => ({
  cluster: 'it',
  group: GROUP,
  kind,
  namespace: o.metadata.namespace,
  name: o.metadata.name ?? '',
  uid: o.metadata.uid ?? '',
});
const writes = (kube: KubeClient) =>
  Object.entries(kube.stats.byVerb)
    .filter(([v]) => !['get', 'list'].includes(v))
    .reduce((n, [, x]) => n + x, 0);
const configMap = (name: string, namespace: string, labels: Record<string, string>, data: Record<string, string> = { v: name }) =>
  adminClient().create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels }, data } as KubeObject);
const parentOf = (r: typeof shapers, kind: string, name: string, namespace: string | undefined, selector: Record<string, string>) =>
  adminClient().create(r, {
    apiVersion: `${GROUP}/v1`,
    kind,
    metadata: { name, ...(namespace ? { namespace } : {}) },
    spec: { selector: { matchLabels: selector } },
  } as KubeObject);
const names = async (ns: string) =>
  (await adminClient().listAll(configMaps, { namespace: ns }))
    .map((c) => c.metadata.name!)
    .filter((n) => n !== 'kube-root-ca.crt')
    .sort();

describe('outputs are exactly what the hook answered', () => {
  test('a field, label or annotation the hook set at creation and later drops is gone after the next pass; a pass after that writes nothing', async () => {
    const ns = await createNamespace('contract');
    await configMap('in', ns, { app: 'drop' });
    const parent = await parentOf(shapers, 'Shaper', 'dropper', ns, { app: 'drop' });
    let full = true;
    mapAnswers.set('dropper', (req) => {
      const out = copyOf(req, full ? { keep: '1', drop: '2' } : { keep: '1' });
      if (full) out.metadata = { ...out.metadata, labels: { tier: 'x' }, annotations: { note: 'y' } };
      return { body: { outputs: [out] } };
    });
    const kube = outriggerClient();
    expect(await syncMap(context(kube), controllers.Shaper!, keyOf(parent, 'Shaper'))).toMatchObject({ created: 1, problems: [] });
    expect((await adminClient().get(configMaps, { name: 'in-copy', namespace: ns })).data).toEqual({ keep: '1', drop: '2' });
    full = false;
    expect(await syncMap(context(kube), controllers.Shaper!, keyOf(parent, 'Shaper'))).toMatchObject({ updated: 1, problems: [] });
    const after = await adminClient().get(configMaps, { name: 'in-copy', namespace: ns });
    expect(after.data).toEqual({ keep: '1' });
    expect(after.metadata.labels?.tier).toBeUndefined();
    expect(after.metadata.annotations?.note).toBeUndefined();
    kube.stats.reset();
    expect(await syncMap(context(kube), controllers.Shaper!, keyOf(parent, 'Shaper'))).toMatchObject({
      updated: 0,
      created: 0,
      statusWritten: false,
    });
    expect(writes(kube)).toBe(0);
  });

  test('a field another manager added to an output is left alone; a field the hook sets and someone changed is set back', async () => {
    const ns = await createNamespace('contract');
    await configMap('in', ns, { app: 'drift' });
    const parent = await parentOf(shapers, 'Shaper', 'drifter', ns, { app: 'drift' });
    mapAnswers.set('drifter', (req) => ({ body: { outputs: [copyOf(req, { mine: 'a' })] } }));
    const ctx = context();
    await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'));
    // As a person would, under a field manager of their own (the admin client's default is Outrigger's).
    const person = connect({ kind: 'kubeconfig', path: testbed().kubeconfigs.admin }, { fieldManager: 'kubectl-edit' });
    await person.patch(configMaps, { name: 'in-copy', namespace: ns }, { data: { mine: 'changed', theirs: 'b' } }, 'merge');
    expect(await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'))).toMatchObject({ updated: 1, problems: [] });
    expect((await adminClient().get(configMaps, { name: 'in-copy', namespace: ns })).data).toEqual({ mine: 'a', theirs: 'b' });
  });

  test("what the apiserver fills in at creation (defaults, a Job's generated selector) is not taken for the hook's: it stays, and a later change applies", async () => {
    const ns = await createNamespace('contract');
    await configMap('in', ns, { app: 'job' });
    const parent = await parentOf(jobbers, 'Jobber', 'jobber', ns, { app: 'job' });
    let note = 'v1';
    mapAnswers.set('jobber', (req) => ({
      body: {
        outputs: [
          {
            apiVersion: 'batch/v1',
            kind: 'Job',
            metadata: { name: `${req.input!.metadata.name}-job`, annotations: { note } },
            spec: { suspend: true, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'busybox' }] } } },
          },
        ],
      },
    }));
    const ctx = context();
    expect(await syncMap(ctx, controllers.Jobber!, keyOf(parent, 'Jobber'))).toMatchObject({ created: 1, problems: [] });
    // Outrigger applies what the hook answered, not what defaulting or admission added: those stay, owned by nobody.
    const created = await adminClient().get(jobs, { name: 'in-job', namespace: ns });
    const applied = (
      created.metadata.managedFields as Array<{ manager: string; operation: string; fieldsV1: { 'f:spec': Record<string, unknown> } }>
    ).filter((e) => e.manager === 'outrigger');
    expect(applied.map((e) => e.operation)).toEqual(['Apply']);
    expect(Object.keys(applied[0]!.fieldsV1['f:spec']).sort()).toEqual(['f:suspend', 'f:template']);
    expect((created.spec as { backoffLimit?: number }).backoffLimit).toBe(6);
    note = 'v2';
    expect(await syncMap(ctx, controllers.Jobber!, keyOf(parent, 'Jobber'))).toMatchObject({ updated: 1, problems: [] });
    const job = await adminClient().get(jobs, { name: 'in-job', namespace: ns });
    expect(job.metadata.annotations?.note).toBe('v2');
    expect((job.spec as { selector?: unknown }).selector).toBeDefined();
  });
});

describe('status shrinks', () => {
  test('a count that no output has any more is removed, and the pass after the shrink writes nothing', async () => {
    const ns = await createNamespace('contract');
    await configMap('in', ns, { app: 'shrink' });
    const parent = await parentOf(shapers, 'Shaper', 'shrinker', ns, { app: 'shrink' });
    let gadget = true;
    mapAnswers.set('shrinker', (req) => ({
      body: {
        outputs: [copyOf(req), ...(gadget ? [{ apiVersion: `${GROUP}/v1`, kind: 'Gadget', metadata: { name: 'g' }, spec: {} }] : [])],
      },
    }));
    const kube = outriggerClient();
    const ctx = context(kube);
    await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'));
    await adminClient().patch(
      gadgets,
      { name: 'g', namespace: ns, subresource: 'status' },
      { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
      'merge',
    );
    await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'));
    const status = async () =>
      (await adminClient().get(shapers, { name: 'shrinker', namespace: ns })).status as {
        inputs: Record<string, unknown>;
        outputs: Record<string, Record<string, number>>;
      };
    expect((await status()).outputs.gadgets).toEqual({ total: 1, ready: 1 });
    gadget = false;
    expect(await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'))).toMatchObject({ deleted: 1, statusWritten: true });
    expect((await status()).outputs.gadgets).toEqual({ total: 0 });
    kube.stats.reset();
    expect(await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'))).toMatchObject({ statusWritten: false });
    expect(writes(kube)).toBe(0);
  });
});

describe('parents and hooks the contract allows', () => {
  test('several input and output resources: one hook call per input of every input kind; outputs of every kind, counted per kind', async () => {
    const ns = await createNamespace('contract');
    await configMap('cm-in', ns, { app: 'multi' });
    await adminClient().create(seeds, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Seed',
      metadata: { name: 'seed-in', namespace: ns, labels: { app: 'multi' } },
      spec: {},
    } as KubeObject);
    const parent = await parentOf(shapers, 'Shaper', 'multi', ns, { app: 'multi' });
    mapAnswers.set('multi', (req) => ({
      body: {
        outputs: [
          copyOf(req, { from: req.input!.kind! }),
          {
            apiVersion: `${GROUP}/v1`,
            kind: 'Gadget',
            metadata: { name: `${req.input!.metadata.name}-gadget` },
            spec: { from: req.input!.kind },
          },
        ],
      },
    }));
    const result = await syncMap(context(), controllers.Shaper!, keyOf(parent, 'Shaper'));
    expect(result).toMatchObject({ inputs: 2, hookCalls: 2, created: 4, problems: [] });
    expect((await adminClient().get(configMaps, { name: 'seed-in-copy', namespace: ns })).data).toEqual({ from: 'Seed' });
    expect((await adminClient().get(gadgets, { name: 'cm-in-gadget', namespace: ns })).spec).toEqual({ from: 'ConfigMap' });
    expect((await adminClient().get(shapers, { name: 'multi', namespace: ns })).status).toMatchObject({
      inputs: { configmaps: { total: 1 }, seeds: { total: 1 } },
      outputs: { configmaps: { total: 2 }, gadgets: { total: 2 } },
    });
  });

  test('a parent kind without a status subresource: status is written on the object, once; the parent is not re-synced by its own write', async () => {
    const ns = await createNamespace('contract');
    await configMap('in', ns, { app: 'bare' });
    const parent = await parentOf(bares, 'Bare', 'bare', ns, { app: 'bare' });
    const kube = outriggerClient();
    expect(await syncMap(context(kube), controllers.Bare!, keyOf(parent, 'Bare'))).toMatchObject({
      created: 1,
      problems: [],
      statusWritten: true,
    });
    const after = await adminClient().get(bares, { name: 'bare', namespace: ns });
    expect(after.status).toMatchObject({ inputs: { configmaps: { total: 1 } }, outputs: { configmaps: { total: 1 } } });
    // Without a status subresource every write bumps the generation: the status must name the generation it made.
    expect((after.status as { observedGeneration: number }).observedGeneration).toBe(after.metadata.generation);
    kube.stats.reset();
    expect(await syncMap(context(kube), controllers.Bare!, keyOf(after, 'Bare'))).toMatchObject({ statusWritten: false });
    expect(writes(kube)).toBe(0);
  });

  test('a cluster-scoped parent: inputs from every namespace, namespaced outputs beside them', async () => {
    const [a, b] = [await createNamespace('contract'), await createNamespace('contract')];
    const app = uniqueName('region');
    await configMap('in', a, { app });
    await configMap('in', b, { app });
    const parent = await parentOf(regions, 'Region', uniqueName('region'), undefined, { app });
    const result = await syncMap(context(), controllers.Region!, keyOf(parent, 'Region'));
    expect(result).toMatchObject({ inputs: 2, created: 2, problems: [] });
    expect(await names(a)).toEqual(['in', 'in-copy']);
    expect(await names(b)).toEqual(['in', 'in-copy']);
    expect((await adminClient().get(regions, { name: parent.metadata.name! })).status).toMatchObject({
      inputs: { configmaps: { total: 2 } },
      outputs: { configmaps: { total: 2 } },
    });
  });

  test('a namespaced parent with a cluster-scoped output resource is refused: the MapController is not Ready (ClusterScopedOutput) and runs nothing', async () => {
    const admin = adminClient();
    const name = uniqueName('contract-spreader');
    await applyManifests(
      admin,
      // Regions are cluster-scoped; the ServiceAccount may list them and spreaders, so only the scopes are wrong.
      mapController(name, 'spreaders', ['configmaps'], [`${GROUP}/v1/regions`], false),
    );
    try {
      const kube = outriggerClient();
      const invalid = await eventually(async () => {
        forgetMapControllers();
        forgetDiscovery(kube);
        const set = await listMapControllers(kube, 'it');
        return set.invalid.find((i) => i.name === name);
      }, 30_000);
      expect(invalid).toMatchObject({ reason: 'ClusterScopedOutput' });
      expect(invalid!.error).toContain('regions.contract.outrigger.test is cluster-scoped');
      expect(mapControllerFor(await listMapControllers(kube, 'it'), GROUP, 'Spreader')).toBeUndefined();
    } finally {
      await admin.delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'mapcontrollers'), { name });
    }
  });

  test('detached outputs without a tombstone hook are deleted', async () => {
    const ns = await createNamespace('contract');
    await configMap('gone', ns, { app: 'detach' });
    await configMap('stays', ns, { app: 'detach' });
    const parent = await parentOf(bares, 'Bare', 'detach', ns, { app: 'detach' });
    const ctx = context();
    await syncMap(ctx, controllers.Bare!, keyOf(parent, 'Bare'));
    await adminClient().delete(configMaps, { name: 'gone', namespace: ns });
    expect(await syncMap(ctx, controllers.Bare!, keyOf(parent, 'Bare'))).toMatchObject({ deleted: 1, detachedKept: 0, problems: [] });
    expect(await names(ns)).toEqual(['stays', 'stays-copy']);
  });

  test('a failing tombstone hook: its detached outputs are kept, the problem is reported, the other inputs go on', async () => {
    const ns = await createNamespace('contract');
    await configMap('gone', ns, { app: 'tomb' });
    await configMap('stays', ns, { app: 'tomb' });
    const parent = await parentOf(shapers, 'Shaper', 'tomb', ns, { app: 'tomb' });
    const ctx = context();
    await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'));
    await adminClient().delete(configMaps, { name: 'gone', namespace: ns });
    await adminClient().patch(configMaps, { name: 'stays', namespace: ns }, { data: { v: 'new' } }, 'merge');
    tombstoneAnswers.set('tomb', () => ({ status: 500, body: { error: 'down' } }));
    const before = calls.tombstone;
    const result = await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'));
    expect(calls.tombstone).toBe(before + 1);
    expect(result).toMatchObject({ deleted: 0, updated: 1 });
    expect(result.problems).toEqual([expect.objectContaining({ what: 'detached outputs', reason: 'HookHTTPError' })]);
    expect(await names(ns)).toEqual(['gone-copy', 'stays', 'stays-copy']);
    expect((await adminClient().get(configMaps, { name: 'stays-copy', namespace: ns })).data).toEqual({ v: 'new' });
    const synced = (
      (await adminClient().get(shapers, { name: 'tomb', namespace: ns })).status as {
        conditions: Array<{ type: string; status: string; reason: string }>;
      }
    ).conditions.find((c) => c.type === 'Synced');
    expect(synced).toMatchObject({ status: 'False', reason: 'HookHTTPError' });
    // The hook recovers and keeps nothing: the detached output goes.
    tombstoneAnswers.set('tomb', () => ({ body: { outputs: [] } }));
    expect(await syncMap(ctx, controllers.Shaper!, keyOf(parent, 'Shaper'))).toMatchObject({ deleted: 1, problems: [] });
    expect(await names(ns)).toEqual(['stays', 'stays-copy']);
  });
});

describe('a MapController change is never served with the old definition', () => {
  test('two processes, one holding the old definition in its cache: the request the change queued is not taken as served by the stale pass', async () => {
    const ns = await createNamespace('contract');
    await configMap('in', ns, { app: 'race' });
    const parent = await parentOf(racers, 'Racer', 'racer', ns, { app: 'race' });
    // The hook answers with the definition it was called through (its URL differs per generation).
    mapAnswers.set('racer', (req, hookUrl) => ({
      body: { outputs: [copyOf(req, { definition: new URL(hookUrl, 'http://x').searchParams.get('definition') ?? '' })] },
    }));
    const state = testState();
    const sent: SyncRequest[] = [];
    const cluster = uniqueName('race');
    const serveContext = (controllers: ClusterCache<MapControllerSet>): MapServeContext => ({
      kube: outriggerClient(),
      state,
      syncSink: { send: async (_target, requests) => void sent.push(...requests) },
      hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
      controllers,
      log: () => undefined,
    });
    const stale = clusterCache<MapControllerSet>(60_000);
    const fresh = clusterCache<MapControllerSet>(60_000);
    const before = mapControllerFor(await listMapControllers(outriggerClient(), cluster, stale), GROUP, 'Racer')!;
    // The MapController changes; the process that hears of it queues the parent for the new definition.
    const admin = adminClient();
    const mcs = gvr('metacontroller.k8s.io', 'v1alpha1', 'mapcontrollers');
    await admin.patch(
      mcs,
      { name: 'contract-racer' },
      { spec: { hooks: { map: { webhook: { url: `${url}/map?definition=2` } } } } },
      'merge',
    );
    const changed = await admin.get(mcs, { name: 'contract-racer' });
    expect(changed.metadata.generation).toBe(before.generation + 1);
    const key = (o: KubeObject, kind: string, group: string) => ({
      cluster,
      group,
      kind,
      namespace: o.metadata.namespace,
      name: o.metadata.name!,
      uid: o.metadata.uid!,
    });
    await serveMapRequest(
      makeSyncRequest(key(changed, 'MapController', 'metacontroller.k8s.io'), ['MapController/change']),
      Date.now(),
      serveContext(fresh),
    );
    const queued = sent.find((r) => r.key.uid === parent.metadata.uid)!;
    expect(queued).toBeDefined();
    const queuedAt = Date.now() - 5_000;
    // Meanwhile the stale process serves another request for the parent (an input's event) with the old definition.
    await serveMapRequest(makeSyncRequest({ ...keyOf(parent, 'Racer'), cluster }, ['ConfigMap/event']), Date.now(), serveContext(stale));
    expect((await adminClient().get(configMaps, { name: 'in-copy', namespace: ns })).data).toEqual({ definition: '1' });
    // The queued request reaches the other process: it is not served yet.
    await serveMapRequest(queued, queuedAt, serveContext(fresh));
    expect((await adminClient().get(configMaps, { name: 'in-copy', namespace: ns })).data).toEqual({ definition: '2' });
    // And the stale process, given the parent again, refreshes rather than go back to the old definition.
    await serveMapRequest(
      makeSyncRequest({ ...keyOf(parent, 'Racer'), cluster }, ['ConfigMap/event']),
      Date.now() + 10_000,
      serveContext(stale),
    );
    expect((await adminClient().get(configMaps, { name: 'in-copy', namespace: ns })).data).toEqual({ definition: '2' });
    expect(mapControllerFor(await listMapControllers(outriggerClient(), cluster, stale), GROUP, 'Racer')!.generation).toBe(
      changed.metadata.generation,
    );
  });
});

describe('incremental passes', () => {
  test('an event calls the hook only for the inputs it changed; an output someone deleted or changed is answered again; a resync and a parent change call every hook', async () => {
    const ns = await createNamespace('contract');
    const admin = adminClient();
    for (const n of ['a', 'b', 'c']) await configMap(n, ns, { app: 'incr' });
    const parent = await parentOf(shapers, 'Shaper', 'incr', ns, { app: 'incr' });
    const cluster = uniqueName('incr');
    const state = testState();
    const ctx: MapServeContext = {
      kube: outriggerClient(),
      state,
      syncSink: { send: async () => undefined },
      hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
      controllers: clusterCache<MapControllerSet>(60_000),
      log: () => undefined,
    };
    const pk = { ...keyOf(parent, 'Shaper'), cluster };
    const cause = (o: KubeObject) => `ConfigMap/${cluster}/${o.metadata.uid}/${o.metadata.resourceVersion}/modified`;
    // Queued after the last pass started: never taken as already served.
    const serve = async (causes: string[]) => {
      const before = mapCallsOf.get('incr') ?? 0;
      await serveMapRequest(makeSyncRequest(pk, causes), Date.now() + 5_000, ctx);
      return (mapCallsOf.get('incr') ?? 0) - before;
    };
    expect(await serve(['ConfigMap/first'])).toBe(3);
    expect(await names(ns)).toEqual(['a', 'a-copy', 'b', 'b-copy', 'c', 'c-copy']);
    // One input changes: one hook call, and its output follows.
    const b = await admin.patch(configMaps, { name: 'b', namespace: ns }, { data: { v: 'b2' } }, 'merge');
    expect(await serve([cause(b)])).toBe(1);
    expect((await admin.get(configMaps, { name: 'b-copy', namespace: ns })).data).toEqual({ v: 'b2' });
    // The same event again (a redelivery): nothing to call.
    expect(await serve([cause(b)])).toBe(0);
    // An output deleted by someone: its input's hook is called and the output made again.
    const aCopy = await admin.get(configMaps, { name: 'a-copy', namespace: ns });
    await admin.delete(configMaps, { name: 'a-copy', namespace: ns });
    expect(await serve([`ConfigMap/${cluster}/${aCopy.metadata.uid}/${aCopy.metadata.resourceVersion}/deleted`])).toBe(1);
    expect(await names(ns)).toContain('a-copy');
    // An output changed by someone: its event names it, its input's hook is called, and it is set back.
    const cCopy = await connect({ kind: 'kubeconfig', path: testbed().kubeconfigs.admin }, { fieldManager: 'kubectl-edit' }).patch(
      configMaps,
      { name: 'c-copy', namespace: ns },
      { data: { v: 'tampered' } },
      'merge',
    );
    expect(await serve([cause(cCopy)])).toBe(1);
    expect((await admin.get(configMaps, { name: 'c-copy', namespace: ns })).data).toEqual({ v: 'c' });
    // A resync calls every hook (a hook may depend on the clock); so does a parent spec change.
    expect(await serve(['resync/60/1'])).toBe(3);
    await admin.patch(shapers, { name: 'incr', namespace: ns }, { spec: { note: 'x' } }, 'merge');
    expect(await serve(['Shaper/spec'])).toBe(3);
    expect(await serve(['ConfigMap/nothing-changed'])).toBe(0);
  });

  test('an output edit or a resync queued behind an input change is not taken as served by the incremental pass that change starts', async () => {
    const ns = await createNamespace('contract');
    const admin = adminClient();
    for (const n of ['a', 'b']) await configMap(n, ns, { app: 'queued' });
    const parent = await parentOf(shapers, 'Shaper', 'queued', ns, { app: 'queued' });
    const cluster = uniqueName('queued');
    const ctx: MapServeContext = {
      kube: outriggerClient(),
      state: testState(),
      syncSink: { send: async () => undefined },
      hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
      controllers: clusterCache<MapControllerSet>(60_000),
      log: () => undefined,
    };
    const pk = { ...keyOf(parent, 'Shaper'), cluster };
    const cause = (o: KubeObject) => `ConfigMap/${cluster}/${o.metadata.uid}/${o.metadata.resourceVersion}/modified`;
    const serve = async (causes: string[], sentAt: number) => {
      const before = mapCallsOf.get('queued') ?? 0;
      await serveMapRequest(makeSyncRequest(pk, causes), sentAt, ctx);
      return (mapCallsOf.get('queued') ?? 0) - before;
    };
    expect(await serve(['ConfigMap/first'], Date.now() + 5_000)).toBe(2);
    // Input a changes (R1 queued), then someone edits b's output (R2 queued behind R1, before R1's pass starts).
    const a = await admin.patch(configMaps, { name: 'a', namespace: ns }, { data: { v: 'a2' } }, 'merge');
    const bCopy = await connect({ kind: 'kubeconfig', path: testbed().kubeconfigs.admin }, { fieldManager: 'kubectl-edit' }).patch(
      configMaps,
      { name: 'b-copy', namespace: ns },
      { data: { v: 'tampered' } },
      'merge',
    );
    // Queued after the first pass started, and more than the allowed clock skew (1 s) before R1's pass starts.
    const queuedAt = Date.now();
    await sleep(1_100);
    // R1's pass is incremental: it calls a's hook only.
    expect(await serve([cause(a)], queuedAt)).toBe(1);
    // R2 names an output R1's pass never looked at: it runs, and b's output is set back.
    expect(await serve([cause(bCopy)], queuedAt)).toBe(1);
    expect((await admin.get(configMaps, { name: 'b-copy', namespace: ns })).data).toEqual({ v: 'b' });
    // A resync queued behind an input change calls every hook, though the input's pass started after it.
    const a3 = await admin.patch(configMaps, { name: 'a', namespace: ns }, { data: { v: 'a3' } }, 'merge');
    const earlier = Date.now();
    await sleep(1_100);
    expect(await serve([cause(a3)], earlier)).toBe(1);
    expect(await serve(['resync/60/7'], earlier)).toBe(2);
  });
});
