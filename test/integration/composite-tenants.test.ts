// Teams sharing a cluster through CompositeControllers and DecoratorControllers (docs/operations/security.md): what
// a parent's author, another definition or a definition's deletion can steer. A platform team serves TenantDB, whose
// controller makes a ResourceQuota per database, as its own ServiceAccount; a tenant may create TenantDBs in its
// namespace but may not touch the admin's ResourceQuota there. Each pass runs as the definition's ServiceAccount on
// the real apiserver, its hook a real HTTP server in this process.
/* eslint-disable max-lines -- the trust-boundary scenarios share the platform team's TenantDB definition, its tenant namespace, accounts and hook server, set up once in beforeAll */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { actingAs, listCompositeSet, type CompositeSet, type ResolvedComposite } from '../../functions/composite/controllers.ts';
import { serveCompositeRequest, type CompositeServeContext } from '../../functions/composite/serve.ts';
import { syncDefinition } from '../../functions/composite/sync.ts';
import { MADE_BY_ANNOTATION } from '../../shared/composite/api.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf } from '../../shared/ownership/index.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { startLambdaEndpoint } from '../../local/lambda-endpoint.ts';
import { adminClient, createNamespace, grantsInEffect, outriggerClient, testState } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite-tenants.outrigger.test';
const tenantDbs = gvr(GROUP, 'v1', 'tenantdbs');
const quotas = gvr('', 'v1', 'resourcequotas');
const NS = 'outrigger-composite-tenants';
const TENANT = 'tenant-a@composite-tenants';
const definitions = gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers');
const decorators = gvr('metacontroller.k8s.io', 'v1alpha1', 'decoratorcontrollers');
const widgets = gvr(GROUP, 'v1', 'widgets');
const configMaps = gvr('', 'v1', 'configmaps');
const namespaces = gvr('', 'v1', 'namespaces');
const services = gvr('', 'v1', 'services');
/** This file's definitions only (the cluster's controllerSelector): other files' are theirs to serve. */
const SELECTED = 'outrigger.test/tenants=yes';

/** Per parent name, the ResourceQuotas the sync hook answers (by default one, `<parent>-quota`). */
const answers = new Map<string, string[]>();
function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    // Two teams' decorators: a Service each, named for the decorator (a's also its attachment from before marks).
    if (req.url?.startsWith('/decorate-')) {
      const who = req.url.slice('/decorate-'.length);
      const object = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { object: KubeObject }).object;
      const names = [`${object.metadata.name ?? ''}-${who}`, ...(who === 'a' ? [`${object.metadata.name ?? ''}-legacy`] : [])];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          attachments: names.map((name) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name }, spec: { ports: [{ port: 80 }] } })),
        }),
      );
      return;
    }
    // The finalizing definitions' hooks: no children, and a finalize hook that is done at once.
    if (req.url !== '/sync') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url === '/finalize' ? { finalized: true } : {}));
      return;
    }
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { parent: KubeObject };
    const name = body.parent.metadata.name ?? '';
    const children = (answers.get(name) ?? [`${name}-quota`]).map((n) => ({
      apiVersion: 'v1',
      kind: 'ResourceQuota',
      metadata: { name: n },
      spec: { hard: { 'count/configmaps': '10' } },
    }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ children, status: { quotas: children.length } }));
  });
}

let server: Server;
let url: string;
let platform: ResolvedComposite;
const hooks = new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'TenantDB', 'tenantdbs')}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'platform',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["tenantdbs"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["tenantdbs/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["resourcequotas"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/tenantdb-controller',
)}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: composite-tenants-tenant }
rules: [{ apiGroups: ["${GROUP}"], resources: ["tenantdbs"], verbs: ["create", "get", "list", "patch", "delete"] }]
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: tenantdb-controller }
spec:
  serviceAccount: { namespace: ${NS}, name: platform }
  parentResource: { apiVersion: ${GROUP}/v1, resource: tenantdbs }
  childResources:
  - apiVersion: v1
    resource: resourcequotas
  hooks: { sync: { webhook: { url: "${url}/sync", timeout: 5s } } }
`,
  );
  const kube = outriggerClient();
  const cache = clusterCache<CompositeSet>(0);
  for (let i = 0; ; i += 1) {
    forgetDiscovery(kube);
    const set = await listCompositeSet(kube, 'it', cache);
    const found = set.composites.find((c) => c.name === 'tenantdb-controller');
    if (found) {
      platform = found;
      break;
    }
    if (i > 100) throw new Error(`definition not ready: ${JSON.stringify(set.invalid)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  await adminClient()
    .delete(definitions, { name: 'tenantdb-controller' })
    .catch(() => undefined);
  // Left by a failed run: Outrigger's finalizer taken off, so they go.
  for (const [r, name] of [
    [definitions, 'widget-controller'],
    [decorators, 'configmap-decorator'],
    [decorators, 'decorator-a'],
    [decorators, 'decorator-b'],
    [definitions, 'team-a-controller'],
    [definitions, 'stranger-controller'],
  ] as const) {
    await adminClient()
      .patch(r, { name }, { metadata: { finalizers: null } }, 'merge')
      .catch(() => undefined);
    await adminClient()
      .delete(r, { name })
      .catch(() => undefined);
  }
  await new Promise<void>((r) => server.close(() => r()));
});

/** A tenant's namespace: the admin's ResourceQuota `compute` in it, and the tenant's grant on TenantDBs there. */
async function tenantNamespace(): Promise<{ ns: string; compute: KubeObject }> {
  const ns = await createNamespace('cc-tenant');
  const admin = adminClient();
  await applyManifests(
    admin,
    `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: tenant, namespace: ${ns} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: composite-tenants-tenant }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: ${TENANT} }]
`,
  );
  const compute = await admin.create(quotas, {
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: { name: 'compute', namespace: ns, labels: { team: 'admins' } },
    spec: { hard: { pods: '20' } },
  } as KubeObject);
  await grantsInEffect(adminClient().as({ user: TENANT }), [{ verb: 'create', group: GROUP, resource: 'tenantdbs', namespace: ns }]);
  return { ns, compute };
}

const pass = (parent: KubeObject) =>
  syncDefinition({ kube: actingAs(outriggerClient(), platform), hooks }, platform, {
    cluster: 'it',
    group: GROUP,
    kind: 'TenantDB',
    namespace: parent.metadata.namespace,
    name: parent.metadata.name ?? '',
    uid: parent.metadata.uid ?? '',
  });

describe('trust boundary: adoption is not a grant', () => {
  test("a tenant's parent with selector: {} does not adopt or delete the admin's ResourceQuota", async () => {
    const { ns, compute } = await tenantNamespace();
    const tenant = adminClient().as({ user: TENANT });
    // The tenant may not touch the admin's quota itself.
    await expect(tenant.delete(quotas, { name: 'compute', namespace: ns })).rejects.toMatchObject({ kind: 'Forbidden' });
    const parent = await tenant.create(tenantDbs, {
      apiVersion: `${GROUP}/v1`,
      kind: 'TenantDB',
      metadata: { name: 'db', namespace: ns },
      spec: { selector: {} },
    } as KubeObject);
    for (let i = 0; i < 2; i += 1) {
      const result = await pass(parent);
      expect(result).toMatchObject({ problems: [], adopted: 0, deleted: 0, recreated: 0 });
    }
    const after = await adminClient().get(quotas, { name: 'compute', namespace: ns });
    expect(after.metadata.uid).toBe(compute.metadata.uid);
    expect(after.metadata.ownerReferences ?? []).toEqual([]);
    expect(after.metadata.deletionTimestamp).toBeUndefined();
    // The controller's own child is there, marked as its own for this parent kind.
    const own = await adminClient().get(quotas, { name: 'db-quota', namespace: ns });
    expect(controllerOf(own)?.uid).toBe(parent.metadata.uid);
    expect(own.metadata.annotations?.[MADE_BY_ANNOTATION]).toBe(`compositecontroller/tenantdb-controller/tenantdbs.${GROUP}`);
  });

  test("children it made are found again: its ControllerRef (Metacontroller's, unmarked) is never adoption; an orphan it marked is adopted, and deleted only by a later pass", async () => {
    const { ns, compute } = await tenantNamespace();
    const admin = adminClient();
    const parent = await adminClient()
      .as({ user: TENANT })
      .create(tenantDbs, {
        apiVersion: `${GROUP}/v1`,
        kind: 'TenantDB',
        metadata: { name: 'moved', namespace: ns },
        spec: { selector: {} },
      } as KubeObject);
    // As Metacontroller leaves them: a child with the parent's ControllerRef and nothing else of Outrigger's.
    await admin.create(quotas, {
      apiVersion: 'v1',
      kind: 'ResourceQuota',
      metadata: {
        name: 'moved-quota',
        namespace: ns,
        ownerReferences: [
          {
            apiVersion: `${GROUP}/v1`,
            kind: 'TenantDB',
            name: 'moved',
            uid: parent.metadata.uid!,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { hard: { 'count/configmaps': '10' } },
    } as KubeObject);
    // Left by a predecessor parent of this controller deleted with --cascade=orphan: the controller's mark, no owner.
    await admin.create(quotas, {
      apiVersion: 'v1',
      kind: 'ResourceQuota',
      metadata: {
        name: 'left-over',
        namespace: ns,
        annotations: { [MADE_BY_ANNOTATION]: `compositecontroller/tenantdb-controller/tenantdbs.${GROUP}` },
      },
      spec: { hard: { 'count/configmaps': '5' } },
    } as KubeObject);
    const first = await pass(parent);
    // The answer names moved-quota alone: left-over is adopted and held, not deleted in the pass that adopted it.
    expect(first).toMatchObject({ problems: [], adopted: 1, held: 1, created: 0, deleted: 0 });
    expect(controllerOf(await admin.get(quotas, { name: 'left-over', namespace: ns }))?.uid).toBe(parent.metadata.uid);
    const second = await pass(parent);
    expect(second).toMatchObject({ problems: [], adopted: 0, held: 0, deleted: 1 });
    const left = await admin.find(quotas, { name: 'left-over', namespace: ns });
    expect(!left || Boolean(left.metadata.deletionTimestamp)).toBe(true);
    expect(controllerOf(await admin.get(quotas, { name: 'moved-quota', namespace: ns }))?.uid).toBe(parent.metadata.uid);
    expect((await admin.get(quotas, { name: 'compute', namespace: ns })).metadata.uid).toBe(compute.metadata.uid);
  });
});

// Definitions with a finalize hook: a CompositeController of Widgets and a DecoratorController of labelled ConfigMaps
// (another team's objects), both of one platform team, acting as its ServiceAccount.
const finalizing = () => `${openCrd(GROUP, 'Widget', 'widgets')}---
${impersonatedAccount(
  NS,
  'finalizing',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["widgets/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
    `{ apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/widget-controller, decoratorcontroller/configmap-decorator',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: widget-controller, labels: { outrigger.test/tenants: "yes" } }
spec:
  serviceAccount: { namespace: ${NS}, name: finalizing }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: widgets }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { webhook: { url: "${url}/plain" } }, finalize: { webhook: { url: "${url}/finalize" } } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: configmap-decorator, labels: { outrigger.test/tenants: "yes" } }
spec:
  serviceAccount: { namespace: ${NS}, name: finalizing }
  resources: [{ apiVersion: v1, resource: configmaps, labelSelector: { matchLabels: { decorate: "yes" } } }]
  attachments: [{ apiVersion: v1, resource: services }]
  hooks: { sync: { webhook: { url: "${url}/plain" } }, finalize: { webhook: { url: "${url}/finalize" } } }
`;

describe("trust boundary: a parent's name is not a grant", () => {
  test("a tenant's parent named so that its child's name is the admin's ResourceQuota's: the quota is left alone, and the pass says so", async () => {
    const { ns } = await tenantNamespace();
    const admin = adminClient();
    // The admin's quota holds the name the controller gives a parent named `team`'s child (`<parent>-quota`).
    const held = await admin.create(quotas, {
      apiVersion: 'v1',
      kind: 'ResourceQuota',
      metadata: { name: 'team-quota', namespace: ns, labels: { team: 'admins' } },
      spec: { hard: { pods: '5' } },
    } as KubeObject);
    const parent = await adminClient()
      .as({ user: TENANT })
      .create(tenantDbs, {
        apiVersion: `${GROUP}/v1`,
        kind: 'TenantDB',
        metadata: { name: 'team', namespace: ns },
        spec: { selector: { matchLabels: { db: 'team' } } },
      } as KubeObject);
    for (let i = 0; i < 2; i += 1) {
      const result = await pass(parent);
      expect(result).toMatchObject({ adopted: 0, created: 0, updated: 0, deleted: 0, recreated: 0 });
      expect(JSON.stringify(result.problems)).toContain("exists and is not this parent's");
    }
    const after = await admin.get(quotas, { name: 'team-quota', namespace: ns });
    expect(after.metadata.resourceVersion).toBe(held.metadata.resourceVersion);
    expect(after.metadata.ownerReferences ?? []).toEqual([]);
    expect(after.metadata.annotations?.[MADE_BY_ANNOTATION]).toBeUndefined();
  });
});

describe('trust boundary: a definition never strands its finalizer', () => {
  const cache = clusterCache<CompositeSet>(0);
  const ctx = (): CompositeServeContext => ({
    kube: outriggerClient(),
    state: testState(),
    syncSink: { send: () => Promise.resolve() },
    hooks,
    controllers: cache,
    controllerSelector: SELECTED,
    log: () => {},
  });
  const request = (o: KubeObject, group: string, kind: string) =>
    makeSyncRequest(
      { cluster: 'it', group, kind, namespace: o.metadata.namespace, name: o.metadata.name ?? '', uid: o.metadata.uid ?? '' },
      ['test'],
    );
  const serve = (o: KubeObject, group: string, kind: string) => serveCompositeRequest(request(o, group, kind), Date.now(), ctx());
  const finalizersOf = async (r: typeof widgets, o: KubeObject) =>
    (await adminClient().find(r, { name: o.metadata.name ?? '', namespace: o.metadata.namespace }))?.metadata.finalizers ?? [];

  test("deleting a Composite or DecoratorController takes its finalizer off every parent, other teams' and those in terminating namespaces included", async () => {
    const admin = adminClient();
    await applyManifests(admin, finalizing());
    const kube = outriggerClient();
    for (let i = 0; ; i += 1) {
      forgetDiscovery(kube);
      cache.forget('it');
      const set = await listCompositeSet(kube, 'it', cache, SELECTED);
      if (set.composites.some((c) => c.name === 'widget-controller') && set.decorators.some((d) => d.name === 'configmap-decorator')) break;
      if (i > 100) throw new Error(`definitions not ready: ${JSON.stringify(set.invalid)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const [a, b] = [await createNamespace('cc-final-a'), await createNamespace('cc-final-b')];
    const parents: Array<[typeof widgets, KubeObject, string, string]> = [];
    for (const ns of [a, b]) {
      const w = await admin.create(widgets, {
        apiVersion: `${GROUP}/v1`,
        kind: 'Widget',
        metadata: { name: 'w', namespace: ns },
        spec: {},
      } as KubeObject);
      // Another team's ConfigMap, which the platform's decorator serves by its label.
      const c = await admin.create(configMaps, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'theirs', namespace: ns, labels: { decorate: 'yes' } },
      } as KubeObject);
      parents.push([widgets, w, GROUP, 'Widget'], [configMaps, c, '', 'ConfigMap']);
    }
    for (const [, o, group, kind] of parents) await serve(o, group, kind);
    for (const [r, o] of parents)
      expect(await finalizersOf(r, o)).toEqual([expect.stringMatching(/^(composite|decorator)\.outrigger\.dev\//)]);
    expect((await admin.get(definitions, { name: 'widget-controller' })).metadata.finalizers).toContain('composite.outrigger.dev/parents');

    // An object the decorator no longer selects (its label removed) is released by its own pass.
    const [, unlabelled] = parents[1]!;
    await admin.patch(configMaps, { name: 'theirs', namespace: a }, { metadata: { labels: { decorate: null } } }, 'merge');
    await serve(unlabelled, '', 'ConfigMap');
    expect(await finalizersOf(configMaps, unlabelled)).toEqual([]);

    // Namespace b is terminating (the test bed runs no namespace controller: it stays so, its objects in it).
    await admin.delete(namespaces, { name: b });
    expect(((await admin.get(namespaces, { name: b })).status as { phase?: string }).phase).toBe('Terminating');

    // Both definitions deleted: they wait for their parents to be released, then go.
    await admin.delete(definitions, { name: 'widget-controller' });
    await admin.delete(decorators, { name: 'configmap-decorator' });
    const composite = await admin.get(definitions, { name: 'widget-controller' });
    const decorator = await admin.get(decorators, { name: 'configmap-decorator' });
    expect(composite.metadata.deletionTimestamp).toBeDefined();
    await serve(composite, 'metacontroller.k8s.io', 'CompositeController');
    await serve(decorator, 'metacontroller.k8s.io', 'DecoratorController');
    for (const [r, o] of parents) expect(await finalizersOf(r, o)).toEqual([]);
    expect(await admin.find(definitions, { name: 'widget-controller' })).toBeUndefined();
    expect(await admin.find(decorators, { name: 'configmap-decorator' })).toBeUndefined();
    // The tenant's Widget can now be deleted.
    await admin.delete(widgets, { name: 'w', namespace: a });
    expect(await admin.find(widgets, { name: 'w', namespace: a })).toBeUndefined();
  });
});

describe('trust boundary: a decorator owns only what it attached', () => {
  test("two teams' decorators on one object keep each other's attachments, and the object's own controller's", async () => {
    const admin = adminClient();
    const decorator = (who: string) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: decorator-${who} }
spec:
  serviceAccount: { namespace: ${NS}, name: decorating }
  resources: [{ apiVersion: v1, resource: configmaps, labelSelector: { matchLabels: { exposed: "twice" } } }]
  attachments: [{ apiVersion: v1, resource: services }]
  hooks: { sync: { webhook: { url: "${url}/decorate-${who}" } } }
`;
    await applyManifests(
      admin,
      `${impersonatedAccount(
        NS,
        'decorating',
        [
          `{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch", "patch"] }`,
          `{ apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
        ],
        'decoratorcontroller/decorator-a, decoratorcontroller/decorator-b',
      )}
---${decorator('a')}---${decorator('b')}`,
    );
    const kube = outriggerClient();
    const cache = clusterCache<CompositeSet>(0);
    let set: CompositeSet;
    for (let i = 0; ; i += 1) {
      forgetDiscovery(kube);
      set = await listCompositeSet(kube, 'it', cache);
      if (['decorator-a', 'decorator-b'].every((n) => set.decorators.some((d) => d.name === n))) break;
      if (i > 100) throw new Error(`definitions not ready: ${JSON.stringify(set.invalid)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const ns = await createNamespace('cc-decorators');
    const target = await admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'web', namespace: ns, labels: { exposed: 'twice' } },
    } as KubeObject);
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'web', uid: target.metadata.uid!, controller: true, blockOwnerDeletion: true };
    const service = (name: string) =>
      ({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace: ns, ownerReferences: [ref] },
        spec: { ports: [{ port: 80 }] },
      }) as KubeObject;
    // The object's own controller's Service, and decorator a's from before attachments were marked (its field manager).
    await admin.create(services, service('web-own'));
    await admin.create(services, service('web-legacy'), { fieldManager: 'outrigger-decorator/decorator-a' });
    const passes = [];
    for (let round = 0; round < 3; round += 1)
      for (const name of ['decorator-a', 'decorator-b']) {
        const d = set!.decorators.find((x) => x.name === name)!;
        passes.push(
          await syncDefinition({ kube: actingAs(kube, d), hooks }, d, {
            cluster: 'it',
            group: '',
            kind: 'ConfigMap',
            namespace: ns,
            name: 'web',
            uid: target.metadata.uid!,
          }),
        );
      }
    for (const p of passes) expect(p).toMatchObject({ problems: [], deleted: 0, recreated: 0 });
    expect(passes.reduce((n, p) => n + p.created, 0)).toBe(2);
    const left = await admin.listAll(services, { namespace: ns });
    expect(
      left
        .filter((o) => !o.metadata.deletionTimestamp)
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['web-a', 'web-b', 'web-legacy', 'web-own']);
    const by = (name: string) =>
      left.find((o) => o.metadata.name === name)!.metadata.annotations?.['metacontroller.k8s.io/decorator-controller'];
    expect([by('web-a'), by('web-b'), by('web-own')]).toEqual(['decorator-a', 'decorator-b', undefined]);
  });
});

describe('trust boundary: a Lambda hook is called only for the definitions it is bound to', () => {
  test("another team's CompositeController naming team a's function is refused, with a condition naming the binding; team a's own is served", async () => {
    const admin = adminClient();
    // Team a's function: a ConfigMap per parent, in the parent's namespace, written with the caller's account.
    const lambda = await startLambdaEndpoint(
      new Map([
        [
          'team-a-hook',
          (req: { parent: KubeObject }) =>
            Promise.resolve({
              children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${req.parent.metadata.name ?? ''}-made` }, data: {} }],
            }),
        ],
      ]),
    );
    try {
      const definition = (who: string, plural: string) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${who}-controller }
spec:
  serviceAccount: { namespace: ${NS}, name: ${who} }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: ${plural} }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { lambda: { functionName: team-a-hook }, retries: 0 } }
`;
      const account = (who: string, plural: string) =>
        impersonatedAccount(
          NS,
          who,
          [
            `{ apiGroups: ["${GROUP}"], resources: ["${plural}"], verbs: ["get", "list", "watch", "patch"] }`,
            `{ apiGroups: ["${GROUP}"], resources: ["${plural}/status"], verbs: ["patch"] }`,
            `{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
          ],
          `compositecontroller/${who}-controller`,
        );
      await applyManifests(
        admin,
        `${openCrd(GROUP, 'Gadget', 'gadgets')}---${openCrd(GROUP, 'Stranger', 'strangers')}---
${account('team-a', 'gadgets')}
---
${account('stranger', 'strangers')}
---${definition('team-a', 'gadgets')}---${definition('stranger', 'strangers')}`,
      );
      const kube = outriggerClient();
      const cache = clusterCache<CompositeSet>(0);
      let set: CompositeSet;
      for (let i = 0; ; i += 1) {
        forgetDiscovery(kube);
        set = await listCompositeSet(kube, 'it', cache);
        if (['team-a-controller', 'stranger-controller'].every((n) => set.composites.some((c) => c.name === n))) break;
        if (i > 100) throw new Error(`definitions not ready: ${JSON.stringify(set.invalid)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      // The deployment binds team a's function to team a's controller alone.
      const bound = new Hooks({
        lambdaEndpoint: lambda.url,
        minRetryDelayMs: 10,
        lambdaBindings: [{ functionName: 'team-a-hook', callers: [{ kind: 'CompositeController', name: 'team-a-controller' }] }],
      });
      const ns = await createNamespace('cc-lambda');
      const pass = async (who: string, kind: string, plural: string) => {
        const parent = await admin.create(gvr(GROUP, 'v1', plural), {
          apiVersion: `${GROUP}/v1`,
          kind,
          metadata: { name: who, namespace: ns },
          spec: {},
        } as KubeObject);
        const d = set!.composites.find((c) => c.name === `${who}-controller`)!;
        const key = { cluster: 'it', group: GROUP, kind, namespace: ns, name: who, uid: parent.metadata.uid! };
        return syncDefinition({ kube: actingAs(kube, d), hooks: bound }, d, key);
      };
      const stranger = await pass('stranger', 'Stranger', 'strangers');
      expect(stranger).toMatchObject({ created: 0, problems: [expect.objectContaining({ reason: 'HookNotAllowed' })] });
      expect(lambda.invocations.get('team-a-hook') ?? 0).toBe(0);
      expect(await admin.find(configMaps, { name: 'stranger-made', namespace: ns })).toBeUndefined();
      const status = (await admin.get(gvr(GROUP, 'v1', 'strangers'), { name: 'stranger', namespace: ns })).status as {
        conditions?: Array<{ type: string; reason: string; message: string }>;
      };
      expect(status.conditions?.find((c) => c.type === 'Synced')).toMatchObject({
        reason: 'HookNotAllowed',
        message: expect.stringContaining('Lambda function team-a-hook is bound to CompositeController team-a-controller'),
      });
      // Team a's own controller is served by the same caller.
      expect(await pass('team-a', 'Gadget', 'gadgets')).toMatchObject({ created: 1, problems: [] });
      expect(lambda.invocations.get('team-a-hook')).toBe(1);
    } finally {
      await lambda.stop();
    }
  });
});
