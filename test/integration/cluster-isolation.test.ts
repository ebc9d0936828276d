// One cluster cannot stall another (docs/operations/operating.md#one-cluster-cannot-stall-another): the functions
// that speak for every cluster in one invocation, each run as Lambda would (the registry's timeout) over three
// clusters: two on the test bed's apiserver and, listed first, a black hole that accepts connections and never
// answers. Each invocation must end within its timeout having done the healthy clusters' work, and name the
// black hole as the one that failed.
import { readFile } from 'node:fs/promises';
import { handler as heartbeat } from '../../functions/heartbeat/handler.ts';
import { handler as historyResync } from '../../functions/history-resync/handler.ts';
import { functions } from '../../functions/index.ts';
import { handler as mapResync } from '../../functions/map-resync/handler.ts';
import { handler as storagePoll } from '../../functions/storage-poll/handler.ts';
import { invokeAsLambda, type Handler } from '../../runtime/lambda-context.ts';
import { Clusters, type ClusterConfig } from '../../shared/clusters.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { setEnvironment } from '../../shared/lambda/environment.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import { blackHole, type BlackHole } from '../testbed/black-hole.ts';
import { emfOf } from '../testbed/emf.ts';
import { adminClient, createNamespace, testCluster, testState, uniqueName } from '../testbed/index.ts';
import { STATEFULSET_POLICY } from '../testbed/policies.ts';

let hole: BlackHole;
let healthy: string[];
let sent: Array<{ target: string; request: SyncRequest }>;

beforeEach(async () => {
  hole = await blackHole(uniqueName('hole'));
  healthy = [uniqueName('iso-a'), uniqueName('iso-b')];
  sent = [];
});

afterEach(async () => {
  setEnvironment(undefined);
  await hole.close();
});

/** The black hole first: a loop over the clusters in turn would reach the healthy ones only after it. */
function useClusters(configure: (c: ClusterConfig) => ClusterConfig = (c) => c): void {
  setEnvironment({
    clusters: new Clusters([hole.cluster, ...healthy.map(testCluster)].map(configure)),
    state: testState(),
    deadLetter: { send: async () => {} },
    syncSink: {
      send: async (target, requests) => {
        sent.push(...requests.map((request) => ({ target, request })));
      },
    },
  });
}

/** Runs the registered function's handler as Lambda would: with its context, failing at its timeout. */
async function invoke(name: string, handler: unknown, timeoutSeconds?: number): Promise<{ result?: unknown; error?: Error }> {
  const spec = functions.find((f) => f.name === name)!;
  try {
    return { result: await invokeAsLambda({ name, timeoutSeconds: timeoutSeconds ?? spec.timeoutSeconds }, handler as Handler, {}) };
  } catch (err) {
    return { error: err as Error };
  }
}

/**
 * The resyncs' and the poll's invocations get this timeout rather than the registry's (60 s, 300 s): a cluster's
 * budget follows the invocation's timeout (shared/lambda/per-cluster.ts), so the black hole's runs out in about
 * 13 s instead of 43 s or more, with the same outcome, and the healthy clusters' work on the test bed needs a few.
 */
const SHORT_TIMEOUT_S = 20;

const clustersSentTo = (target: string) => new Set(sent.filter((s) => s.target === target).map((s) => s.request.key.cluster));

describe('one cluster cannot stall another', () => {
  test('heartbeat: the healthy clusters report ClusterUnreachable 0 and the black hole 1, within the invocation', async () => {
    useClusters();
    let outcome: { result?: unknown; error?: Error } = {};
    const docs = await emfOf(async () => (outcome = await invoke('heartbeat', heartbeat)));
    expect(outcome.error).toBeUndefined();
    const of = (cluster: string) => docs.filter((d) => d.cluster === cluster && 'ClusterUnreachable' in d).map((d) => d.ClusterUnreachable);
    expect(of(hole.cluster.id)).toEqual([1]);
    for (const id of healthy) expect(of(id)).toEqual([0]);
    expect(hole.accepted()).toBeGreaterThan(0);
  }, 90_000);

  test("map-resync: the healthy clusters' parents are queued; the invocation fails naming the black hole alone", async () => {
    const admin = adminClient();
    const example = new URL('../../examples/snapshot-schedule/', import.meta.url);
    for (const f of ['crds.yaml', 'rbac.yaml', 'controller.yaml']) await applyManifests(admin, await readFile(new URL(f, example), 'utf8'));
    const ns = await createNamespace('iso-map');
    await admin.create(gvr('snapshot.outrigger.dev', 'v1', 'snapshotschedules'), {
      apiVersion: 'snapshot.outrigger.dev/v1',
      kind: 'SnapshotSchedule',
      metadata: { name: 'nightly', namespace: ns },
      spec: { snapshotInterval: '1h', snapshotTTL: '1d', selector: { matchLabels: { app: 'db' } } },
    } as KubeObject);
    useClusters();
    const { error } = await invoke('map-resync', mapResync, SHORT_TIMEOUT_S);
    expect(error?.message).toContain(hole.cluster.id);
    for (const id of healthy) expect(error?.message).not.toContain(id);
    const ours = sent.filter((s) => s.target === 'map' && s.request.key.namespace === ns);
    expect(new Set(ours.map((s) => s.request.key.cluster))).toEqual(new Set(healthy));
  }, 150_000);

  test('map-resync: a cluster whose Metacontroller APIs are off (metacontroller.enabled: false) is not read at all', async () => {
    // The black hole would fail the invocation if it were read: here it is the cluster that serves none.
    useClusters((c) => (c.id === hole.cluster.id ? { ...c, metacontroller: { enabled: false } } : c));
    const { error } = await invoke('map-resync', mapResync, SHORT_TIMEOUT_S);
    expect({ error, accepted: hole.accepted() }).toEqual({ error: undefined, accepted: 0 });
    expect(sent.filter((s) => s.request.key.cluster === hole.cluster.id)).toEqual([]);
  }, 60_000);

  test("history-resync: the healthy clusters' RevisionPolicies are queued; the invocation fails naming the black hole alone", async () => {
    await applyManifests(adminClient(), STATEFULSET_POLICY);
    useClusters();
    const { error } = await invoke('history-resync', historyResync, SHORT_TIMEOUT_S);
    expect(error?.message).toContain(hole.cluster.id);
    for (const id of healthy) expect(error?.message).not.toContain(id);
    expect(clustersSentTo('history')).toEqual(new Set(healthy));
  }, 150_000);

  test("storage-poll: the healthy clusters' polls count, the black hole's fails alone", async () => {
    // Polls limited to a group nobody serves: the healthy polls write no StorageState on the shared bed.
    useClusters((c) => ({ ...c, storage: { enabled: true, migrations: 'outrigger', groups: ['isolation.outrigger.test'] } }));
    let outcome: { result?: unknown; error?: Error } = {};
    const docs = await emfOf(async () => (outcome = await invoke('storage-poll', storagePoll, SHORT_TIMEOUT_S)));
    expect(outcome.error?.message).toContain(hole.cluster.id);
    for (const id of healthy) expect(outcome.error?.message).not.toContain(id);
    const polled = (cluster: string) => docs.filter((d) => d.cluster === cluster && 'StoragePolls' in d).length;
    for (const id of healthy) expect(polled(id)).toBe(1);
    expect(polled(hole.cluster.id)).toBe(0);
  }, 90_000);
});
