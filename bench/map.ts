// bench/map: one MapController parent with N inputs (ConfigMaps), against the local kube-apiserver, acting as the
// `outrigger` identity. The map hook is an HTTP webhook in this process that waits a fixed latency and answers one
// output per input. Prints its figures as the last line, in JSON:
//   - first sync (every output created) and a resync with nothing changed: wall time, apiserver requests and
//     writes, hook calls;
//   - the bound the first sync should stay near: hook latency × inputs / concurrency.
//   npm run bench:map [-- --inputs 1000 --latency-ms 20 --concurrency 32]
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { forgetMapControllers, listMapControllers, mapControllerFor } from '../functions/map/controllers.ts';
import type { MapPassOptions, MapSyncResult } from '../functions/map/pass.ts';
import { syncMap } from '../functions/map/sync.ts';
import { startTestbed } from '../local/testbed.ts';
import { Hooks } from '../shared/hooks/index.ts';
import { connect, forgetDiscovery, gvr, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { openCrd } from '../test/testbed/crds.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../test/testbed/rbac.ts';

const { values } = parseArgs({
  options: {
    inputs: { type: 'string', default: '1000' },
    'latency-ms': { type: 'string', default: '20' },
    concurrency: { type: 'string', default: '32' },
  },
});
const INPUTS = Number(values.inputs);
const LATENCY_MS = Number(values['latency-ms']);
const CONCURRENCY = Number(values.concurrency);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

const configMaps = gvr('', 'v1', 'configmaps');
const parents = gvr('bench.outrigger.test', 'v1', 'fanouts');

const hook = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const { input } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { input: KubeObject };
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          outputs: [
            {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `${input.metadata.name}-out`, labels: { role: 'output' } },
              data: { from: input.metadata.name },
            },
          ],
        }),
      );
    }, LATENCY_MS);
  });
});
await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/map`;

const bed = await startTestbed({ withCluster: true, log });
try {
  const admin = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.admin });
  await applyManifests(admin, MAP_TEST_IDENTITY);
  await applyManifests(admin, manifests(hookUrl));
  const ns = `bench-map-${Date.now().toString(36)}`;
  await admin.create(gvr('', 'v1', 'namespaces'), { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const limit = pLimit(16);
  await Promise.all(
    Array.from({ length: INPUTS }, (_, i) =>
      limit(() =>
        admin.create(configMaps, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `in-${i}`, namespace: ns, labels: { role: 'input' } },
          data: { i: String(i) },
        } as KubeObject),
      ),
    ),
  );
  const parent = await admin.create(parents, {
    apiVersion: 'bench.outrigger.test/v1',
    kind: 'Fanout',
    metadata: { name: 'fanout', namespace: ns },
    spec: { selector: { matchLabels: { role: 'input' } } },
  } as KubeObject);
  log(`${INPUTS} inputs created`);

  const kube: KubeClient = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.outrigger });
  let mc;
  for (;;) {
    forgetMapControllers();
    forgetDiscovery(kube);
    mc = mapControllerFor(await listMapControllers(kube, 'bench'), 'bench.outrigger.test', 'Fanout');
    if (mc) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const key = {
    cluster: 'bench',
    group: 'bench.outrigger.test',
    kind: 'Fanout',
    namespace: ns,
    name: 'fanout',
    uid: parent.metadata.uid ?? '',
  };
  const pass = async (opts: MapPassOptions = {}) => {
    const hooks = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
    kube.stats.reset();
    const t0 = performance.now();
    const result: MapSyncResult = await syncMap({ kube, hooks, concurrency: CONCURRENCY }, mc, key, opts);
    const ms = Math.round(performance.now() - t0);
    const writes = Object.entries(kube.stats.byVerb)
      .filter(([v]) => !['get', 'list'].includes(v))
      .reduce((n, [, x]) => n + x, 0);
    if (result.problems.length) throw new Error(`problems: ${JSON.stringify(result.problems.slice(0, 3))}`);
    return {
      ms,
      apiserverRequests: kube.stats.total,
      apiserverWrites: writes,
      hookCalls: hooks.stats.calls,
      created: result.created,
      updated: result.updated,
      unchanged: result.unchanged,
      reused: result.reused,
      answers: result.answers,
    };
  };
  const shown = ({ answers: _answers, ...figures }: Awaited<ReturnType<typeof pass>>) => figures;
  const first = await pass();
  log(`first sync: ${JSON.stringify(shown(first))}`);
  const resync = await pass();
  log(`resync: ${JSON.stringify(shown(resync))}`);
  // One input changes, and its event starts an incremental pass (functions/map/handler.ts): one hook call.
  const changed = await admin.patch(configMaps, { name: 'in-0', namespace: ns }, { data: { i: 'changed' } }, 'merge');
  const oneInput = await pass({ reuse: { previous: resync.answers, touched: new Set([changed.metadata.uid ?? '']) } });
  log(`single-input change: ${JSON.stringify(shown(oneInput))}`);
  const boundMs = Math.round((LATENCY_MS * INPUTS) / CONCURRENCY);
  console.log(
    JSON.stringify({
      bench: 'map',
      inputs: INPUTS,
      hookLatencyMs: LATENCY_MS,
      concurrency: CONCURRENCY,
      hookBoundMs: boundMs,
      firstSync: shown(first),
      resync: shown(resync),
      singleInputChange: shown(oneInput),
    }),
  );
} finally {
  hook.close();
  await bed.stop();
}

function manifests(url: string): string {
  return `
${openCrd('bench.outrigger.test', 'Fanout', 'fanouts')}---
${controllersGrant('outrigger-map-bench', [`{ apiGroups: ["bench.outrigger.test"], resources: ["fanouts"], verbs: ["get", "list", "watch"] }`, `{ apiGroups: ["bench.outrigger.test"], resources: ["fanouts/status"], verbs: ["patch"] }`, `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`])}---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: fanout-controller }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: bench.outrigger.test/v1, resource: fanouts }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks:
    map: { webhook: { url: "${url}" } }
`;
}
