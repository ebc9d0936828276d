// Teams sharing a cluster through CompositeControllers and DecoratorControllers (docs/operations/security.md): what
// a parent's author, another definition or a definition's deletion can steer. A platform team serves TenantDB, whose
// controller makes a ResourceQuota per database, as its own ServiceAccount; a tenant may create TenantDBs in its
// namespace but may not touch the admin's ResourceQuota there. Each pass runs as the definition's ServiceAccount on
// the real apiserver, its hook a real HTTP server in this process.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { actingAs, listCompositeSet, type CompositeSet, type ResolvedComposite } from '../../functions/composite/controllers.ts';
import { syncDefinition } from '../../functions/composite/sync.ts';
import { MADE_BY_ANNOTATION } from '../../shared/composite/api.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, grantsInEffect, outriggerClient } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite-tenants.outrigger.test';
const tenantDbs = gvr(GROUP, 'v1', 'tenantdbs');
const quotas = gvr('', 'v1', 'resourcequotas');
const NS = 'outrigger-composite-tenants';
const TENANT = 'tenant-a@composite-tenants';
const definitions = gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers');

/** Per parent name, the ResourceQuotas the sync hook answers (by default one, `<parent>-quota`). */
const answers = new Map<string, string[]>();
function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
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
let platform: ResolvedComposite;
const hooks = new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
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
