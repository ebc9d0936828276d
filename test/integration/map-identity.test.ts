// A MapController acts as the ServiceAccount it names, never as Outrigger (docs/controllers/mapcontroller.md#identity-each-mapcontroller-acts-as-its-own-serviceaccount):
// what one author is granted serves no other. On the real apiserver, through serveMapRequest (the map
// function's own entry), with a webhook the test serves.
/* eslint-disable max-lines -- the identity scenarios share the example's CRDs and RBAC, the three Team CRDs and the hook server, set up once in beforeAll */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { load } from 'js-yaml';
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
import { adminClient, createNamespace, eventually, grantsInEffect, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount, userGrant } from '../testbed/rbac.ts';

const GROUP = 'identity.outrigger.test';
const teams = gvr(GROUP, 'v1', 'teammaps');
const regions = gvr(GROUP, 'v1', 'teamregions');
const boards = gvr(GROUP, 'v1', 'teamboards');
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
    [
      openCrd(GROUP, 'TeamMap', 'teammaps'),
      openCrd(GROUP, 'TeamRegion', 'teamregions', { scope: 'Cluster' }),
      openCrd(GROUP, 'TeamBoard', 'teamboards'),
    ].join('---\n'),
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

// The ServiceAccount boundary (docs/operations/security.md#serviceaccounts-a-definition-names), in the audit's
// borrowed-account scenario: the SnapshotSchedule example installed, and someone else naming its ServiceAccount.
describe('the ServiceAccount boundary: a definition acts only as an account its author may use and that names it', () => {
  const EXAMPLE_ACCOUNT = { namespace: 'outrigger-system', name: 'snapshot-schedule' };
  const policies = gvr('outrigger.dev', 'v1alpha1', 'revisionpolicies');
  const borrowing = (name: string, url = `${hookUrl}/map`) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: ${name} }
spec:
  parentResource: { apiVersion: v1, resource: persistentvolumeclaims }
  inputResources: [{ apiVersion: v1, resource: persistentvolumeclaims }]
  outputResources: [{ apiVersion: snapshot.storage.k8s.io/v1, resource: volumesnapshots }]
  serviceAccount: { namespace: ${EXAMPLE_ACCOUNT.namespace}, name: ${EXAMPLE_ACCOUNT.name} }
  hooks: { map: { webhook: { url: "${url}" }, retries: 0 } }
`;

  test('admission: a user who may only create MapControllers and RevisionPolicies cannot name the example’s ServiceAccount, nor keep it while changing a controller’s spec; may name one they can impersonate', async () => {
    const admin = adminClient();
    const ns = await createNamespace('author');
    const user = uniqueName('author');
    const name = uniqueName('aaa-snap');
    await applyManifests(
      admin,
      userGrant(user, [
        '{ apiGroups: ["metacontroller.k8s.io"], resources: ["mapcontrollers"], verbs: ["create", "get"] }',
        '{ apiGroups: ["outrigger.dev"], resources: ["revisionpolicies"], verbs: ["create", "get"] }',
      ]),
    );
    const author = admin.as({ user });
    const mc = (yaml: string) => load(yaml) as KubeObject;
    // Refused below by admission, not by RBAC: the grant must be in effect first.
    await grantsInEffect(author, [{ verb: 'create', group: 'metacontroller.k8s.io', resource: 'mapcontrollers' }]);
    try {
      await expect(author.create(mapControllers, mc(borrowing(name, 'https://attacker.example/')))).rejects.toMatchObject({
        kind: 'Forbidden',
        message: expect.stringContaining(
          `spec.serviceAccount ${EXAMPLE_ACCOUNT.namespace}/${EXAMPLE_ACCOUNT.name}: the requester may not impersonate`,
        ),
      });
      await expect(
        author.create(policies, {
          apiVersion: 'outrigger.dev/v1alpha1',
          kind: 'RevisionPolicy',
          metadata: { name },
          spec: { target: { apiVersion: 'v1', kind: 'PersistentVolumeClaim' }, targetState: ['spec'], serviceAccount: EXAMPLE_ACCOUNT },
        } as KubeObject),
      ).rejects.toMatchObject({ kind: 'Forbidden' });
      expect(await admin.find(mapControllers, { name })).toBeUndefined();
      expect(await admin.find(policies, { name })).toBeUndefined();

      // An account of the author's own, which they may impersonate: admission lets it through.
      await applyManifests(
        admin,
        `${impersonatedAccount(ns, 'own', [])}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: ${user}-own, namespace: ${ns} }
rules: [{ apiGroups: [""], resources: ["serviceaccounts"], resourceNames: ["own"], verbs: ["impersonate"] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: ${user}-own, namespace: ${ns} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: ${user}-own }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: ${user} }]
`,
      );
      await grantsInEffect(author, [{ verb: 'impersonate', resource: 'serviceaccounts', namespace: ns, name: 'own' }]);
      await author.create(mapControllers, mc(teamController(name, { namespace: ns, name: 'own' })));

      // Changing a controller that names the example's account is using it too: a webhook swapped in is refused.
      await admin.delete(mapControllers, { name });
      await applyManifests(admin, borrowing(name));
      await applyManifests(
        admin,
        userGrant(user, ['{ apiGroups: ["metacontroller.k8s.io"], resources: ["mapcontrollers"], verbs: ["create", "get", "patch"] }']),
      );
      await grantsInEffect(author, [{ verb: 'patch', group: 'metacontroller.k8s.io', resource: 'mapcontrollers' }]);
      await expect(
        author.patch(mapControllers, { name }, { spec: { hooks: { map: { webhook: { url: 'https://attacker.example/' } } } } }, 'merge'),
      ).rejects.toMatchObject({ kind: 'Forbidden' });
      // A change that leaves the spec as it was borrows nothing (a label, the storage migrator's no-op rewrite).
      await author.patch(mapControllers, { name }, { metadata: { labels: { team: 'a' } } }, 'merge');
    } finally {
      await admin.delete(mapControllers, { name }).catch(() => undefined);
    }
  }, 60_000);

  test('run time: a MapController an admin let through naming the example’s ServiceAccount, which does not name it, is ServiceAccountNotConsenting; no hook call, nothing written', async () => {
    const admin = adminClient();
    const ns = await createNamespace('victim');
    const name = uniqueName('aaa-snap');
    calls.length = 0;
    const pvc = await admin.create(pvcs, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'data', namespace: ns },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    } as KubeObject);
    await applyManifests(admin, borrowing(name));
    try {
      await serve(keyOf(pvc, '', 'PersistentVolumeClaim'), name);
      expect(await ready(name)).toMatchObject({
        status: 'False',
        reason: 'ServiceAccountNotConsenting',
        message: expect.stringContaining(`mapcontroller/${name}`),
      });
      expect(calls).toEqual([]);
      expect(await admin.listAll(snapshots, { namespace: ns })).toEqual([]);
    } finally {
      await admin.delete(mapControllers, { name });
    }
  }, 60_000);

  test('a parent kind stays with the controller that held it first: one created later under an earlier name takes nothing', async () => {
    const admin = adminClient();
    const ns = await createNamespace('board');
    const [first, later] = [uniqueName('zz-board'), uniqueName('aaa-board')];
    const rules = [
      `{ apiGroups: ["${GROUP}"], resources: ["teamboards"], verbs: ["get", "list", "watch"] }`,
      `{ apiGroups: ["${GROUP}"], resources: ["teamboards/status"], verbs: ["patch"] }`,
      `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
    ];
    await applyManifests(admin, impersonatedAccount(ns, 'owner', rules, `mapcontroller/${first}`));
    await applyManifests(admin, impersonatedAccount(ns, 'other', rules, `mapcontroller/${later}`));
    const parent = await admin.create(boards, {
      apiVersion: `${GROUP}/v1`,
      kind: 'TeamBoard',
      metadata: { name: 'p', namespace: ns },
      spec: {},
    } as KubeObject);
    const held = (await applyManifests(admin, teamController(first, { namespace: ns, name: 'owner' }, 'teamboards')))[0]!;
    try {
      await serve(keyOf(parent, GROUP, 'TeamBoard'), first);
      expect(await ready(first)).toMatchObject({ status: 'True' });
      // creationTimestamp has whole seconds: the later controller is created in a later one.
      const createdAt = Date.parse(held.metadata.creationTimestamp ?? '');
      await eventually(async () => (Date.now() >= createdAt + 1_000 ? true : undefined));
      await applyManifests(admin, teamController(later, { namespace: ns, name: 'other' }, 'teamboards'));
      await serve(keyOf(parent, GROUP, 'TeamBoard'), later);
      expect(await ready(later)).toMatchObject({
        status: 'False',
        reason: 'ParentKindTaken',
        message: expect.stringContaining(`already controlled by MapController ${first}`),
      });
      expect(await ready(first)).toMatchObject({ status: 'True' });
    } finally {
      await admin.delete(mapControllers, { name: later }).catch(() => undefined);
      await admin.delete(mapControllers, { name: first });
    }
  }, 60_000);
});
