// bench/forwarder-memory: the forwarder's peak resident memory and time to deliver a first list of large and of
// small objects (docs/operations/forwarder.md#memory), against the local kube-apiserver and ElasticMQ, the forwarder
// run as a process with the deployed heap limit (deploy/forwarder/base). Prints its figures as the last line, in JSON.
//   npm run bench:forwarder-memory [-- --count 2000]
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { localSqsClient } from '../local/elasticmq.ts';
import { projectRoot } from '../local/paths.ts';
import { startTestbed } from '../local/testbed.ts';
import { connect, Resources } from '../shared/kube/index.ts';
import { deploymentEnv, renderKustomize } from '../test/testbed/forwarder.ts';
import { createAnnotated, forwardAll } from '../test/testbed/forwarder-memory.ts';

const { values } = parseArgs({ options: { count: { type: 'string', default: '2000' } } });
const count = Number(values.count);
const log = (m: string) => process.stderr.write(`[bench:forwarder-memory] ${m}\n`);

const bed = await startTestbed({ withCluster: true, withQueues: true, log });
try {
  const kubeconfig = bed.cluster!.kubeconfigs.admin;
  const admin = connect({ kind: 'kubeconfig', path: kubeconfig });
  const sqs = localSqsClient(bed.sqs!.endpoint);
  const deployed = deploymentEnv(await renderKustomize(join(projectRoot, 'deploy', 'forwarder', 'base')), {
    name: 'bench',
    namespace: 'outrigger-system',
  });
  const results: Record<string, { objects: number; bytesEach: number; delivered: number; peakRssMiB: number; ms: number }> = {};
  for (const [label, bytes] of [
    ['200KiB', 200 * 1024],
    ['1KiB', 1024],
  ] as const) {
    const ns = `bench-fwd-mem-${label.toLowerCase()}`;
    await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    log(`creating ${count} objects of ${bytes} bytes in ${ns}`);
    await createAnnotated(admin, ns, count, bytes);
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `${ns}.fifo`, Attributes: { FifoQueue: 'true' } }));
    const run = await forwardAll({
      env: {
        // The deployed heap limit; no Lease or checkpoint (one process), every namespaced watch in this namespace.
        NODE_OPTIONS: deployed.NODE_OPTIONS ?? '',
        KUBECONFIG: kubeconfig,
        OUTRIGGER_CLUSTER_ID: 'bench',
        OUTRIGGER_EVENT_QUEUE_URL: QueueUrl!,
        OUTRIGGER_SQS_ENDPOINT: bed.sqs!.endpoint,
        OUTRIGGER_NAMESPACE: ns,
      },
      queue: { sqs, url: QueueUrl! },
      count,
      timeoutMs: 900_000,
    });
    if (run.crashed) log(`the forwarder crashed (${run.crashed}):\n${run.log.slice(-3000)}`);
    log(`${label}: ${run.delivered}/${count} delivered in ${run.ms} ms, peak RSS ${run.peakRssMiB} MiB`);
    results[label] = { objects: count, bytesEach: bytes, delivered: run.delivered, peakRssMiB: run.peakRssMiB, ms: run.ms };
  }
  process.stdout.write(`${JSON.stringify({ heap: deployed.NODE_OPTIONS, ...results })}\n`);
} finally {
  await bed.stop();
}
