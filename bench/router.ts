// bench/router: routing decisions per second for the pure router, and adoptions per second against the
// local kube-apiserver. Prints its figures as the last line, in JSON.
//   npm run bench:router [-- --events 1000000 --orphans 500]
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { startTestbed } from '../local/testbed.ts';
import { Resources, connect, gvr, type KubeObject } from '../shared/kube/index.ts';
import { claim, compileSelector, matches, newControllerRef, routeEvent, type RouteStep } from '../shared/ownership/index.ts';

const { values } = parseArgs({ options: { events: { type: 'string', default: '1000000' }, orphans: { type: 'string', default: '500' } } });
const events = Number(values.events);
const orphans = Number(values.orphans);

function pureRouter(): { routeEventPerSec: number; routeAndMatchPerSec: number } {
  const parent = { apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'p', namespace: 'ns', uid: 'p-uid' } };
  const child = (i: number, owned: boolean, labels: Record<string, string>): KubeObject => ({
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: {
      name: `c-${i}`,
      namespace: 'ns',
      uid: `u-${i}`,
      resourceVersion: String(i),
      labels,
      ...(owned ? { ownerReferences: [newControllerRef(parent)] } : {}),
    },
  });
  // A mix of the routing table's rows: owned add/update/delete, ref removed, orphan add/update/delete.
  const cases: Array<Parameters<typeof routeEvent>> = [];
  for (let i = 0; i < 1000; i += 1) {
    const labels = { app: `a${i % 7}`, tier: i % 2 ? 'web' : 'db' };
    const owned = child(i, true, labels);
    const orphan = child(i, false, labels);
    const relabelled = child(i, false, { ...labels, app: `a${(i + 1) % 7}` });
    cases.push(
      ['added', owned],
      ['modified', owned, owned],
      ['deleted', owned],
      ['modified', orphan, owned],
      ['added', orphan],
      ['modified', relabelled, orphan],
      ['deleted', orphan],
    );
  }
  const selectors = Array.from({ length: 20 }, (_, i) =>
    compileSelector({ matchLabels: { app: `a${i % 7}` }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['web', 'db'] }] }),
  );

  let sink = 0;
  const t0 = performance.now();
  for (let i = 0; i < events; i += 1) sink += routeEvent(...cases[i % cases.length]!).length;
  const t1 = performance.now();
  for (let i = 0; i < events; i += 1) {
    for (const step of routeEvent(...cases[i % cases.length]!) as RouteStep[]) {
      if (step.by === 'selector') for (const s of selectors) if (matches(s, step.labels)) sink += 1;
    }
  }
  const t2 = performance.now();
  if (sink < 0) console.log(sink);
  return { routeEventPerSec: Math.round(events / ((t1 - t0) / 1000)), routeAndMatchPerSec: Math.round(events / ((t2 - t1) / 1000)) };
}

async function adoptions(): Promise<{ adoptionsPerSec: number; requestsPerAdoption: number; adopted: number }> {
  const bed = await startTestbed({ withCluster: true, log: (m) => process.stderr.write(`[bench] ${m}\n`) });
  try {
    const admin = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.admin });
    const kube = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.outrigger });
    const ns = 'bench-adopt';
    await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const labels = { app: 'bench' };
    const statefulSets = gvr('apps', 'v1', 'statefulsets');
    const sts = await admin.create(statefulSets, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'web', namespace: ns },
      spec: {
        serviceName: 'web',
        replicas: 0,
        selector: { matchLabels: labels },
        template: { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'x' }] } },
      },
    });
    for (let i = 0; i < orphans; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, orphans - i) }, (_, j) =>
          kube.create(Resources.controllerRevisions, {
            apiVersion: 'apps/v1',
            kind: 'ControllerRevision',
            metadata: { name: `o-${i + j}`, namespace: ns, labels },
            data: {},
            revision: 1,
          }),
        ),
      );
    }
    const candidates = await kube.listAll(Resources.controllerRevisions, { namespace: ns });
    kube.stats.reset();
    const t0 = performance.now();
    const result = await claim(
      { kube, parentResource: statefulSets, childResource: Resources.controllerRevisions },
      sts,
      compileSelector({ matchLabels: labels }),
      candidates,
    );
    const seconds = (performance.now() - t0) / 1000;
    return {
      adoptionsPerSec: Math.round(result.adopted.length / seconds),
      requestsPerAdoption: Number((kube.stats.total / result.adopted.length).toFixed(3)),
      adopted: result.adopted.length,
    };
  } finally {
    await bed.stop();
  }
}

const pure = pureRouter();
const adopt = await adoptions();
console.log(JSON.stringify({ bench: 'router', events, ...pure, orphans, ...adopt, targetRouteEventPerSec: 100_000 }));
