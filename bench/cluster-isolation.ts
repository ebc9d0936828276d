// One cluster cannot stall another (docs/operations/operating.md#one-cluster-cannot-stall-another), measured: the
// heartbeat, map-resync and history-resync, each invoked as Lambda would (the registry's timeout), over two
// clusters on a real apiserver and a black hole listed first (a loopback listener that accepts and never
// answers). Prints, per function, when each healthy cluster's work was done and when the black hole's failure
// was reported, in seconds from the invocation's start; the last line is JSON.
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { handler as heartbeat } from '../functions/heartbeat/handler.ts';
import { handler as historyResync } from '../functions/history-resync/handler.ts';
import { functions } from '../functions/index.ts';
import { handler as mapResync } from '../functions/map-resync/handler.ts';
import { startTestbed } from '../local/testbed.ts';
import { invokeAsLambda, type Handler } from '../runtime/lambda-context.ts';
import { Clusters, type ClusterConfig } from '../shared/clusters.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { connect } from '../shared/kube/index.ts';
import { setEnvironment } from '../shared/lambda/environment.ts';
import { openState } from '../shared/state/index.ts';
import { blackHole } from '../test/testbed/black-hole.ts';

const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
const seconds = (ms: number) => Number((ms / 1000).toFixed(2));

const hole = await blackHole('hole');

const bed = await startTestbed({ withCluster: true, log });
const figures: Record<string, Record<string, number | string>> = {};
try {
  // Something for each resync to queue in the healthy clusters: a RevisionPolicy, and the SnapshotSchedule
  // example's MapController (resynced every minute) with one parent.
  const admin = connect({ kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.admin });
  const example = new URL('../examples/snapshot-schedule/', import.meta.url);
  for (const f of ['crds.yaml', 'rbac.yaml', 'controller.yaml']) await applyManifests(admin, await readFile(new URL(f, example), 'utf8'));
  await applyManifests(
    admin,
    'apiVersion: outrigger.dev/v1alpha1\nkind: RevisionPolicy\nmetadata: { name: statefulsets }\nspec:\n  target: { apiVersion: apps/v1, kind: StatefulSet }\n  targetState: [spec.template]\n',
  );
  await applyManifests(
    admin,
    'apiVersion: snapshot.outrigger.dev/v1\nkind: SnapshotSchedule\nmetadata: { name: nightly, namespace: default }\nspec: { snapshotInterval: 1h, snapshotTTL: 1d, selector: { matchLabels: { app: db } } }\n',
  );
  const healthy = (id: string): ClusterConfig => ({ id, access: { kind: 'kubeconfig', path: bed.cluster!.kubeconfigs.outrigger } });
  let start = 0;
  let done: Record<string, number> = {};
  // When each cluster's last word was written: its metrics (heartbeat) or its sync requests (resyncs).
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const m = /"cluster":"([^"]+)"[^\n]*"ClusterUnreachable"/.exec(String(chunk));
    if (m) done[m[1]!] = performance.now() - start;
    return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write;
  process.env.POWERTOOLS_METRICS_DISABLED = 'false';
  setEnvironment({
    clusters: new Clusters([hole.cluster, healthy('a'), healthy('b')]),
    state: openState({ tableName: bed.tableName, endpoint: bed.dynamodb.endpoint }),
    deadLetter: { send: async () => {} },
    syncSink: {
      send: async (_target, requests) => {
        for (const r of requests) done[r.key.cluster] = performance.now() - start;
      },
    },
  });
  for (const [name, handler] of [
    ['heartbeat', heartbeat],
    ['map-resync', mapResync],
    ['history-resync', historyResync],
  ] as const) {
    const spec = functions.find((f) => f.name === name)!;
    done = {};
    start = performance.now();
    const outcome = await invokeAsLambda(spec, handler as Handler, {}).then(
      () => 'ok',
      (err: Error) => err.message.slice(0, 160),
    );
    const ended = performance.now() - start;
    figures[name] = {
      timeoutSeconds: spec.timeoutSeconds,
      ...Object.fromEntries(Object.entries(done).map(([c, ms]) => [`${c}DoneSeconds`, seconds(ms)])),
      endedSeconds: seconds(ended),
      outcome,
    };
    log(`${name}: ${JSON.stringify(figures[name])}`);
  }
} finally {
  setEnvironment(undefined);
  await hole.close();
  await bed.stop();
}
process.stdout.write(`${JSON.stringify(figures)}\n`);
