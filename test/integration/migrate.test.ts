// `outrigger migrate` (docs/getting-started/from-metacontroller.md#moving-one-controller-at-a-time): a
// CompositeController written as Metacontroller's examples write it (no serviceAccount, a CRD beside it), applied
// unchanged, then the command's output applied after it; the local runtime serves it as the account the output made,
// and no other grant: the parent's children, status, finalizer and finalize hook all go through.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrateCommand } from '../../cli/migrate.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, eventually, outriggerClient, startTestRuntime } from '../testbed/index.ts';

const GROUP = 'migrate.outrigger.test';
const greetings = gvr(GROUP, 'v1', 'greetings');
const configMaps = gvr('', 'v1', 'configmaps');
const composites = gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers');
const NAME = 'greeting-controller';
let server: Server;
let url: string;
const finalized: string[] = [];
const logs: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { parent: KubeObject; finalizing?: boolean };
      const name = body.parent.metadata.name ?? '';
      if (body.finalizing) finalized.push(name);
      const answer = body.finalizing
        ? { children: [], finalized: true }
        : {
            status: { greeted: true },
            children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-greeting` }, data: { text: `hello ${name}` } }],
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
    .delete(composites, { name: NAME })
    .catch(() => undefined);
  await new Promise<void>((r) => server.close(() => r()));
});

// As Metacontroller's examples are written: the CRD and the controller, no Outrigger field. The label only keeps other
// test files' runtimes from serving it (controllerSelector).
const manifest = () => `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: greetings.${GROUP}
spec:
  group: ${GROUP}
  names: { kind: Greeting, plural: greetings, singular: greeting }
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: { status: {} }
    schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: ${NAME}
  labels: { outrigger.test/runtime: migrate }
spec:
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: greetings
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: InPlace
  hooks:
    sync:
      webhook:
        url: ${url}/sync
    finalize:
      webhook:
        url: ${url}/finalize
`;

test("a Metacontroller definition applied unchanged runs under the account outrigger migrate's output makes", async () => {
  const accountNs = await createNamespace('migrate-account');
  const ns = await createNamespace('migrate');
  const file = join(mkdtempSync(join(tmpdir(), 'outrigger-migrate-')), 'controller.yaml');
  writeFileSync(file, manifest());
  const admin = adminClient();
  await applyManifests(admin, manifest());
  await applyManifests(admin, await migrateCommand(['-f', file, '--namespace', accountNs]));
  const runtime = await startTestRuntime('migrate', ['router', 'map'], {
    namespace: ns,
    controllerSelector: 'outrigger.test/runtime=migrate',
    log: (m) => logs.push(m),
  });
  try {
    await eventually(async () => {
      const cc = await admin.get(composites, { name: NAME });
      const ready = (cc.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions?.find(
        (c) => c.type === 'Ready',
      );
      return ready?.status === 'True' ? true : undefined;
    }, 30_000);
    const parent = await admin.create(greetings, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Greeting',
      metadata: { name: 'world', namespace: ns },
      spec: {},
    } as KubeObject);
    const child = await eventually(() => admin.find(configMaps, { name: 'world-greeting', namespace: ns }), 30_000);
    expect(controllerOf(child)?.uid).toBe(parent.metadata.uid);
    expect(child.data).toEqual({ text: 'hello world' });
    await eventually(async () => {
      const p = await admin.get(greetings, { name: 'world', namespace: ns });
      return (p.status as { greeted?: boolean } | undefined)?.greeted === true && p.metadata.finalizers?.length ? true : undefined;
    }, 30_000);
    // The status was written as the account: Outrigger's own identity may not.
    const review = await outriggerClient().create(gvr('authorization.k8s.io', 'v1', 'selfsubjectaccessreviews'), {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      metadata: {},
      spec: { resourceAttributes: { group: GROUP, resource: 'greetings', subresource: 'status', verb: 'patch', namespace: ns } },
    } as KubeObject);
    expect((review.status as { allowed?: boolean } | undefined)?.allowed).toBe(false);
    // The finalize hook: the parent goes once it answers finalized.
    await admin.delete(greetings, { name: 'world', namespace: ns });
    await eventually(async () => ((await admin.find(greetings, { name: 'world', namespace: ns })) ? undefined : true), 30_000);
    expect(finalized).toContain('world');
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${logs.slice(-40).join('\n')}`);
  } finally {
    await runtime.stop();
  }
}, 120_000);
