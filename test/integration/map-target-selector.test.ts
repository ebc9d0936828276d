// One controller at a time (docs/reference/configuration.md#clustersjson): a cluster's `controllerSelector` chooses
// which MapControllers a deployment serves, as Metacontroller's --target-label-selector, so the two share a cluster
// while a team moves controllers over. Two deployments with two selectors on the real apiserver: each serves its
// own controller, and leaves the other untouched (no hook call, no output, no status on it or its parents, no
// routing of its kinds).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveMapRequest } from '../../functions/map/handler.ts';
import { mapControllers, mapSource, type MapControllerSet } from '../../functions/map/controllers.ts';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, outriggerClient, testCluster, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'selector.outrigger.test';
const configMaps = gvr('', 'v1', 'configmaps');
const kinds = { Movedboard: gvr(GROUP, 'v1', 'movedboards'), Stayboard: gvr(GROUP, 'v1', 'stayboards') };

let server: Server;
let url: string;
const calls: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const r = JSON.parse(body) as { parent: KubeObject; input: KubeObject };
      calls.push(r.parent.kind ?? '');
      const out = [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${r.parent.metadata.name ?? ''}-out` }, data: {} }];
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ outputs: out }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/map`;
  await applyManifests(
    adminClient(),
    [openCrd(GROUP, 'Movedboard', 'movedboards'), openCrd(GROUP, 'Stayboard', 'stayboards')].join('---\n'),
  );
}, 120_000);

afterAll(() => new Promise<void>((r) => server.close(() => r())));

function controller(name: string, plural: string, engine: string, ns: string): string {
  return `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: ${name}, labels: { example.com/engine: ${engine} } }
spec:
  parentResource: { apiVersion: ${GROUP}/v1, resource: ${plural} }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: mover }
  hooks: { map: { webhook: { url: "${url}" }, retries: 0 } }
`;
}

/** A deployment serving one cluster with a selector: a MapController's request, then its parent's. */
function deployment(selector: string) {
  const cluster = uniqueName('sel');
  const ctx = {
    kube: outriggerClient(),
    state: testState(),
    syncSink: { send: () => Promise.resolve() },
    hooks: new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
    controllers: clusterCache<MapControllerSet>(5_000),
    controllerSelector: selector,
    log: () => undefined,
  };
  return {
    routed: async () =>
      (await mapSource.kinds({ ...testCluster(cluster), controllerSelector: selector }, outriggerClient())).map((k) => k.kind),
    serve: async (mcName: string, parent: KubeObject) => {
      const mc = await adminClient().get(mapControllers, { name: mcName });
      await serveMapRequest(
        makeSyncRequest({ cluster, group: 'metacontroller.k8s.io', kind: 'MapController', name: mcName, uid: mc.metadata.uid ?? '' }, []),
        Date.now(),
        ctx,
      );
      const key: SyncKey = {
        cluster,
        group: GROUP,
        kind: parent.kind ?? '',
        namespace: parent.metadata.namespace,
        name: parent.metadata.name ?? '',
        uid: parent.metadata.uid ?? '',
      };
      await serveMapRequest(makeSyncRequest(key, []), Date.now(), ctx);
    },
  };
}

test('controllerSelector: each of two deployments serves the controllers its selector matches and never touches the other', async () => {
  const admin = adminClient();
  const ns = await createNamespace('selector');
  const moved = uniqueName('moved');
  const stays = uniqueName('stays');
  await applyManifests(
    admin,
    impersonatedAccount(ns, 'mover', [
      `{ apiGroups: ["${GROUP}"], resources: ["movedboards", "stayboards"], verbs: ["get", "list", "watch"] }`,
      `{ apiGroups: ["${GROUP}"], resources: ["movedboards/status", "stayboards/status"], verbs: ["patch"] }`,
      `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
    ]),
  );
  // One controller moved to Outrigger, one still Metacontroller's.
  await applyManifests(
    admin,
    controller(moved, 'movedboards', 'outrigger', ns) + '---' + controller(stays, 'stayboards', 'metacontroller', ns),
  );
  try {
    const parents: Record<string, KubeObject> = {};
    for (const kind of ['Movedboard', 'Stayboard'] as const)
      parents[kind] = await admin.create(kinds[kind], {
        apiVersion: `${GROUP}/v1`,
        kind,
        metadata: { name: kind.toLowerCase(), namespace: ns },
        spec: { selector: { matchLabels: { board: 'x' } } },
      } as KubeObject);
    await admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'in', namespace: ns, labels: { board: 'x' } },
    } as KubeObject);
    const stayed = async () => ({
      controller: (await admin.get(mapControllers, { name: stays })).status,
      parent: (await admin.get(kinds.Stayboard, { name: 'stayboard', namespace: ns })).status,
      output: await admin.find(configMaps, { name: 'stayboard-out', namespace: ns }),
    });

    const outrigger = deployment('example.com/engine=outrigger');
    expect(await outrigger.routed()).toContain('Movedboard');
    expect(await outrigger.routed()).not.toContain('Stayboard');
    await outrigger.serve(moved, parents.Movedboard!);
    await outrigger.serve(stays, parents.Stayboard!);
    expect(calls).toEqual(['Movedboard']);
    expect(await admin.find(configMaps, { name: 'movedboard-out', namespace: ns })).toBeDefined();
    expect((await admin.get(mapControllers, { name: moved })).status).toMatchObject({ conditions: [{ type: 'Ready', status: 'True' }] });
    // Left alone: no status on the controller or its parent, no output.
    expect(await stayed()).toEqual({ controller: undefined, parent: undefined, output: undefined });

    // A second deployment with the other selector serves the other one, and leaves the first as it was.
    const movedBefore = await admin.get(mapControllers, { name: moved });
    const other = deployment('example.com/engine in (metacontroller)');
    expect(await other.routed()).toContain('Stayboard');
    expect(await other.routed()).not.toContain('Movedboard');
    await other.serve(moved, parents.Movedboard!);
    await other.serve(stays, parents.Stayboard!);
    expect(calls).toEqual(['Movedboard', 'Stayboard']);
    expect((await admin.get(mapControllers, { name: moved })).metadata.resourceVersion).toBe(movedBefore.metadata.resourceVersion);
    expect((await stayed()).output).toBeDefined();
  } finally {
    for (const name of [moved, stays]) await admin.delete(mapControllers, { name }).catch(() => undefined);
  }
});
