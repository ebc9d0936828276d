// The forwarder's memory is bounded by budgets, not by the size of what it watches (docs/operations/forwarder.md#memory):
// 2,000 objects with 200 KB annotations each (400 MB in all), listed by a forwarder process started with the
// deployed heap limit (deploy/forwarder/base), under its ServiceAccount: it does not crash, every object's event
// reaches the queue, and its peak resident set stays under the container's memory limit (512 Mi).
import { join } from 'node:path';
import { projectRoot } from '../../local/paths.ts';
import { FORWARDER_NAMESPACE, deploymentEnv, forwarderKubeconfig, renderKustomize } from '../testbed/forwarder.ts';
import { createAnnotated, forwardAll } from '../testbed/forwarder-memory.ts';
import { Resources } from '../../shared/kube/index.ts';
import { adminClient, createNamespace, testbed, testQueue, uniqueName } from '../testbed/index.ts';

const COUNT = 2_000;
const BYTES = 200_000;

test('2,000 objects with 200 KB annotations: the forwarder, under its deployed heap limit, delivers every event without crashing', async () => {
  const ns = await createNamespace('fwd-mem');
  const queue = await testQueue('fwd-mem');
  const objects = await renderKustomize(join(projectRoot, 'deploy', 'forwarder', 'base'));
  const deployed = deploymentEnv(objects, { name: 'fwd-mem', namespace: FORWARDER_NAMESPACE });
  expect(deployed.NODE_OPTIONS).toMatch(/--max-old-space-size=384\b/);
  const env = {
    ...deployed,
    KUBECONFIG: await forwarderKubeconfig(objects),
    OUTRIGGER_CLUSTER_ID: 'it',
    OUTRIGGER_EVENT_QUEUE_URL: queue.url,
    OUTRIGGER_SQS_ENDPOINT: testbed().sqsEndpoint,
    OUTRIGGER_NAMESPACE: ns,
    OUTRIGGER_LEADER_ELECTION_LEASE: uniqueName('fwd-lease'),
    OUTRIGGER_CHECKPOINT_CONFIGMAP: uniqueName('fwd-checkpoint'),
  };
  const created = Date.now();
  await createAnnotated(adminClient(), ns, COUNT, BYTES);
  const createdMs = Date.now() - created;
  try {
    const run = await forwardAll({ env, queue, count: COUNT, timeoutMs: 240_000 });
    process.stdout.write(
      `[forwarder-memory] ${COUNT} objects of ${BYTES} bytes created in ${createdMs} ms; ${run.delivered}/${COUNT} delivered in ${run.ms} ms; peak RSS ${run.peakRssMiB} MiB${run.crashed ? `; crashed (${run.crashed})` : ''}\n`,
    );
    if (run.crashed || run.delivered < COUNT)
      throw new Error(`${run.delivered}/${COUNT} delivered, ${run.crashed ?? 'no crash'}:\n${run.log.slice(-4000)}`);
    expect(run.peakRssMiB).toBeLessThan(512);
  } finally {
    // 400 MB of objects leave etcd with the namespace, not at the end of the run.
    await adminClient().delete(Resources.namespaces, { name: ns });
  }
}, 600_000);
