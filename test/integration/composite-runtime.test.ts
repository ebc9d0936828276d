// A CompositeController and a DecoratorController written as Metacontroller's docs write them (plain YAML, webhook
// hooks) plus Outrigger's serviceAccount, run unchanged by the local runtime: the forwarder's watches, the router,
// and the map function serving their parents (docs/controllers/compositecontroller.md#how-a-parent-is-synced).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, eventually, startTestRuntime } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite-runtime.outrigger.test';
const sets = gvr(GROUP, 'v1', 'configsets');
const configMaps = gvr('', 'v1', 'configmaps');
const services = gvr('', 'v1', 'services');
const NS = 'outrigger-composite-runtime';
let server: Server;
let url: string;
const logs: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        parent?: KubeObject;
        object?: KubeObject;
        children?: Record<string, object>;
      };
      // The sync hook of the CompositeController: `spec.copies` ConfigMaps; status counts those it was sent.
      const answer = body.parent
        ? {
            status: { seen: Object.keys(body.children?.['ConfigMap.v1'] ?? {}).length },
            children: Array.from({ length: (body.parent.spec as { copies: number }).copies }, (_, i) => ({
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `${body.parent!.metadata.name ?? ''}-${i}` },
              data: { index: String(i) },
            })),
          }
        : // The DecoratorController's: a Service per labelled ConfigMap.
          {
            labels: { decorated: 'true' },
            attachments: [
              {
                apiVersion: 'v1',
                kind: 'Service',
                metadata: { name: `${body.object!.metadata.name ?? ''}-svc` },
                spec: { ports: [{ port: 80 }] },
              },
            ],
          };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await adminClient()
    .delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name: 'configset-controller' })
    .catch(() => undefined);
  await adminClient()
    .delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'decoratorcontrollers'), { name: 'runtime-decorator' })
    .catch(() => undefined);
  await new Promise<void>((r) => server.close(() => r()));
});

test('the local runtime serves a CompositeController and a DecoratorController from their events', async () => {
  const ns = await createNamespace('cc-runtime');
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'ConfigSet', 'configsets')}---
${controllersGrant('outrigger-composite-runtime-test', [
  // What the forwarder watches, as Outrigger (the passes act as the ServiceAccount below).
  `{ apiGroups: ["${GROUP}"], resources: ["configsets"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: [""], resources: ["configmaps", "services"], verbs: ["list", "watch"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'runner',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["configsets"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["configsets/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps", "services"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/configset-controller, decoratorcontroller/runtime-decorator',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: configset-controller
  labels: { outrigger.test/runtime: composite }
spec:
  serviceAccount: { namespace: ${NS}, name: runner }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: configsets
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      webhook:
        url: ${url}/sync
        timeout: 10s
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: runtime-decorator
  labels: { outrigger.test/runtime: composite }
spec:
  serviceAccount: { namespace: ${NS}, name: runner }
  resources:
  - apiVersion: v1
    resource: configmaps
    labelSelector:
      matchLabels:
        expose: "yes"
  attachments:
  - apiVersion: v1
    resource: services
  hooks:
    sync:
      webhook:
        url: ${url}/decorate
`,
  );
  // Its runtime serves its own definitions only (controllerSelector): other files' definitions, and their hooks,
  // are theirs to serve.
  const runtime = await startTestRuntime('composite', ['router', 'map'], {
    namespace: ns,
    controllerSelector: 'outrigger.test/runtime=composite',
    log: (m) => logs.push(m),
  });
  try {
    const admin = adminClient();
    const parent = await admin.create(sets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'ConfigSet',
      metadata: { name: 'cs', namespace: ns },
      spec: { copies: 2 },
    } as KubeObject);
    const names = async () =>
      (await admin.listAll(configMaps, { namespace: ns }))
        .filter((c) => controllerOf(c)?.uid === parent.metadata.uid && !c.metadata.deletionTimestamp)
        .map((c) => c.metadata.name)
        .sort();
    await eventually(async () => ((await names()).join() === 'cs-0,cs-1' ? true : undefined), 30_000);
    // The children's own events bring the next pass, whose status counts them.
    await eventually(
      async () =>
        ((await admin.get(sets, { name: 'cs', namespace: ns })).status as { seen?: number } | undefined)?.seen === 2 ? true : undefined,
      30_000,
    );
    // A spec change: one copy; the other is deleted.
    await admin.patch(sets, { name: 'cs', namespace: ns }, { spec: { copies: 1 } }, 'merge');
    await eventually(async () => ((await names()).join() === 'cs-0' ? true : undefined), 30_000);
    // A child deleted by hand comes back (its event reaches the parent by ControllerRef).
    await admin.delete(configMaps, { name: 'cs-0', namespace: ns });
    await eventually(async () => {
      const c = await admin.find(configMaps, { name: 'cs-0', namespace: ns });
      return c && !c.metadata.deletionTimestamp ? true : undefined;
    }, 30_000);
    // The decorator: a labelled ConfigMap gets its Service and its label.
    const cm = await admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'web', namespace: ns, labels: { expose: 'yes' } },
      data: {},
    } as KubeObject);
    const svc = await eventually(() => admin.find(services, { name: 'web-svc', namespace: ns }), 30_000);
    expect(controllerOf(svc)?.uid).toBe(cm.metadata.uid);
    await eventually(
      async () => ((await admin.get(configMaps, { name: 'web', namespace: ns })).metadata.labels?.decorated === 'true' ? true : undefined),
      30_000,
    );
  } catch (err) {
    // The runtime's log says which step of the pipeline stopped short.
    throw new Error(`${(err as Error).message}\n${logs.slice(-40).join('\n')}`);
  } finally {
    await runtime.stop();
  }
}, 120_000);
