// bench/pipeline: events per second through the whole local runtime (forwarder → queue → router → queue →
// history handler) against the local kube-apiserver and DynamoDB Local, and a check that none was lost: P
// StatefulSets under a RevisionPolicy each get U template changes as fast as the apiserver takes them; the run
// ends when every StatefulSet's final template has its revision (handlers are level-triggered: a template that
// was replaced before its parent was synced is rightly never recorded). Prints its figures as the last line,
// in JSON.
//   npm run bench:pipeline [-- --parents 50 --updates 5]
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

const { values } = parseArgs({ options: { parents: { type: 'string', default: '50' }, updates: { type: 'string', default: '5' } } });
const PARENTS = Number(values.parents);
const UPDATES = Number(values.updates);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
const statefulSets = gvr('apps', 'v1', 'statefulsets');

const bed = await startTestbed({ withCluster: true, log });
try {
  const admin = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.admin });
  await applyManifests(admin, 'apiVersion: outrigger.dev/v1alpha1\nkind: RevisionPolicy\nmetadata: {name: statefulsets}\nspec: {target: {apiVersion: apps/v1, kind: StatefulSet}, targetState: [spec.template], revisionHistoryLimit: 20}\n');
  const ns = `pipeline-${Date.now().toString(36)}`;
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const runtime = await startRuntime({
    kubeconfig: bed.cluster!.kubeconfigs.outrigger,
    clusterId: 'bench',
    namespace: ns,
    stateDir: await mkdtemp(join(tmpdir(), 'outrigger-pipeline-')),
    functions: functions.filter((f) => ['router', 'history', 'truncate'].includes(f.name)),
    log: () => {},
  });
  try {
    await runtime.settled();
    const router = runtime.queues.get('router')!;
    const before = { ...router.stats };
    const limit = pLimit(16);
    const t0 = performance.now();
    const sts = (name: string, image: string): KubeObject => ({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name, namespace: ns },
      spec: { serviceName: name, replicas: 0, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image }] } } },
    });
    await Promise.all(Array.from({ length: PARENTS }, (_, i) => limit(() => admin.create(statefulSets, sts(`s${i}`, 'registry.example/app:0')))));
    for (let u = 1; u <= UPDATES; u += 1) {
      await Promise.all(Array.from({ length: PARENTS }, (_, i) => limit(() => admin.patch(statefulSets, `s${i}`, ns, { spec: { template: { spec: { containers: [{ name: 'c', image: `registry.example/app:${u}` }] } } } }, 'strategic'))));
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
      const done = new Set(all.filter((r) => JSON.stringify(r.data).includes(finalImage)).map((r) => r.metadata.ownerReferences?.[0]?.name));
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
    log(JSON.stringify(figures));
    console.log(JSON.stringify(figures));
  } finally {
    await runtime.stop();
  }
} finally {
  await bed.stop();
}
