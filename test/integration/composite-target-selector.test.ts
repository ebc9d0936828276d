// One controller at a time for CompositeControllers and DecoratorControllers (docs/reference/configuration.md#clustersjson):
// a cluster's `controllerSelector` chooses which definitions a deployment serves, as Metacontroller's
// --target-label-selector. Two deployments with two selectors on the real apiserver: each serves its own
// definition and never touches the other's (no hook call, no write naming it or its parents, no routing of its
// kinds). What each deployment does is observed on its own hook caller and its own client, so another file's
// local runtime, which serves every definition, may run beside this file (it needs no bed of its own).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import {
  compositeControllers,
  compositeSource,
  decoratorControllers,
  listCompositeSet,
  type CompositeSet,
} from '../../functions/composite/controllers.ts';
import { serveCompositeRequest } from '../../functions/composite/serve.ts';
import { Hooks, type HookCaller } from '../../shared/hooks/index.ts';
import { gvr, type GVR, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { adminClient, createNamespace, outriggerClient, testCluster, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite-selector.outrigger.test';
const kinds = { Movedset: gvr(GROUP, 'v1', 'movedsets'), Stayset: gvr(GROUP, 'v1', 'staysets') };

let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const r = JSON.parse(body) as { parent?: KubeObject; object?: KubeObject };
      // A CompositeController's request names the parent, a DecoratorController's (v1) the object.
      const answer = r.parent
        ? { children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${r.parent.metadata.name ?? ''}-child` }, data: {} }] }
        : { labels: { decorated: 'yes' } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sync`;
  await applyManifests(adminClient(), [openCrd(GROUP, 'Movedset', 'movedsets'), openCrd(GROUP, 'Stayset', 'staysets')].join('---\n'));
}, 120_000);

afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** A client that records every write it (or a client it impersonates with) makes: `<verb> <resource> <name>`. */
function recording(kube: KubeClient, writes: string[]): KubeClient {
  return new Proxy(kube, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop === 'as') return (user: Parameters<KubeClient['as']>[0]) => recording(target.as(user), writes);
      if (typeof value !== 'function') return value;
      if (prop === 'create' || prop === 'patch' || prop === 'delete' || prop === 'update')
        return (resource: GVR, ref: { name?: string; metadata?: { name?: string } }, ...rest: unknown[]) => {
          writes.push(`${prop} ${resource.resource} ${ref.name ?? ref.metadata?.name ?? ''}`);
          return (value as (...a: unknown[]) => unknown).call(target, resource, ref, ...rest);
        };
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

/** A deployment serving one cluster with a selector, its hook calls (the parent's kind) and writes recorded. */
function deployment(selector: string) {
  const cluster = uniqueName('csel');
  const calls: string[] = [];
  const writes: string[] = [];
  const inner = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
  const hooks: HookCaller = {
    call: (hook, request, opts) => {
      const r = request as { parent?: KubeObject; object?: KubeObject };
      calls.push((r.parent ?? r.object)?.kind ?? '');
      return inner.call(hook, request, opts);
    },
  };
  const ctx = {
    kube: recording(outriggerClient(), writes),
    state: testState(),
    syncSink: { send: () => Promise.resolve() },
    hooks,
    controllers: clusterCache<CompositeSet>(5_000),
    controllerSelector: selector,
    log: () => undefined,
  };
  const key = (o: KubeObject, group: string) => ({
    cluster,
    group,
    kind: o.kind ?? '',
    namespace: o.metadata.namespace,
    name: o.metadata.name ?? '',
    uid: o.metadata.uid ?? '',
  });
  return {
    calls,
    writes,
    served: async () => {
      const set = await listCompositeSet(outriggerClient(), `${cluster}-list`, clusterCache<CompositeSet>(0), selector);
      return [...set.composites, ...set.decorators].map((d) => d.name);
    },
    routed: async () =>
      (await compositeSource.kinds({ ...testCluster(cluster), controllerSelector: selector }, outriggerClient())).map((k) => k.kind),
    /** A definition's request (its Ready, its parents queued), then its parent's. */
    serve: async (definition: KubeObject, parent: KubeObject) => {
      await serveCompositeRequest(makeSyncRequest(key(definition, 'metacontroller.k8s.io'), []), Date.now(), ctx);
      await serveCompositeRequest(makeSyncRequest(key(parent, GROUP), []), Date.now(), ctx);
    },
  };
}

test('controllerSelector: each of two deployments serves the CompositeControllers and DecoratorControllers its selector matches and never touches the other', async () => {
  const admin = adminClient();
  const ns = await createNamespace('cselector');
  const moved = uniqueName('moved');
  const stays = uniqueName('stays');
  await applyManifests(
    admin,
    impersonatedAccount(
      ns,
      'mover',
      [
        `{ apiGroups: ["${GROUP}"], resources: ["movedsets", "staysets"], verbs: ["get", "list", "watch", "patch"] }`,
        `{ apiGroups: ["${GROUP}"], resources: ["movedsets/status", "staysets/status"], verbs: ["patch"] }`,
        `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
      ],
      'compositecontroller/*, decoratorcontroller/*',
    ),
  );
  // A CompositeController moved to Outrigger; a DecoratorController still Metacontroller's.
  await applyManifests(
    admin,
    `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${moved}, labels: { example.com/engine: outrigger } }
spec:
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: movedsets }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: mover }
  hooks: { sync: { webhook: { url: "${url}" }, retries: 0 } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: ${stays}, labels: { example.com/engine: metacontroller } }
spec:
  resources: [{ apiVersion: ${GROUP}/v1, resource: staysets }]
  serviceAccount: { namespace: ${ns}, name: mover }
  hooks: { sync: { webhook: { url: "${url}" }, retries: 0 } }
`,
  );
  try {
    const parents: Record<string, KubeObject> = {};
    for (const kind of ['Movedset', 'Stayset'] as const)
      parents[kind] = {
        ...(await admin.create(kinds[kind], {
          apiVersion: `${GROUP}/v1`,
          kind,
          metadata: { name: kind.toLowerCase(), namespace: ns },
          spec: {},
        } as KubeObject)),
        kind,
      };
    const definitions = {
      moved: { ...(await admin.get(compositeControllers, { name: moved })), kind: 'CompositeController' },
      stays: { ...(await admin.get(decoratorControllers, { name: stays })), kind: 'DecoratorController' },
    };
    const touches = (writes: string[], name: string, parent: string) =>
      writes.filter((w) => w.endsWith(` ${name}`) || w.endsWith(` ${parent}`) || w.endsWith(` ${parent}-child`));

    const outrigger = deployment('example.com/engine=outrigger');
    expect(await outrigger.served()).toEqual([moved]);
    expect(await outrigger.routed()).toContain('Movedset');
    expect(await outrigger.routed()).not.toContain('Stayset');
    await outrigger.serve(definitions.moved, parents.Movedset!);
    await outrigger.serve(definitions.stays, parents.Stayset!);
    expect(outrigger.calls).toEqual(['Movedset']);
    expect(await admin.find(gvr('', 'v1', 'configmaps'), { name: 'movedset-child', namespace: ns })).toBeDefined();
    expect(touches(outrigger.writes, moved, 'movedset').length).toBeGreaterThan(0);
    // Left alone: no write naming the decorator, its object or anything for it.
    expect(touches(outrigger.writes, stays, 'stayset')).toEqual([]);

    // The other selector (set-based) serves the other definition, and leaves the first alone.
    const other = deployment('example.com/engine in (metacontroller)');
    expect(await other.served()).toEqual([stays]);
    expect(await other.routed()).toContain('Stayset');
    expect(await other.routed()).not.toContain('Movedset');
    await other.serve(definitions.moved, parents.Movedset!);
    await other.serve(definitions.stays, parents.Stayset!);
    expect(other.calls).toEqual(['Stayset']);
    expect(touches(other.writes, moved, 'movedset')).toEqual([]);
    expect((await admin.get(kinds.Stayset, { name: 'stayset', namespace: ns })).metadata.labels).toMatchObject({ decorated: 'yes' });
  } finally {
    await admin.delete(compositeControllers, { name: moved }).catch(() => undefined);
    await admin.delete(decoratorControllers, { name: stays }).catch(() => undefined);
  }
});
