// bench/pipeline: events per second through the whole local runtime (forwarder → queue → router → queue →
// history handler) against the local kube-apiserver and DynamoDB Local, and a check that none was lost: P
// StatefulSets under a RevisionPolicy each get U template changes as fast as the apiserver takes them; the run
// ends when every StatefulSet's final template has its revision (handlers are level-triggered: a template that
// was replaced before its parent was synced is rightly never recorded). Prints its figures as the last line,
// in JSON. Then the cost of what is not a parent: 1,000 status changes of pods a StatefulSet owns (readiness
// flapping), with the forwarder sending children as metadata only (as it does) and, for comparison, whole:
// events-queue messages, bytes and router invocations per 1,000 changes.
//   npm run bench:pipeline [-- --parents 50 --updates 5 --pods 50 --status-changes 1000]
// With --churn, instead: the pipeline on the nodes-and-pods bed under bench/churn.ts's churn, and what it spends
// per minute of that cluster's life (bench/pipeline-churn.ts):
//   npm run bench:pipeline -- --churn [--nodes 3 --pods 30 --parents 5 --pod-changes-per-minute 600
//     --spec-changes-per-minute 10 --minutes 2]
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { functions } from '../functions/index.ts';
import { startTestbed } from '../local/testbed.ts';
import { startRuntime } from '../runtime/local.ts';
import { connect, gvr, Resources, type KubeObject } from '../shared/kube/index.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { statefulSet } from '../local/fixtures.ts';
import { churnBench } from './pipeline-churn.ts';

const { values } = parseArgs({
  options: {
    // Per mode: 50 and 50 by default, 5 and 30 with --churn.
    parents: { type: 'string' },
    updates: { type: 'string', default: '5' },
    pods: { type: 'string' },
    'status-changes': { type: 'string', default: '1000' },
    churn: { type: 'boolean', default: false },
    nodes: { type: 'string', default: '3' },
    'pod-changes-per-minute': { type: 'string', default: '600' },
    'spec-changes-per-minute': { type: 'string', default: '10' },
    minutes: { type: 'string', default: '2' },
  },
});
const PARENTS = Number(values.parents ?? 50);
const UPDATES = Number(values.updates);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
const statefulSets = gvr('apps', 'v1', 'statefulsets');
const PODS = Number(values.pods ?? 50);
const STATUS_CHANGES = Number(values['status-changes']);
const pipelineFunctions = functions.filter((f) => ['router', 'history'].includes(f.name));

if (values.churn) {
  const figures = await churnBench({
    nodes: Number(values.nodes),
    pods: Number(values.pods ?? 30),
    parents: Number(values.parents ?? 5),
    podChangesPerMinute: Number(values['pod-changes-per-minute']),
    specChangesPerMinute: Number(values['spec-changes-per-minute']),
    minutes: Number(values.minutes),
    log,
  });
  log(JSON.stringify(figures));
  console.log(JSON.stringify(figures));
  process.exit(0);
}

const bed = await startTestbed({ withCluster: true, log });
try {
  const admin = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.admin });
  await applyManifests(
    admin,
    'apiVersion: outrigger.dev/v1alpha1\nkind: RevisionPolicy\nmetadata: {name: statefulsets}\nspec: {target: {apiVersion: apps/v1, kind: StatefulSet}, targetState: [spec.template], revisionHistoryLimit: 20, generated: {apiVersion: v1, kind: Pod}}\n',
  );
  const ns = `pipeline-${Date.now().toString(36)}`;
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const runtime = await startRuntime({
    kubeconfig: bed.cluster!.kubeconfigs.outrigger,
    clusterId: 'bench',
    namespace: ns,
    stateDir: await mkdtemp(join(tmpdir(), 'outrigger-pipeline-')),
    functions: pipelineFunctions,
    log: () => {},
  });
  try {
    await runtime.settled();
    const router = runtime.queues.get('router')!;
    const before = { ...router.stats };
    const limit = pLimit(16);
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: PARENTS }, (_, i) =>
        limit(() => admin.create(statefulSets, statefulSet(`s${i}`, ns, 'registry.example/app:0'))),
      ),
    );
    for (let u = 1; u <= UPDATES; u += 1) {
      await Promise.all(
        Array.from({ length: PARENTS }, (_, i) =>
          limit(() =>
            admin.patch(
              statefulSets,
              { name: `s${i}`, namespace: ns },
              { spec: { template: { spec: { containers: [{ name: 'c', image: `registry.example/app:${u}` }] } } } },
              'strategic',
            ),
          ),
        ),
      );
    }
    const written = performance.now();
    // Done when every parent's final template has its revision: the last change of each reached history.
    const deadline = Date.now() + 300_000;
    const finalImage = `registry.example/app:${UPDATES}`;
    let revisions = 0;
    let converged = 0;
    for (;;) {
      const all = await admin.listAll(Resources.controllerRevisions, { namespace: ns });
      revisions = all.length;
      const done = new Set(
        all.filter((r) => JSON.stringify(r.data).includes(finalImage)).map((r) => r.metadata.ownerReferences?.[0]?.name),
      );
      converged = done.size;
      if (converged >= PARENTS) break;
      if (Date.now() > deadline) throw new Error(`only ${converged} of ${PARENTS} parents converged after 300 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - t0) / 1000;
    await runtime.settled();
    const routed = router.stats.delivered - before.delivered;
    const figures = {
      bench: 'pipeline',
      parents: PARENTS,
      updatesPerParent: UPDATES,
      changesWritten: PARENTS * (UPDATES + 1),
      writeSeconds: Number(((written - t0) / 1000).toFixed(2)),
      endToEndSeconds: Number(seconds.toFixed(2)),
      routerEvents: routed,
      eventsPerSecond: Math.round(routed / seconds),
      revisions,
      parentsConverged: converged,
      lost: PARENTS - converged,
      deadLettered: [...runtime.queues.values()].reduce((n, q) => n + q.stats.deadLettered, 0),
    };
    await runtime.stop();
    const statusChanges = { metadataOnly: await podStatusChanges(true), whole: await podStatusChanges(false) };
    const all = { ...figures, statusChanges };
    log(JSON.stringify(all));
    console.log(JSON.stringify(all));
  } catch (err) {
    await runtime.stop();
    throw err;
  }

  /**
   * PODS pods owned by one StatefulSet, STATUS_CHANGES status updates spread over them (Ready flipping), through
   * a fresh runtime whose forwarder sends children as metadata only, or (for comparison) whole.
   */
  async function podStatusChanges(metadataOnly: boolean) {
    const router = pipelineFunctions.find((f) => f.name === 'router')!;
    const specs = metadataOnly
      ? pipelineFunctions
      : pipelineFunctions.map((f) => (f === router ? { ...router, events: { ...router.events!, wholeObjects: undefined } } : f));
    const podNs = `pods-${metadataOnly ? 'meta' : 'whole'}-${Date.now().toString(36)}`;
    await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: podNs } });
    await admin.create(Resources.serviceAccounts, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default', namespace: podNs },
    });
    const rt = await startRuntime({
      kubeconfig: bed.cluster!.kubeconfigs.outrigger,
      clusterId: 'bench',
      namespace: podNs,
      stateDir: await mkdtemp(join(tmpdir(), 'outrigger-pods-')),
      functions: specs,
      log: () => {},
    });
    try {
      const owner = await admin.create<KubeObject>(statefulSets, statefulSet('web', podNs, 'app:1'));
      const limit = pLimit(16);
      await Promise.all(
        Array.from({ length: PODS }, (_, i) =>
          limit(() =>
            admin.create(Resources.pods, {
              apiVersion: 'v1',
              kind: 'Pod',
              metadata: {
                name: `web-${i}`,
                namespace: podNs,
                labels: { app: 'web' },
                ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: owner.metadata.uid!, controller: true }],
              },
              spec: { containers: [{ name: 'c', image: 'app:1' }] },
            }),
          ),
        ),
      );
      await rt.settled();
      const queue = rt.queues.get('router')!;
      const before = { ...queue.stats };
      const invocations = () => [...rt.queues.values()].reduce((n, q) => n + q.stats.batches, 0);
      const invocationsBefore = invocations();
      const seen = () => rt.forwarderStats().reduce((n, f) => n + f.events + f.statusOnly, 0);
      const seenBefore = seen();
      // One pod at a time flips, in turn: each change a status update the apiserver takes on its own.
      for (let c = 0; c < STATUS_CHANGES; c += 1) {
        const status = {
          conditions: [{ type: 'Ready', status: c % (2 * PODS) < PODS ? 'True' : 'False', lastTransitionTime: new Date().toISOString() }],
        };
        await admin.patch(Resources.pods, { name: `web-${c % PODS}`, namespace: podNs, subresource: 'status' }, { status }, 'merge');
      }
      // Each status update is one watch event: the forwarder has seen them all once it counted that many.
      for (const deadline = Date.now() + 120_000; seen() - seenBefore < STATUS_CHANGES;) {
        if (Date.now() > deadline) throw new Error(`the forwarder saw ${seen() - seenBefore} of ${STATUS_CHANGES} status changes in 120 s`);
        await new Promise((r) => setTimeout(r, 100));
      }
      await rt.settled();
      const per1000 = (n: number) => Math.round((n * 1000) / STATUS_CHANGES);
      return {
        statusChanges: STATUS_CHANGES,
        sqsMessagesPer1000: per1000(queue.stats.sent - before.sent),
        bytesPer1000: per1000(queue.stats.bytes - before.bytes),
        routerInvocationsPer1000: per1000(queue.stats.batches - before.batches),
        // The router's and the handlers' it sent to (history), as Lambda would invoke them for these batches.
        lambdaInvocationsPer1000: per1000(invocations() - invocationsBefore),
      };
    } finally {
      await rt.stop();
    }
  }
} finally {
  await bed.stop();
}
