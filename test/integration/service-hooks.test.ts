// Hooks inside the cluster (docs/reference/hooks.md#hooks-inside-the-cluster): a webhook that names a Service is
// called through the real apiserver's service proxy, as the controller's ServiceAccount, so RBAC decides which
// Services a controller's hooks reach. The Service has no selector; its Endpoints point at a hook server this test
// starts on an address of a veth pair made for the run (test/testbed/hook-service.ts and netns.ts: the apiserver refuses to proxy to
// loopback and link-local addresses).
import type { IncomingHttpHeaders } from 'node:http';
import { readFile } from 'node:fs/promises';
import { serveMapRequest } from '../../functions/map/handler.ts';
import { compositeControllers, type CompositeSet } from '../../functions/composite/controllers.ts';
import { serveCompositeRequest } from '../../functions/composite/serve.ts';
import { mapControllers, type MapControllerSet } from '../../functions/map/controllers.ts';
import { actingAs } from '../../functions/identity.ts';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { HookError, Hooks } from '../../shared/hooks/index.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import type { Hook } from '../../shared/map/api.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { proxyGrant, serviceTo, startHookServer, type HookServer } from '../testbed/hook-service.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'servicehooks.outrigger.test';
const boards = gvr(GROUP, 'v1', 'hookboards');
const hookSets = gvr(GROUP, 'v1', 'hooksets');
const configMaps = gvr('', 'v1', 'configmaps');

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let server: HookServer;
const received: Received[] = [];
/** What the server answers next, by path; default a 200 with no outputs. */
let answer: (r: Received) => { status: number; headers?: Record<string, string>; body: string } = () => ({
  status: 200,
  body: '{"outputs": []}',
});

/** The hooks' namespace (the Service, and the account that may proxy to it) and a namespace the account may not reach. */
let ns: string;
let other: string;

beforeAll(async () => {
  server = await startHookServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const r = { path: req.url ?? '', headers: req.headers, body };
      received.push(r);
      const a = answer(r);
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers }).end(a.body);
    });
  });
  const admin = adminClient();
  ns = await createNamespace('svchook');
  other = await createNamespace('svcother');
  await applyManifests(admin, `${openCrd(GROUP, 'HookBoard', 'hookboards')}---${openCrd(GROUP, 'HookSet', 'hooksets')}`);
  for (const where of [ns, other]) await serviceTo(admin, where, 'hooks', server);
  // The account may proxy to Services in its own namespace only, and run a MapController of HookBoards and a
  // CompositeController of HookSets there.
  await applyManifests(
    admin,
    impersonatedAccount(
      ns,
      'hooker',
      [
        `{ apiGroups: ["${GROUP}"], resources: ["hookboards", "hooksets"], verbs: ["get", "list", "watch"] }`,
        `{ apiGroups: ["${GROUP}"], resources: ["hookboards/status", "hooksets/status"], verbs: ["patch"] }`,
        `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
      ],
      'mapcontroller/*, compositecontroller/*',
    ),
  );
  await applyManifests(admin, proxyGrant(ns, 'hooker-proxy', { kind: 'ServiceAccount', name: 'hooker', namespace: ns }));
  // The apiserver's proxy finds Services and EndpointSlices through its informers: wait until it sees them.
  const probe = new Hooks();
  await eventually(() =>
    probe
      .call(hook({ service: { name: 'hooks', namespace: ns } }), {}, { controller, cluster: account() })
      .then(() => true)
      .catch(() => undefined),
  );
}, 120_000);

afterAll(async () => {
  await server?.close();
});

/** The name of the parent a sync call was for (undefined for a body that names none). */
function parentOf(r: Received): string | undefined {
  try {
    return (JSON.parse(r.body) as { parent?: KubeObject }).parent?.metadata.name;
  } catch {
    return undefined;
  }
}

const hook = (webhook: Record<string, unknown>): Hook => ({ webhook, timeoutSeconds: 10, retries: 0 }) as Hook;
const account = () => actingAs(outriggerClient(), { namespace: ns, name: 'hooker' });
const controller = { cluster: 'it', uid: 'u-1' };

describe('hooks inside the cluster, through the apiserver service proxy', () => {
  test('webhook.service and path, and a URL naming the Service by its cluster DNS name, reach the Service as the controller account', async () => {
    const hooks = new Hooks({ signingSecret: () => Promise.resolve('a'.repeat(64)) });
    received.length = 0;
    answer = () => ({ status: 200, body: '{"outputs": [{"a": 1}]}' });
    const viaService = await hooks.call(
      hook({ service: { name: 'hooks', namespace: ns, port: 80 }, path: '/sync?x=1' }),
      { n: 1 },
      {
        controller,
        cluster: account(),
      },
    );
    expect(viaService).toEqual({ outputs: [{ a: 1 }] });
    for (const url of [`http://hooks.${ns}/map`, `http://hooks.${ns}.svc/map`, `http://hooks.${ns}.svc.cluster.local:80/map`])
      await hooks.call(hook({ url }), { n: 2 }, { controller, cluster: account() });
    expect(received.map((r) => r.path)).toEqual(['/sync?x=1', '/map', '/map', '/map']);
    // Signed as the hook is named; the apiserver's credentials and impersonation never reach the hook.
    expect(received[0]!.headers['x-outrigger-signature']).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(received[0]!.body).toBe('{"n":1}');
    for (const r of received) {
      expect(r.headers.authorization).toBeUndefined();
      expect(Object.keys(r.headers).filter((h) => h.startsWith('impersonate-'))).toEqual([]);
    }
  });

  test('trust boundary: a Service the controller account may not proxy to is not called, though Outrigger itself may', async () => {
    const admin = adminClient();
    // Outrigger's own identity may proxy in the other namespace: the call must still be the account's, and refused.
    await applyManifests(
      admin,
      proxyGrant(other, 'outrigger-proxy', { kind: 'Group', name: 'outrigger:controllers', apiGroup: 'rbac.authorization.k8s.io' }),
    );
    const hooks = new Hooks();
    received.length = 0;
    const err = await hooks
      .call(hook({ service: { name: 'hooks', namespace: other }, path: '/map' }), {}, { controller, cluster: account() })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HookError);
    expect(err).toMatchObject({ reason: 'NotAllowed', status: 403 });
    expect((err as Error).message).toContain(`may not reach service ${other}/hooks`);
    const byUrl = await hooks
      .call(hook({ url: `http://hooks.${other}.svc/map` }), {}, { controller, cluster: account() })
      .catch((e: unknown) => e);
    expect(byUrl).toMatchObject({ reason: 'NotAllowed' });
    // Without the account's client, a Service hook is not called at all (never as Outrigger).
    await expect(hooks.call(hook({ service: { name: 'hooks', namespace: ns } }), {}, { controller })).rejects.toThrow(
      "must be made as the controller's ServiceAccount",
    );
    expect(received).toEqual([]);
    // Options the proxy cannot carry are refused, not dropped.
    await expect(
      hooks.call(
        hook({ service: { name: 'hooks', namespace: ns }, authorization: { secretRef: { name: 's', namespace: ns } } }),
        {},
        {
          controller,
          cluster: account(),
        },
      ),
    ).rejects.toMatchObject({ reason: 'Refused' });
    expect(received).toEqual([]);
  });

  test('etag: a 304 through the proxy answers with the kept answer; 429 with Retry-After asks to be called later', async () => {
    const hooks = new Hooks();
    received.length = 0;
    answer = (r) =>
      r.headers['if-none-match'] === '"v1"'
        ? { status: 304, body: '' }
        : { status: 200, headers: { etag: '"v1"' }, body: '{"outputs": [{"kept": true}]}' };
    const h = hook({ service: { name: 'hooks', namespace: ns }, path: '/map', etag: { enabled: true, cacheTimeoutSeconds: 60 } });
    expect(await hooks.call(h, { same: 1 }, { controller, cluster: account() })).toEqual({ outputs: [{ kept: true }] });
    expect(await hooks.call(h, { same: 1 }, { controller, cluster: account() })).toEqual({ outputs: [{ kept: true }] });
    expect(received.map((r) => r.headers['if-none-match'])).toEqual([undefined, '"v1"']);
    answer = () => ({ status: 429, headers: { 'retry-after': '7' }, body: '{}' });
    await expect(hooks.call(h, { other: 1 }, { controller, cluster: account() })).rejects.toMatchObject({
      reason: 'HTTPError',
      status: 429,
      retryAfterSeconds: 7,
    });
  });

  test('a MapController whose map hook is webhook.service syncs its parent through the proxy', async () => {
    const admin = adminClient();
    const name = uniqueName('svchook');
    received.length = 0;
    answer = (r) => {
      const req = JSON.parse(r.body) as { input: KubeObject };
      return {
        status: 200,
        body: JSON.stringify({
          outputs: [
            { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${req.input.metadata.name ?? ''}-copy` }, data: { via: 'proxy' } },
          ],
        }),
      };
    };
    await applyManifests(
      admin,
      `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: ${name} }
spec:
  parentResource: { apiVersion: ${GROUP}/v1, resource: hookboards }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: hooker }
  hooks: { map: { webhook: { service: { name: hooks, namespace: ${ns}, port: 80 }, path: /map, timeout: 5s }, retries: 0 } }
`,
    );
    try {
      const parent = await admin.create(boards, {
        apiVersion: `${GROUP}/v1`,
        kind: 'HookBoard',
        metadata: { name: 'p', namespace: ns },
        spec: { selector: { matchLabels: { board: 'p' } } },
      } as KubeObject);
      await admin.create(configMaps, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'in', namespace: ns, labels: { board: 'p' } },
      } as KubeObject);
      const mc = await admin.get(mapControllers, { name });
      const ctx = {
        kube: outriggerClient(),
        state: testState(),
        syncSink: { send: () => Promise.resolve() },
        hooks: new Hooks(),
        controllers: clusterCache<MapControllerSet>(5_000),
        log: () => undefined,
      };
      const cluster = uniqueName('id');
      await serveMapRequest(
        makeSyncRequest({ cluster, group: 'metacontroller.k8s.io', kind: 'MapController', name, uid: mc.metadata.uid ?? '' }, []),
        Date.now(),
        ctx,
      );
      const key = { cluster, group: GROUP, kind: 'HookBoard', namespace: ns, name: 'p', uid: parent.metadata.uid ?? '' };
      const copy = await eventually(async () => {
        await serveMapRequest(makeSyncRequest(key, []), Date.now(), ctx);
        return admin.find(configMaps, { name: 'in-copy', namespace: ns });
      });
      expect((copy as KubeObject & { data?: unknown }).data).toEqual({ via: 'proxy' });
      expect(received.some((r) => r.path === '/map')).toBe(true);
    } finally {
      await admin.delete(mapControllers, { name });
    }
  });
});

test("a CompositeController whose sync hook is an in-cluster Service over plain http syncs its parent through the proxy, as Metacontroller's manifests name it", async () => {
  const admin = adminClient();
  const name = uniqueName('svccomposite');
  received.length = 0;
  answer = (r) => {
    const req = JSON.parse(r.body) as { parent: KubeObject; children: Record<string, unknown> };
    const child = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `${req.parent.metadata.name ?? ''}-child` },
      data: { via: 'proxy' },
    };
    return { status: 200, body: JSON.stringify({ status: { seen: Object.keys(req.children) }, children: [child] }) };
  };
  // As Metacontroller's docs write it: webhook.service, path and a Go timeout, over plain http.
  await applyManifests(
    admin,
    `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${name} }
spec:
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: hooksets }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: hooker }
  hooks: { sync: { webhook: { service: { name: hooks, namespace: ${ns}, port: 80, protocol: http }, path: /sync, timeout: 5s }, retries: 0 } }
`,
  );
  try {
    const parent = await admin.create(hookSets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'HookSet',
      metadata: { name: 'set', namespace: ns },
      spec: {},
    } as KubeObject);
    const ctx = {
      kube: outriggerClient(),
      state: testState(),
      syncSink: { send: () => Promise.resolve() },
      hooks: new Hooks(),
      controllers: clusterCache<CompositeSet>(0),
      log: () => undefined,
    };
    const key = { cluster: uniqueName('id'), group: GROUP, kind: 'HookSet', namespace: ns, name: 'set', uid: parent.metadata.uid ?? '' };
    const child = await eventually(async () => {
      await serveCompositeRequest(makeSyncRequest(key, []), Date.now(), ctx).catch(() => undefined);
      return admin.find(configMaps, { name: 'set-child', namespace: ns });
    });
    expect((child as KubeObject & { data?: unknown }).data).toEqual({ via: 'proxy' });
    expect((await admin.get(hookSets, { name: 'set', namespace: ns })).status).toMatchObject({ seen: ['ConfigMap.v1'] });
    expect(received.some((r) => r.path === '/sync')).toBe(true);
  } finally {
    await admin.delete(compositeControllers, { name });
  }
});

test("trust boundary: a CompositeController's Service hook is called as its ServiceAccount, so a Service the account may not proxy to is not called, though Outrigger itself may", async () => {
  const admin = adminClient();
  const name = uniqueName('svcdenied');
  // Outrigger's own identity may proxy in the other namespace; the definition's account may not.
  await applyManifests(
    admin,
    proxyGrant(other, 'outrigger-proxy', { kind: 'Group', name: 'outrigger:controllers', apiGroup: 'rbac.authorization.k8s.io' }),
  );
  await applyManifests(
    admin,
    `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${name} }
spec:
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: hooksets }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: hooker }
  hooks: { sync: { webhook: { url: "http://hooks.${other}/sync" }, retries: 0 } }
`,
  );
  try {
    const parent = await admin.create(hookSets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'HookSet',
      metadata: { name: 'denied', namespace: ns },
      spec: {},
    } as KubeObject);
    const ctx = {
      kube: outriggerClient(),
      state: testState(),
      syncSink: { send: () => Promise.resolve() },
      hooks: new Hooks(),
      controllers: clusterCache<CompositeSet>(0),
      log: () => undefined,
    };
    const key = { cluster: uniqueName('id'), group: GROUP, kind: 'HookSet', namespace: ns, name: 'denied', uid: parent.metadata.uid ?? '' };
    received.length = 0;
    const synced = await eventually(async () => {
      await serveCompositeRequest(makeSyncRequest(key, []), Date.now(), ctx).catch(() => undefined);
      const status = (await admin.get(hookSets, { name: 'denied', namespace: ns })).status as
        { conditions?: Array<{ type: string; status: string; reason: string }> } | undefined;
      return status?.conditions?.find((c) => c.type === 'Synced');
    });
    expect(synced).toMatchObject({ status: 'False', reason: 'HookNotAllowed' });
    // Only this parent's calls: another file's runtime, serving every CompositeController of the shared bed, may
    // still sync the earlier test's parent through its (allowed) Service while its controller cache holds it.
    expect(received.filter((r) => parentOf(r) === 'denied')).toEqual([]);
    expect(await admin.find(configMaps, { name: 'denied-child', namespace: ns })).toBeUndefined();
  } finally {
    await admin.delete(compositeControllers, { name });
  }
});

// The manifests' own RBAC grants Outrigger no cluster-wide services/proxy: the call is the account's, never its own.
test("cluster/rbac.yaml grants Outrigger's own roles no services/proxy", async () => {
  const rbac = await readFile(new URL('../../cluster/rbac.yaml', import.meta.url), 'utf8');
  expect(rbac).not.toMatch(/services\/proxy/);
});
