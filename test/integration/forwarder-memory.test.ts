// The forwarder's memory is bounded by budgets, not by the size of what it watches (docs/operations/forwarder.md#memory):
// 2,000 objects with 200 KB annotations each (400 MB in all), listed by a forwarder process started with the
// deployed heap limit (deploy/forwarder/base), under its ServiceAccount: it does not crash, every object's event
// reaches the queue, and its peak resident set stays under the container's memory limit (512 Mi). On an
// apiserver of its own: the shared bed has no namespace controller, so its 400 MB would stay in the shared etcd
// for the rest of the run, and every cluster-wide list of ControllerRevisions by the files running beside it
// would carry them.
import { join } from 'node:path';
import { startTestCluster, type TestCluster } from '../../local/apiserver.ts';
import { projectRoot } from '../../local/paths.ts';
import { clusterManifests } from '../../local/testbed.ts';
import { FORWARDER_NAMESPACE, deploymentEnv, forwarderKubeconfig, renderKustomize } from '../testbed/forwarder.ts';
import { createAnnotated, forwardAll } from '../testbed/forwarder-memory.ts';
import { connect, Resources, type KubeClient } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { testbed, testQueue, uniqueName } from '../testbed/index.ts';

const COUNT = 2_000;
const BYTES = 200_000;

let cluster: TestCluster;
let admin: KubeClient;

beforeAll(async () => {
  cluster = await startTestCluster({});
  admin = connect({ kind: 'kubeconfig', path: cluster.kubeconfigs.admin });
  await applyManifests(admin, await clusterManifests());
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

test('2,000 objects with 200 KB annotations: the forwarder, under its deployed heap limit, delivers every event without crashing', async () => {
  const ns = uniqueName('fwd-mem');
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const queue = await testQueue('fwd-mem');
  const objects = await renderKustomize(join(projectRoot, 'deploy', 'forwarder', 'base'));
  const deployed = deploymentEnv(objects, { name: 'fwd-mem', namespace: FORWARDER_NAMESPACE });
  expect(deployed.NODE_OPTIONS).toMatch(/--max-old-space-size=384\b/);
  const env = {
    ...deployed,
    KUBECONFIG: await forwarderKubeconfig(objects, cluster),
    OUTRIGGER_CLUSTER_ID: 'it',
    OUTRIGGER_EVENT_QUEUE_URL: queue.url,
    OUTRIGGER_SQS_ENDPOINT: testbed().sqsEndpoint,
    OUTRIGGER_NAMESPACE: ns,
    OUTRIGGER_LEADER_ELECTION_LEASE: uniqueName('fwd-lease'),
    OUTRIGGER_CHECKPOINT_CONFIGMAP: uniqueName('fwd-checkpoint'),
  };
  const created = Date.now();
  await createAnnotated(admin, ns, COUNT, BYTES);
  const createdMs = Date.now() - created;
  const run = await forwardAll({ env, queue, count: COUNT, timeoutMs: 240_000 });
  process.stdout.write(
    `[forwarder-memory] ${COUNT} objects of ${BYTES} bytes created in ${createdMs} ms; ${run.delivered}/${COUNT} delivered in ${run.ms} ms; peak RSS ${run.peakRssMiB} MiB${run.crashed ? `; crashed (${run.crashed})` : ''}\n`,
  );
  if (run.crashed || run.delivered < COUNT)
    throw new Error(`${run.delivered}/${COUNT} delivered, ${run.crashed ?? 'no crash'}:\n${run.log.slice(-4000)}`);
  expect(run.peakRssMiB).toBeLessThan(512);
}, 600_000);
