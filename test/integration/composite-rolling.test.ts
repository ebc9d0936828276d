// A CompositeController's rolling update on the real apiserver (docs/controllers/compositecontroller.md#rolling-updates):
// a parent with three children under RollingInPlace and a Ready status check, its revisioned field changed, the
// children moving one per pass, a child failing its check pausing the rollout and its fix resuming it, and
// `outrigger history` (`kubectl outrigger history`) listing the parent's revisions. The children are a custom kind
// whose status this test writes (Pods never run on this bed); passes are run as the controller's ServiceAccount,
// the hook a real HTTP server in this process.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { historyCommand } from '../../cli/history.ts';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { actingAs, definitionsFor, listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { syncDefinition } from '../../functions/composite/sync.ts';
import { REVISION_LABEL } from '../../shared/composite/rollout.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, Resources, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { adminClient, createNamespace, outriggerClient } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'rolling.outrigger.test';
const fleets = gvr(GROUP, 'v1', 'fleets');
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
    `${openCrd(GROUP, 'Fleet', 'fleets')}---${openCrd(GROUP, 'Gadget', 'gadgets')}---
apiVersion: v1
kind: Namespace
metadata: { name: ${SA.namespace} }
---
${impersonatedAccount(
  SA.namespace,
  SA.name,
  [
    `{ apiGroups: ["${GROUP}"], resources: ["fleets"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["fleets/status"], verbs: ["patch"] }`,
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
`,
  );
  const kube = outriggerClient();
  const cache = clusterCache<CompositeSet>(0);
  for (let i = 0; ; i += 1) {
    forgetDiscovery(kube);
    set = await listCompositeSet(kube, 'it', cache);
    if (set.composites.some((c) => c.name === 'fleet-controller')) break;
    if (i > 100) throw new Error(`the CompositeController is not served: ${JSON.stringify(set.invalid)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  await adminClient()
    .delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name: 'fleet-controller' })
    .catch(() => undefined);
  await new Promise<void>((r) => server.close(() => r()));
});

const hooks = new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });

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
    const [d] = definitionsFor(set, GROUP, 'Fleet');
    const pass = () =>
      syncDefinition({ kube: actingAs(outriggerClient(), d!), hooks }, d!, {
        cluster: 'it',
        group: GROUP,
        kind: 'Fleet',
        namespace: ns,
        name: 'f',
        uid: parent.metadata.uid!,
      });
    const images = async () =>
      Object.fromEntries(
        (await admin.listAll(gadgets, { namespace: ns })).map((g) => [g.metadata.name, (g.spec as { image: string }).image]),
      );
    const updated = async () =>
      ((await admin.get(fleets, { name: 'f', namespace: ns })).status as { conditions?: Array<Record<string, string>> }).conditions?.find(
        (c) => c.type === 'Updated',
      );
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
