// A MapController acts as the ServiceAccount it names, never as Outrigger (docs/controllers/mapcontroller.md#identity-each-mapcontroller-acts-as-its-own-serviceaccount):
// what one author is granted serves no other. On the real apiserver, through serveMapRequest (the map
// function's own entry), with a webhook the test serves.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { serveMapRequest } from '../../functions/map/handler.ts';
import { RetryLater } from '../../shared/lambda/retry.ts';
import { mapControllers, type MapControllerSet } from '../../functions/map/controllers.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { events } from '../../shared/events/index.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'identity.outrigger.test';
const teams = gvr(GROUP, 'v1', 'teammaps');
const regions = gvr(GROUP, 'v1', 'teamregions');
const configMaps = gvr('', 'v1', 'configmaps');
const pvcs = gvr('', 'v1', 'persistentvolumeclaims');
const snapshots = gvr('snapshot.storage.k8s.io', 'v1', 'volumesnapshots');
const storageStates = gvr('migration.k8s.io', 'v1alpha1', 'storagestates');

let hookServer: Server;
let hookUrl: string;
const calls: string[] = [];
let failing = false;

beforeAll(async () => {
  const admin = adminClient();
  const dir = new URL('../../examples/snapshot-schedule/', import.meta.url);
  for (const f of ['crds.yaml', 'rbac.yaml']) await applyManifests(admin, await readFile(new URL(f, dir), 'utf8'));
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'TeamMap', 'teammaps')}---\n${openCrd(GROUP, 'TeamRegion', 'teamregions', { scope: 'Cluster' })}`,
  );
  hookServer = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const r = JSON.parse(body) as { input: KubeObject; parent: KubeObject };
      calls.push(`${r.parent.metadata.name ?? ''}:${r.input.kind ?? ''}/${r.input.metadata.name ?? ''}`);
      if (failing) {
        res.writeHead(500).end('boom');
        return;
      }
      const out =
        r.input.kind === 'ConfigMap'
          ? [
              {
                apiVersion: 'v1',
                kind: 'ConfigMap',
                metadata: { name: `${r.input.metadata.name ?? ''}-copy` },
                data: { from: r.input.metadata.name },
              },
            ]
          : [];
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ outputs: out }));
    });
  });
  await new Promise<void>((r) => hookServer.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  await new Promise<void>((r) => hookServer?.close(() => r()));
});

const queued: unknown[] = [];
const sink = { send: (_target: string, requests: unknown[]) => Promise.resolve(void queued.push(...requests)) };
const log = () => undefined;

/** A sync of the MapController (which writes its Ready condition), then of the parent. */
async function serve(key: SyncKey, controller: string): Promise<void> {
  const ctx = {
    kube: outriggerClient(),
    state: testState(),
    syncSink: sink,
    hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
    controllers: clusterCache<MapControllerSet>(5_000),
    log,
  };
  const mc = await adminClient().get(mapControllers, { name: controller });
  await serveMapRequest(
    makeSyncRequest(
      { cluster: key.cluster, group: 'metacontroller.k8s.io', kind: 'MapController', name: controller, uid: mc.metadata.uid ?? '' },
      [],
    ),
    Date.now(),
    ctx,
  );
  await serveMapRequest(makeSyncRequest(key, []), Date.now(), ctx);
}

const keyOf = (o: KubeObject, group: string, kind: string): SyncKey => ({
  cluster: uniqueName('id'),
  group,
  kind,
  namespace: o.metadata.namespace,
  name: o.metadata.name ?? '',
  uid: o.metadata.uid ?? '',
});

async function ready(name: string): Promise<{ status?: string; reason?: string; message?: string } | undefined> {
  const mc = await adminClient().get(mapControllers, { name });
  return (
    mc.status as { conditions?: Array<{ type: string; status: string; reason: string; message: string }> } | undefined
  )?.conditions?.find((c) => c.type === 'Ready');
}

function teamController(name: string, sa: { namespace: string; name: string } | undefined, parents = 'teammaps'): string {
  return `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: ${name} }
spec:
  parentResource: { apiVersion: ${GROUP}/v1, resource: ${parents} }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  ${sa ? `serviceAccount: { namespace: ${sa.namespace}, name: ${sa.name} }` : ''}
  hooks: { map: { webhook: { url: "${hookUrl}/map" }, retries: 0 } }
`;
}

const TEAM_RULES = [
  `{ apiGroups: ["${GROUP}"], resources: ["teammaps"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["teammaps/status"], verbs: ["patch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
];

// One MapController per parent kind: the tests below run one after the other (jest runs a file's tests in order).
describe('MapController identity', () => {
  test('a ServiceAccount without grants: Ready=False Forbidden, no hook call, no output; with the grant, the walk-through works as that ServiceAccount; a hook failure is an Event on the parent', async () => {
    const admin = adminClient();
    const ns = await createNamespace('mapid');
    const name = uniqueName('team');
    calls.length = 0;
    await applyManifests(admin, impersonatedAccount(ns, 'mapper', []));
    await applyManifests(admin, teamController(name, { namespace: ns, name: 'mapper' }));
    const parent = await admin.create(teams, {
      apiVersion: `${GROUP}/v1`,
      kind: 'TeamMap',
      metadata: { name: 'p', namespace: ns },
      spec: {},
    } as KubeObject);
    await admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'in', namespace: ns },
      data: { a: '1' },
    } as KubeObject);
    try {
      // Outrigger itself may read and write TeamMaps and ConfigMaps here: only the ServiceAccount's grants count.
      await applyManifests(
        admin,
        `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: outrigger-own-${name}, namespace: ${ns} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: "outrigger:controllers" }]
`,
      );
      const key = keyOf(parent, GROUP, 'TeamMap');
      await serve(key, name);
      expect(calls).toEqual([]);
      expect((await admin.listAll(configMaps, { namespace: ns })).map((c) => c.metadata.name).sort()).toEqual(['in']);
      expect(await ready(name)).toMatchObject({ status: 'False', reason: 'Forbidden' });

      await applyManifests(admin, impersonatedAccount(ns, 'mapper', TEAM_RULES));
      await admin.delete(gvr('rbac.authorization.k8s.io', 'v1', 'rolebindings'), { name: `outrigger-own-${name}`, namespace: ns });
      await eventually(async () => {
        await serve(key, name);
        return (await admin.find(configMaps, { name: 'in-copy', namespace: ns })) ? true : undefined;
      });
      expect(await ready(name)).toMatchObject({ status: 'True' });
      expect(calls).toContain('p:ConfigMap/in');

      failing = true;
      await admin.patch(configMaps, { name: 'in', namespace: ns }, { data: { a: '2' } }, 'merge');
      // A pass with a hook failure has its message retried with backoff (docs/design/map-pass.md#per-parent-backoff).
      await expect(serve(key, name)).rejects.toThrow(RetryLater);
      const ev = await eventually(async () =>
        (await admin.listAll(events, { namespace: ns })).find((e) => (e as { reason?: string }).reason === 'HookHTTPError'),
      );
      expect(ev).toMatchObject({ type: 'Warning', regarding: { kind: 'TeamMap', name: 'p' } });
    } finally {
      failing = false;
      await admin.delete(mapControllers, { name });
    }
  }, 60_000);

  test('without a ServiceAccount the controller is not run and says why', async () => {
    const admin = adminClient();
    const ns = await createNamespace('mapid');
    const name = uniqueName('team');
    calls.length = 0;
    const parent = await admin.create(teams, {
      apiVersion: `${GROUP}/v1`,
      kind: 'TeamMap',
      metadata: { name: 'p', namespace: ns },
      spec: {},
    } as KubeObject);
    await admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'in', namespace: ns } } as KubeObject);
    await applyManifests(admin, teamController(name, undefined));
    try {
      await serve(keyOf(parent, GROUP, 'TeamMap'), name);
      expect(calls).toEqual([]);
      expect(await ready(name)).toMatchObject({ status: 'False', reason: 'NoServiceAccount' });
      // A ServiceAccount no cluster admin allowed Outrigger to act as.
      await admin.patch(mapControllers, { name }, { spec: { serviceAccount: { namespace: 'kube-system', name: 'default' } } }, 'merge');
      await serve(keyOf(parent, GROUP, 'TeamMap'), name);
      expect(calls).toEqual([]);
      expect(await ready(name)).toMatchObject({ status: 'False', reason: 'ServiceAccountNotAllowed' });
    } finally {
      await admin.delete(mapControllers, { name });
    }
  }, 60_000);

  test("a ServiceAccount that may list its parents but not its inputs: Forbidden up front when a pass would list them in every namespace, in the parent's Synced condition when in its namespace; no hook call, nothing written", async () => {
    const admin = adminClient();
    const ns = await createNamespace('mapid');
    const name = uniqueName('team');
    calls.length = 0;
    await applyManifests(
      admin,
      impersonatedAccount(ns, 'lister', [
        `{ apiGroups: ["${GROUP}"], resources: ["teammaps", "teamregions"], verbs: ["get", "list", "watch"] }`,
        `{ apiGroups: ["${GROUP}"], resources: ["teammaps/status", "teamregions/status"], verbs: ["patch"] }`,
      ]),
    );
    await admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'in', namespace: ns } } as KubeObject);
    const parent = await admin.create(teams, {
      apiVersion: `${GROUP}/v1`,
      kind: 'TeamMap',
      metadata: { name: 'p', namespace: ns },
      spec: {},
    } as KubeObject);
    const region = await admin.create(regions, {
      apiVersion: `${GROUP}/v1`,
      kind: 'TeamRegion',
      metadata: { name: `${ns}-r` },
      spec: {},
    } as KubeObject);
    try {
      // A namespaced parent: its pass lists ConfigMaps in its namespace only, which the apiserver refuses there.
      await applyManifests(admin, teamController(name, { namespace: ns, name: 'lister' }));
      await expect(serve(keyOf(parent, GROUP, 'TeamMap'), name)).rejects.toThrow(RetryLater);
      expect(await ready(name)).toMatchObject({ status: 'True' });
      const synced = (
        (await admin.get(teams, { name: 'p', namespace: ns })).status as { conditions?: Array<{ type: string }> }
      ).conditions?.find((c) => c.type === 'Synced');
      expect(synced).toMatchObject({
        status: 'False',
        reason: 'Forbidden',
        message: expect.stringContaining(`inputResources: the controller's ServiceAccount may not list configmaps in namespace ${ns}`),
      });
      await admin.delete(mapControllers, { name });
      // A cluster-scoped parent: its passes would list ConfigMaps in every namespace, which is checked up front.
      await applyManifests(admin, teamController(name, { namespace: ns, name: 'lister' }, 'teamregions'));
      await serve({ ...keyOf(region, GROUP, 'TeamRegion'), namespace: undefined }, name);
      expect(await ready(name)).toMatchObject({
        status: 'False',
        reason: 'Forbidden',
        message: expect.stringContaining('may not list configmaps in every namespace'),
      });
      expect(calls).toEqual([]);
      expect((await admin.listAll(configMaps, { namespace: ns })).map((c) => c.metadata.name)).toEqual(['in']);
    } finally {
      await admin.delete(mapControllers, { name }).catch(() => undefined);
      await admin.delete(regions, { name: region.metadata.name ?? '' });
    }
  }, 60_000);
});

describe('the confused deputy', () => {
  test('a MapController whose parent is StorageStates reads no PVC, calls no hook, writes no VolumeSnapshot', async () => {
    const admin = adminClient();
    const ns = await createNamespace('victim');
    const attacker = await createNamespace('attacker');
    const name = uniqueName('steal');
    calls.length = 0;
    await admin.create(pvcs, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'secret-data', namespace: ns },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    } as KubeObject);
    const state = await admin.create(storageStates, {
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageState',
      metadata: { name: `${name}.example.com` },
      spec: { resource: { group: 'example.com', resource: name } },
    } as KubeObject);
    // The attacker's own ServiceAccount, which an admin let Outrigger act as, with no grants of its own.
    await applyManifests(admin, impersonatedAccount(attacker, 'mine', []));
    await applyManifests(
      admin,
      `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: ${name} }
spec:
  parentResource: { apiVersion: migration.k8s.io/v1alpha1, resource: storagestates }
  inputResources: [{ apiVersion: v1, resource: persistentvolumeclaims }]
  outputResources: [{ apiVersion: snapshot.storage.k8s.io/v1, resource: volumesnapshots }]
  serviceAccount: { namespace: ${attacker}, name: mine }
  hooks: { map: { webhook: { url: "${hookUrl}/map" }, retries: 0 } }
`,
    );
    try {
      await serve(keyOf(state, 'migration.k8s.io', 'StorageState'), name);
      expect(calls.filter((c) => c.includes('secret-data'))).toEqual([]);
      expect(await admin.listAll(snapshots, { namespace: ns })).toEqual([]);
      expect(await ready(name)).toMatchObject({ status: 'False', reason: 'Forbidden' });
    } finally {
      await admin.delete(mapControllers, { name });
      await admin.delete(storageStates, { name: state.metadata.name ?? '' });
    }
  }, 60_000);
});
