// A CompositeController's rolling update on the real apiserver (docs/controllers/compositecontroller.md#rolling-updates):
// a parent with three children under RollingInPlace and a Ready status check, its revisioned field changed, the
// children moving one per pass, a child failing its check pausing the rollout and its fix resuming it, and
// `outrigger history` (`kubectl outrigger history`) listing the parent's revisions. The children are a custom kind
// whose status this test writes (Pods never run on this bed); passes are run as the controller's ServiceAccount,
// the hook a real HTTP server in this process.
/* eslint-disable max-lines -- the four rolling scenarios share one hook server and the CRDs, grants and ServiceAccount applied once in beforeAll */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { historyCommand } from '../../cli/history.ts';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { actingAs, definitionsFor, listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { syncDefinition } from '../../functions/composite/sync.ts';
import { REVISION_LABEL } from '../../shared/composite/rollout.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, Resources, type GVR, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { adminClient, createNamespace, eventually, outriggerClient, startTestRuntime } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'rolling.outrigger.test';
const fleets = gvr(GROUP, 'v1', 'fleets');
const convoys = gvr(GROUP, 'v1', 'convoys');
const armadas = gvr(GROUP, 'v1', 'armadas');
const flotillas = gvr(GROUP, 'v1', 'flotillas');
const gadgets = gvr(GROUP, 'v1', 'gadgets');
const SA = { namespace: 'outrigger-rolling-tests', name: 'roller' };

/** The hook: three Gadgets, each with the parent's image; the status counts what it was sent. */
const asked: string[] = [];
function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { parent: KubeObject; children: Record<string, object> };
    const image = (body.parent.spec as { image: string }).image;
    asked.push(image);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        status: { gadgets: Object.keys(body.children[`Gadget.${GROUP}/v1`] ?? {}).length },
        children: ['g-0', 'g-1', 'g-2'].map((name) => ({
          apiVersion: `${GROUP}/v1`,
          kind: 'Gadget',
          metadata: { name },
          spec: { image },
        })),
      }),
    );
  });
}

let server: Server;
let set: CompositeSet;

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'Fleet', 'fleets')}---${openCrd(GROUP, 'Convoy', 'convoys')}---${openCrd(GROUP, 'Armada', 'armadas')}---${openCrd(GROUP, 'Flotilla', 'flotillas')}---${openCrd(GROUP, 'Gadget', 'gadgets')}---
${controllersGrant('outrigger-rolling-test', [
  // What the forwarder watches, as Outrigger (the passes act as the ServiceAccount below).
  `{ apiGroups: ["${GROUP}"], resources: ["fleets", "convoys", "armadas", "gadgets"], verbs: ["get", "list", "watch"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${SA.namespace} }
---
${impersonatedAccount(
  SA.namespace,
  SA.name,
  [
    `{ apiGroups: ["${GROUP}"], resources: ["fleets", "convoys", "armadas"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["fleets/status", "convoys/status", "armadas/status"], verbs: ["patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["gadgets"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
    `{ apiGroups: ["apps"], resources: ["controllerrevisions"], verbs: ["get", "list", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/*',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: fleet-controller }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: fleets
    revisionHistory: { fieldPaths: [spec.image] }
  childResources:
  - apiVersion: ${GROUP}/v1
    resource: gadgets
    updateStrategy:
      method: RollingInPlace
      statusChecks:
        conditions: [{ type: Ready, status: "True" }]
  hooks:
    sync: { webhook: { url: "${url}/sync", timeout: 5s } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: convoy-controller, labels: { outrigger.test/runtime: rolling } }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: convoys
    revisionHistory: { fieldPaths: [spec.image] }
  childResources:
  - apiVersion: ${GROUP}/v1
    resource: gadgets
    updateStrategy:
      method: RollingInPlace
      statusChecks:
        conditions: [{ type: Ready, status: "True" }]
  hooks:
    sync: { webhook: { url: "${url}/sync", timeout: 5s } }
---
${impersonatedAccount(
  SA.namespace,
  'no-revisions',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["flotillas"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["flotillas/status"], verbs: ["patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["gadgets"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/*',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: flotilla-controller }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: no-revisions }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: flotillas }
  childResources:
  - apiVersion: ${GROUP}/v1
    resource: gadgets
    updateStrategy: { method: RollingInPlace }
  hooks:
    sync: { webhook: { url: "${url}/sync", timeout: 5s } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: armada-controller }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: armadas
    revisionHistory: { fieldPaths: [spec.image] }
  childResources:
  - apiVersion: ${GROUP}/v1
    resource: gadgets
    updateStrategy:
      method: RollingRecreate
      statusChecks:
        conditions: [{ type: Ready, status: "True" }]
  hooks:
    sync: { webhook: { url: "${url}/sync", timeout: 5s } }
`,
  );
  const kube = outriggerClient();
  const cache = clusterCache<CompositeSet>(0);
  for (let i = 0; ; i += 1) {
    forgetDiscovery(kube);
    set = await listCompositeSet(kube, 'it', cache);
    if (
      set.composites.filter((c) => ['fleet-controller', 'convoy-controller', 'armada-controller', 'flotilla-controller'].includes(c.name))
        .length === 4
    )
      break;
    if (i > 100) throw new Error(`the CompositeController is not served: ${JSON.stringify(set.invalid)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  for (const name of ['fleet-controller', 'convoy-controller', 'armada-controller', 'flotilla-controller'])
    await adminClient()
      .delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name })
      .catch(() => undefined);
  await new Promise<void>((r) => server.close(() => r()));
});

const hooks = new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
/** The parent's Updated condition. */
const updatedOf = async (resource: GVR, name: string, namespace: string) =>
  (
    (await adminClient().get(resource, { name, namespace })).status as { conditions?: Array<Record<string, string>> } | undefined
  )?.conditions?.find((c) => c.type === 'Updated');
/** A pass for the parent, run by hand as its controller's ServiceAccount. */
const passOf = (kind: string, parent: KubeObject) => () => {
  const [d] = definitionsFor(set, GROUP, kind);
  return syncDefinition({ kube: actingAs(outriggerClient(), d!), hooks }, d!, {
    cluster: 'it',
    group: GROUP,
    kind,
    namespace: parent.metadata.namespace,
    name: parent.metadata.name!,
    uid: parent.metadata.uid!,
  });
};

describe('a CompositeController rolling its children in place', () => {
  test('children move one per pass; a failing status check pauses the rollout, its fix resumes it; history lists the revisions', async () => {
    const admin = adminClient();
    const ns = await createNamespace('rolling');
    const parent = await admin.create(fleets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Fleet',
      metadata: { name: 'f', namespace: ns },
      spec: { image: 'a', replicas: 3 },
    } as KubeObject);
    const pass = passOf('Fleet', parent);
    const images = async () =>
      Object.fromEntries(
        (await admin.listAll(gadgets, { namespace: ns })).map((g) => [g.metadata.name, (g.spec as { image: string }).image]),
      );
    const updated = () => updatedOf(fleets, 'f', ns);
    const setReady = (name: string, ok: boolean) =>
      admin.patch(
        gadgets,
        { name, namespace: ns, subresource: 'status' },
        { status: { conditions: [{ type: 'Ready', status: ok ? 'True' : 'False' }] } },
        'merge',
      );
    const revisions = async () =>
      (await admin.listAll(Resources.controllerRevisions, { namespace: ns })).map((r) => r.metadata.name!).sort();

    // The first pass: a revision of spec.image, the three children created on it.
    expect(await pass()).toMatchObject({ problems: [], created: 3 });
    const [first] = await revisions();
    expect(await revisions()).toHaveLength(1);
    for (const g of await admin.listAll(gadgets, { namespace: ns })) expect(g.metadata.labels?.[REVISION_LABEL]).toBe(first);
    for (const name of ['g-0', 'g-1', 'g-2']) await setReady(name, true);
    expect(await pass()).toMatchObject({ problems: [], created: 0, updated: 0 });
    expect(await updated()).toMatchObject({ status: 'True', reason: 'OnLatestRevision' });

    // A new image: a second revision; the hook is asked for both; one child moves.
    await admin.patch(fleets, { name: 'f', namespace: ns }, { spec: { image: 'b' } }, 'merge');
    asked.length = 0;
    expect(await pass()).toMatchObject({ problems: [], updated: 1, hookCalls: 2 });
    expect(asked.sort()).toEqual(['a', 'b']);
    expect(await images()).toEqual({ 'g-0': 'b', 'g-1': 'a', 'g-2': 'a' });
    expect(await revisions()).toHaveLength(2);
    expect(await updated()).toMatchObject({ status: 'False', reason: 'RolloutProgressing' });

    // The moved child fails its check: the rollout waits, pass after pass.
    await setReady('g-0', false);
    for (let i = 0; i < 2; i += 1) expect(await pass()).toMatchObject({ problems: [], updated: 0 });
    expect(await images()).toEqual({ 'g-0': 'b', 'g-1': 'a', 'g-2': 'a' });
    expect(await updated()).toMatchObject({
      status: 'False',
      reason: 'RolloutWaiting',
      message: 'Gadget g-0 fails its status check: condition Ready is not "True"',
    });

    // Fixed: the rollout resumes, one child per pass, and ends on the latest revision.
    await setReady('g-0', true);
    expect(await pass()).toMatchObject({ problems: [], updated: 1 });
    expect(await images()).toEqual({ 'g-0': 'b', 'g-1': 'b', 'g-2': 'a' });
    expect(await pass()).toMatchObject({ problems: [], updated: 1 });
    expect(await images()).toEqual({ 'g-0': 'b', 'g-1': 'b', 'g-2': 'b' });
    asked.length = 0;
    expect(await pass()).toMatchObject({ problems: [], updated: 0, hookCalls: 1 });
    expect(asked).toEqual(['b']);
    expect(await updated()).toMatchObject({ status: 'True', reason: 'OnLatestRevision' });

    // `kubectl outrigger history fleet/f`: both revisions, the second current.
    const listed = JSON.parse(await historyCommand(admin, 'fleet/f', ns, { output: 'json' })) as {
      revisions: Array<{ revision: number; current: boolean }>;
    };
    expect(listed.revisions.map((r) => [r.revision, r.current])).toEqual([
      [1, false],
      [2, true],
    ]);
    expect(await historyCommand(admin, 'fleet/f', ns)).toMatch(/^fleet\/f\nREVISION +NAME +CURRENT/);
  }, 60_000);
});

describe('a rolling CompositeController in the local runtime', () => {
  test("the children's own events drive the rollout: each moved child holds it until it reports its new generation Ready", async () => {
    const ns = await createNamespace('rolling-rt');
    const logs: string[] = [];
    // Its runtime serves its own definition only (controllerSelector): another file's MapController or
    // CompositeController, whose hook counts its calls, is that file's to serve.
    const runtime = await startTestRuntime('rolling', ['router', 'map'], {
      namespace: ns,
      controllerSelector: 'outrigger.test/runtime=rolling',
      log: (m) => logs.push(m),
    });
    const admin = adminClient();
    const gadget = (name: string) => admin.get(gadgets, { name, namespace: ns });
    const image = async (name: string) => ((await gadget(name)).spec as { image: string }).image;
    /** As the Gadgets' own controller would: the generation seen, Ready. */
    const observe = async (name: string) => {
      const g = await gadget(name);
      await admin.patch(
        gadgets,
        { name, namespace: ns, subresource: 'status' },
        { status: { observedGeneration: g.metadata.generation, conditions: [{ type: 'Ready', status: 'True' }] } },
        'merge',
      );
    };
    const updated = () => updatedOf(convoys, 'c', ns);
    try {
      await admin.create(convoys, {
        apiVersion: `${GROUP}/v1`,
        kind: 'Convoy',
        metadata: { name: 'c', namespace: ns },
        spec: { image: 'a' },
      } as KubeObject);
      await eventually(async () => ((await admin.listAll(gadgets, { namespace: ns })).length === 3 ? true : undefined), 30_000);
      for (const name of ['g-0', 'g-1', 'g-2']) await observe(name);
      await eventually(async () => ((await updated())?.reason === 'OnLatestRevision' ? true : undefined), 30_000);

      await admin.patch(convoys, { name: 'c', namespace: ns }, { spec: { image: 'b' } }, 'merge');
      for (const [i, name] of ['g-0', 'g-1'].entries()) {
        // Moved, then waiting on it: its status has not seen its new generation.
        await eventually(async () => {
          const u = await updated();
          return (await image(name)) === 'b' &&
            u?.reason === 'RolloutWaiting' &&
            u.message === `Gadget ${name} has not observed its latest spec`
            ? true
            : undefined;
        }, 30_000);
        for (const later of ['g-0', 'g-1', 'g-2'].slice(i + 1)) expect(await image(later)).toBe('a');
        await observe(name);
      }
      // The last one moved, every child is on the latest revision (as Metacontroller reports it, whatever its status).
      await eventually(
        async () => ((await image('g-2')) === 'b' && (await updated())?.reason === 'OnLatestRevision' ? true : undefined),
        30_000,
      );
      expect(await Promise.all(['g-0', 'g-1', 'g-2'].map(image))).toEqual(['b', 'b', 'b']);
    } catch (err) {
      // The runtime's log says which step of the pipeline stopped short.
      const state = JSON.stringify({
        convoy: (await admin.find(convoys, { name: 'c', namespace: ns }))?.status,
        gadgets: (await admin.listAll(gadgets, { namespace: ns })).map((g) => [
          g.metadata.name,
          g.metadata.generation,
          g.metadata.labels,
          g.spec,
          g.status,
        ]),
      });
      throw new Error(`${(err as Error).message}\n${state}\n${logs.slice(-10).join('\n')}`);
    } finally {
      await runtime.stop();
    }
  }, 180_000);
});

describe('a CompositeController rolling its children by recreating them', () => {
  test('a recreated child holds the rollout until Ready; the parent set back rolls back one child at a time; no revision is changed', async () => {
    const admin = adminClient();
    const ns = await createNamespace('rolling-rc');
    const parent = await admin.create(armadas, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Armada',
      metadata: { name: 'x', namespace: ns },
      spec: { image: 'a' },
    } as KubeObject);
    const pass = passOf('Armada', parent);
    const listed = () => admin.listAll(gadgets, { namespace: ns });
    const images = async () => Object.fromEntries((await listed()).map((g) => [g.metadata.name, (g.spec as { image: string }).image]));
    const uids = async () => Object.fromEntries((await listed()).map((g) => [g.metadata.name, g.metadata.uid]));
    const ready = (name: string) =>
      admin.patch(
        gadgets,
        { name, namespace: ns, subresource: 'status' },
        { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
        'merge',
      );
    const updated = () => updatedOf(armadas, 'x', ns);

    expect(await pass()).toMatchObject({ problems: [], created: 3 });
    for (const name of ['g-0', 'g-1', 'g-2']) await ready(name);
    const before = await uids();
    await admin.patch(armadas, { name: 'x', namespace: ns }, { spec: { image: 'b' } }, 'merge');
    expect(await pass()).toMatchObject({ problems: [], recreated: 1, updated: 0 });
    expect(await images()).toEqual({ 'g-0': 'b', 'g-1': 'a', 'g-2': 'a' });
    expect((await uids())['g-0']).not.toBe(before['g-0']);
    // The new g-0 has no status yet: the rollout waits.
    expect(await pass()).toMatchObject({ problems: [], recreated: 0 });
    expect(await updated()).toMatchObject({
      reason: 'RolloutWaiting',
      message: 'Gadget g-0 fails its status check: condition Ready is missing',
    });
    const revisions = (await admin.listAll(Resources.controllerRevisions, { namespace: ns })).map((r) => [
      r.metadata.name,
      r.metadata.resourceVersion,
    ]);
    expect(revisions).toHaveLength(2);

    // Set back: revision 1 is the latest again; g-0, the one child on revision 2, goes back (the others are Ready).
    await admin.patch(armadas, { name: 'x', namespace: ns }, { spec: { image: 'a' } }, 'merge');
    expect(await pass()).toMatchObject({ problems: [], recreated: 1, hookCalls: 2 });
    expect(await images()).toEqual({ 'g-0': 'a', 'g-1': 'a', 'g-2': 'a' });
    expect(await pass()).toMatchObject({ problems: [], recreated: 0, updated: 0, hookCalls: 1 });
    expect(await updated()).toMatchObject({ status: 'True', reason: 'OnLatestRevision' });
    // Never changed, and both kept (revision 2 for history); `outrigger history` marks revision 1 current.
    expect(
      (await admin.listAll(Resources.controllerRevisions, { namespace: ns })).map((r) => [r.metadata.name, r.metadata.resourceVersion]),
    ).toEqual(revisions);
    const history = JSON.parse(await historyCommand(admin, 'armada/x', ns, { output: 'json' })) as {
      revisions: Array<{ revision: number; current: boolean }>;
    };
    expect(history.revisions.map((r) => [r.revision, r.current])).toEqual([
      [1, true],
      [2, false],
    ]);
  }, 60_000);
});

describe('the ServiceAccount boundary (rolling updates)', () => {
  test('an account that may not list ControllerRevisions gets a Forbidden problem naming the grant, and no child is written', async () => {
    const admin = adminClient();
    const ns = await createNamespace('rolling-sa');
    const parent = await admin.create(flotillas, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Flotilla',
      metadata: { name: 'y', namespace: ns },
      spec: { image: 'a' },
    } as KubeObject);
    const result = await passOf('Flotilla', parent)();
    expect(result).toMatchObject({ created: 0, hookCalls: 0 });
    expect(result.problems).toEqual([
      {
        reason: 'Forbidden',
        message: "the controller's ServiceAccount may not list controllerrevisions.apps (rolling updates keep the parent's revisions)",
        detail: expect.any(String),
      },
    ]);
    expect(await admin.listAll(gadgets, { namespace: ns })).toEqual([]);
  }, 30_000);
});
