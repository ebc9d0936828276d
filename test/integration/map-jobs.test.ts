// A MapController whose output is a Job, on the node bed (docs/contributing/test-beds.md#nodes-and-pods):
// kube-controller-manager's job controller makes the Job's Pods and kwok runs them; when the input goes, the pass
// deletes the Job, and the garbage collector takes its Pods with it (batch/v1 orphans them unless the delete names
// a propagation policy: docs/controllers/mapcontroller.md#a-pass-per-parent).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listMapControllers, mapControllerFor, type ResolvedMapController } from '../../functions/map/controllers.ts';
import type { MapContext } from '../../functions/map/pass.ts';
import { syncMap } from '../../functions/map/sync.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { forgetDiscovery, gvr, Resources, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { DEFAULT_CONTROLLERS, startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { openCrd } from '../testbed/crds.ts';
import { eventually, uniqueName } from '../testbed/index.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';

const GROUP = 'jobs.outrigger.test';
const configMaps = gvr('', 'v1', 'configmaps');
const batches = gvr(GROUP, 'v1', 'batches');
const jobs = gvr('batch', 'v1', 'jobs');
const JOB_NAME_LABEL = 'batch.kubernetes.io/job-name';

let cp: TestControlPlane;
let admin: KubeClient;
let server: Server;
let mc: ResolvedMapController;

/** The map hook: a Job of two always-running Pods per input ConfigMap. */
function answer(body: { input: KubeObject }): unknown {
  return {
    outputs: [
      {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: `${body.input.metadata.name}-job` },
        spec: {
          parallelism: 2,
          completions: 2,
          template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'registry.example/worker:1' }] } },
        },
      },
    ],
  };
}

beforeAll(async () => {
  cp = await startTestControlPlane({ controllers: DEFAULT_CONTROLLERS, nodes: 1 });
  process.stderr.write(
    `[control plane] kube-controller-manager (every default controller), kube-scheduler and 1 kwok node ready in ${cp.startedInMs} ms\n`,
  );
  admin = cp.client('admin');
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { input: KubeObject };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer(body)));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(admin, MAP_TEST_IDENTITY);
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'Batch', 'batches')}---
${controllersGrant('outrigger-map-jobs-test', [
  `{ apiGroups: ["${GROUP}"], resources: ["batches"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["batches/status"], verbs: ["patch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"] }`,
  `{ apiGroups: ["batch"], resources: ["jobs"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
])}---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: jobs-per-configmap }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: ${GROUP}/v1, resource: batches }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: batch/v1, resource: jobs }]
  hooks:
    map: { webhook: { url: "${url}/map" }, timeoutSeconds: 5, retries: 0 }
`,
  );
  const kube = cp.client('outrigger');
  mc = await eventually(async () => {
    forgetDiscovery(kube);
    return mapControllerFor(await listMapControllers(kube, uniqueName('jobs')), GROUP, 'Batch');
  }, 30_000);
}, 900_000); // a cold run may still be building kwok (test/testbed/prebuild.ts)

afterAll(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  await cp?.stop();
});

test('a Job output whose input goes is deleted with its Pods: the garbage collector takes them, none is left orphaned', async () => {
  const ns = uniqueName('jobs');
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  await admin.create(configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'work', namespace: ns, labels: { app: 'work' } },
    data: {},
  } as KubeObject);
  const parent = await admin.create(batches, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Batch',
    metadata: { name: 'nightly', namespace: ns },
    spec: { selector: { matchLabels: { app: 'work' } } },
  } as KubeObject);
  const ctx: MapContext = {
    kube: cp.client('outrigger'),
    hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
  };
  const key = { cluster: 'jobs', group: GROUP, kind: 'Batch', namespace: ns, name: 'nightly', uid: parent.metadata.uid! };
  expect(await syncMap(ctx, mc, key)).toMatchObject({ created: 1, problems: [] });
  // The job controller makes the Job's two Pods; they are scheduled and kwok runs them (to completion: a Job's
  // Pods stay, Succeeded, as long as their Job).
  const running = await eventually(async () => {
    const pods = await admin.listAll(Resources.pods, { namespace: ns, labelSelector: `${JOB_NAME_LABEL}=work-job` });
    return pods.length === 2 && pods.every((p) => (p.spec as { nodeName?: string }).nodeName === 'node-1') ? pods : undefined;
  }, 60_000);
  const job = await admin.get(jobs, { name: 'work-job', namespace: ns });
  expect(running.map((p) => p.metadata.ownerReferences?.[0]?.uid)).toEqual([job.metadata.uid, job.metadata.uid]);

  // The input goes: the pass deletes its Job, and the garbage collector its Pods.
  await admin.delete(configMaps, { name: 'work', namespace: ns });
  expect(await syncMap(ctx, mc, key)).toMatchObject({ deleted: 1, problems: [] });
  await eventually(async () => (await admin.find(jobs, { name: 'work-job', namespace: ns })) === undefined, 60_000);
  await eventually(async () => (await admin.listAll(Resources.pods, { namespace: ns })).length === 0, 60_000);
}, 180_000);
