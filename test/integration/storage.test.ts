// Storage version migration (seed 004) end to end on the real apiserver and DynamoDB Local, acting as the
// project's identities: `outrigger` polls and leads, `migrator` rewrites. Each test has its own CRD group and
// DynamoDB cluster id, and limits the poll to its group, so tests sharing the bed do not meet.
import { randomUUID } from 'node:crypto';
import { decisionKey, LEADER_LEASE, migrations, inTreeMigrations, storageStates, type StorageContext } from '../../functions/storage/context.ts';
import { lead } from '../../functions/storage/leader.ts';
import { runMigration } from '../../functions/storage/migrator.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import { Resources, getResourceList, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { LeaseLostError } from '../../shared/state/index.ts';
import { DEFAULT_PERIOD_MS, heartbeatPatch, storageVersionHash, UNKNOWN, type StorageState, type StorageVersionMigration } from '../../shared/storage/index.ts';
import { adminClient, createNamespace, eventually, migratorClient, outriggerClient, startTestRuntime, testbed, testState, uniqueName } from '../testbed/index.ts';



interface CRD extends KubeObject {
  spec: { versions: Array<{ name: string; served: boolean; storage: boolean }> };
  status?: { storedVersions?: string[] };
}

async function widgetCrd(group: string): Promise<{ resource: ReturnType<typeof gvr>; name: string }> {
  const admin = adminClient();
  const name = `widgets.${group}`;
  const version = (v: string, storage: boolean) => ({
    name: v,
    served: true,
    storage,
    schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } },
  });
  await admin.create(Resources.customResourceDefinitions, {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name },
    spec: { group, scope: 'Namespaced', names: { kind: 'Widget', plural: 'widgets', singular: 'widget' }, versions: [version('v1', true), version('v2', false)] },
  } as KubeObject);
  await eventually(async () => (await getResourceList(admin, group, 'v1').catch(() => undefined))?.resources.some((r) => r.name === 'widgets') ?? false, 30_000);
  return { resource: gvr(group, 'v1', 'widgets'), name };
}


function context(over: Partial<StorageContext> = {}): StorageContext {
  return {
    cluster: uniqueName('storage'),
    kube: outriggerClient(),
    state: testState(),
    holder: `test-${randomUUID()}`,
    reporters: ['apiserver'],
    mode: 'outrigger',
    periodMs: DEFAULT_PERIOD_MS,
    now: () => new Date(),
    ...over,
  };
}

const stateOf = (kube: KubeClient, name: string) => kube.get<StorageState>(storageStates, name);
const ownedMigrations = async (kube: KubeClient, state: StorageState, r = migrations) =>
  (await kube.listAll<StorageVersionMigration>(r)).filter((m) => m.metadata.ownerReferences?.some((o) => o.uid === state.metadata.uid));

describe('storage version migration', () => {
  test('a CRD whose storage version moves from v1 to v2: detected, migrated in resumable chunks, persisted and storedVersions narrowed', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('storage');
    const admin = adminClient();
    for (let i = 0; i < 5; i += 1) await admin.create(crd.resource, { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: `w${i}`, namespace: ns }, spec: { i } } as KubeObject);
    const ctx = context();
    const reporter = { id: 'apiserver', client: outriggerClient() };
    const h1 = storageVersionHash(group, 'v1', 'Widget');
    const h2 = storageVersionHash(group, 'v2', 'Widget');
    const migratorCtx = { cluster: ctx.cluster, kube: migratorClient(), state: ctx.state, holder: 'migrator-test', now: () => new Date() };

    // First sight: the state records Unknown, and a migration is requested.
    const first = await pollReporter(ctx, reporter, { groups: [group] });
    expect(first).toMatchObject({ resources: 1, created: 1, failedGroups: [] });
    expect(first.leader?.created).toHaveLength(1);
    let state = await stateOf(ctx.kube, crd.name);
    expect(state.status).toMatchObject({ persistedStorageVersionHashes: [UNKNOWN], currentStorageVersionHashes: [{ reporterID: 'apiserver', currentStorageVersionHash: h1 }] });
    const m1 = first.leader!.created[0]!;
    expect(await runMigration(migratorCtx, m1)).toMatchObject({ outcome: 'Succeeded', rewritten: 5 });
    expect((await lead(ctx)).narrowed).toEqual([crd.name]);
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([h1]);

    // The storage version moves to v2; the next poll sees the new hash in discovery.
    const current = await admin.get<CRD>(Resources.customResourceDefinitions, crd.name);
    await admin.patch(Resources.customResourceDefinitions, crd.name, undefined, { spec: { versions: current.spec.versions.map((v) => ({ ...v, storage: v.name === 'v2' })) } }, 'merge');
    await eventually(async () => (await getResourceList(admin, group, 'v1')).resources.find((r) => r.name === 'widgets')?.storageVersionHash === h2, 30_000);
    expect((await admin.get<CRD>(Resources.customResourceDefinitions, crd.name)).status?.storedVersions).toEqual(['v1', 'v2']);
    const second = await pollReporter(ctx, reporter, { groups: [group] });
    expect(second).toMatchObject({ created: 0, changed: 1 });
    state = await stateOf(ctx.kube, crd.name);
    expect(state.status?.persistedStorageVersionHashes).toEqual([h1, h2]);
    const m2 = second.leader!.created[0]!;
    expect((await ownedMigrations(ctx.kube, state)).map((m) => m.metadata.name)).toEqual([m2]);

    // The migrator stops after its first chunk (as a timed-out invocation would) and resumes from the token.
    const paused = await runMigration(migratorCtx, m2, { chunk: 2, shouldPause: () => true });
    expect(paused).toMatchObject({ outcome: 'paused', chunks: 1, rewritten: 2 });
    expect((await ctx.kube.get<StorageVersionMigration>(migrations, m2)).spec.continueToken).toBeTruthy();
    const resumed = await runMigration(migratorCtx, m2, { chunk: 2 });
    expect(resumed).toMatchObject({ outcome: 'Succeeded', chunks: 2, rewritten: 3, storedVersions: ['v2'] });
    expect((await admin.get<CRD>(Resources.customResourceDefinitions, crd.name)).status?.storedVersions).toEqual(['v2']);
    expect((await lead(ctx)).narrowed).toEqual([crd.name]);
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([h2]);

    // Steady state: a poll is one heartbeat write, and the leader reads no epoch and writes nothing.
    ctx.kube.stats.reset();
    const steady = await pollReporter(ctx, reporter, { groups: [group] });
    expect(steady).toMatchObject({ heartbeats: 1, created: 0, changed: 0 });
    expect(steady.leader).toMatchObject({ created: [], cancelled: [], narrowed: [], epochReads: 0 });
    expect(Object.keys(ctx.kube.stats.byVerb).filter((v) => !['list', 'get'].includes(v))).toEqual(['patch/json']);
    expect(ctx.kube.stats.byVerb['patch/json']).toBe(1);
  });

  test('heartbeats: reporters heartbeating at once do not conflict; a heartbeat on a stale view falls back to a compare-and-set', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const reporters = ['apiserver-a', 'apiserver-b', 'apiserver-c'];
    const ctx = context({ reporters });
    const clients = reporters.map((id) => ({ id, client: outriggerClient() }));
    for (const r of clients) await pollReporter(ctx, r, { groups: [group], lead: false });
    const t = new Date(Date.now() + 60_000);
    const results = await Promise.all(clients.map((r) => pollReporter({ ...ctx, now: () => t }, r, { groups: [group], lead: false })));
    expect(results.map((r) => [r.heartbeats, r.conflicts])).toEqual([[1, 0], [1, 0], [1, 0]]);
    const state = await stateOf(ctx.kube, crd.name);
    expect(state.status?.currentStorageVersionHashes?.map((e) => e.lastHeartbeatTime)).toEqual(reporters.map(() => t.toISOString().slice(0, 19) + 'Z'));

    // A heartbeat whose test operations no longer hold (the persisted list changed since the view was read)
    // is refused by the apiserver as a whole; the reporter rereads and writes through the compare-and-set path.
    const h1 = storageVersionHash(group, 'v1', 'Widget');
    await ctx.kube.patch(storageStates, crd.name, undefined, { status: { persistedStorageVersionHashes: [h1] } }, 'merge', { subresource: 'status' });
    const stale = { ...state, metadata: { ...state.metadata } };
    await expect(ctx.kube.patch(storageStates, crd.name, undefined, heartbeatPatch(stale, { reporter: 'apiserver-a', hash: h1, now: t }), 'json', { subresource: 'status' })).rejects.toMatchObject({ kind: 'Invalid' });
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([h1]);
  });

  test('an outage longer than a period resets the state to Unknown', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ctx = context();
    const reporter = { id: 'apiserver', client: outriggerClient() };
    await pollReporter(ctx, reporter, { groups: [group], lead: false });
    await ctx.kube.patch(storageStates, crd.name, undefined, { status: { persistedStorageVersionHashes: [storageVersionHash(group, 'v1', 'Widget')] } }, 'merge', { subresource: 'status' });
    const before = await stateOf(ctx.kube, crd.name);
    const later = new Date(Date.now() + 16 * 60_000);
    const result = await pollReporter({ ...ctx, now: () => later }, reporter, { groups: [group], lead: false });
    expect(result.reset).toBe(1);
    const after = await stateOf(ctx.kube, crd.name);
    expect(after.metadata.uid).not.toBe(before.metadata.uid);
    expect(after.status?.persistedStorageVersionHashes).toEqual([UNKNOWN]);
  });

  test('three reporters polling at once, one twice: every entry lands and exactly one migration is made', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ctx = context({ reporters: ['a', 'b', 'c'] });
    const poll = (id: string) => pollReporter(ctx, { id, client: outriggerClient() }, { groups: [group] });
    await Promise.all([poll('a'), poll('b'), poll('c'), poll('a')]);
    const state = await stateOf(ctx.kube, crd.name);
    expect(state.status?.currentStorageVersionHashes?.map((e) => e.reporterID)).toEqual(['a', 'b', 'c']);
    expect(await ownedMigrations(ctx.kube, state)).toHaveLength(1);
  });

  test("a leader that dies mid-decision is replaced within one lease, and the deposed leader's late writes are rejected", async () => {
    let clock = Date.now();
    const state = testState({ now: () => clock });
    const ctx = context({ state, now: () => new Date(clock) });
    const deposed = await state.leases.acquire(ctx.cluster, LEADER_LEASE, 'deposed', 60_000);
    expect(deposed).toBeDefined();
    clock += 61_000;
    const successor = await lead(ctx);
    expect(successor).toMatchObject({ leader: true, term: deposed!.term + 1 });
    await expect(state.records.put(decisionKey(ctx.cluster, 'widgets.x'), { action: 'create' }, 'any', { fence: deposed! })).rejects.toBeInstanceOf(LeaseLostError);
  });

  test('in-tree mode creates storagemigration.k8s.io migrations and narrows when the cluster reports success', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ctx = context({ mode: 'in-tree' });
    const polled = await pollReporter(ctx, { id: 'apiserver', client: outriggerClient() }, { groups: [group] });
    const name = polled.leader!.created[0]!;
    const svm = await ctx.kube.get<StorageVersionMigration>(inTreeMigrations, name);
    expect(svm.spec).toEqual({ resource: { group, resource: 'widgets' } });
    const now = new Date().toISOString();
    // As kube-controller-manager's migrator would (the test cluster runs none).
    await adminClient().patch(inTreeMigrations, name, undefined, { status: { resourceVersion: svm.metadata.resourceVersion, conditions: [{ type: 'Succeeded', status: 'True', lastTransitionTime: now, reason: 'StorageVersionMigrationSucceeded', message: 'done' }] } }, 'merge', { subresource: 'status' });
    expect((await lead(ctx)).narrowed).toEqual([crd.name]);
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([storageVersionHash(group, 'v1', 'Widget')]);
  });

  test('a StorageState must be named after its resource; only the migrator identity may rewrite arbitrary objects', async () => {
    await expect(
      adminClient().create(storageStates, { apiVersion: 'migration.k8s.io/v1alpha1', kind: 'StorageState', metadata: { name: 'pods.apps' }, spec: { resource: { group: 'apps', resource: 'deployments' } } } as KubeObject),
    ).rejects.toMatchObject({ kind: 'Invalid', message: expect.stringContaining('must be <resource>.<group>') });
    await expect(outriggerClient().list(Resources.namespaces)).rejects.toMatchObject({ kind: 'Forbidden' });
    await expect(migratorClient().list(Resources.namespaces)).resolves.toBeDefined();
  });
});

describe('storage version migration through the local runtime', () => {
  test('the poll starts a migration; its event reaches the storage handler and the migrator; success narrows persisted', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('storage-rt');
    for (let i = 0; i < 3; i += 1) await adminClient().create(crd.resource, { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: `w${i}`, namespace: ns }, spec: { i } } as KubeObject);
    const runtime = await startTestRuntime('storage-rt', ['router', 'storage-poll', 'storage', 'migrator'], { migratorKubeconfig: testbed().kubeconfigs.migrator, storageGroups: [group] });
    try {
      const kube = outriggerClient();
      const h1 = storageVersionHash(group, 'v1', 'Widget');
      // No call by the test: the poll ran at start; everything after is events and queues.
      await eventually(async () => JSON.stringify((await stateOf(kube, crd.name).catch(() => undefined))?.status?.persistedStorageVersionHashes) === JSON.stringify([h1]), 60_000);
      const state = await stateOf(kube, crd.name);
      const [m] = await ownedMigrations(kube, state);
      expect(m?.status?.conditions?.find((c) => c.type === 'Succeeded')?.status).toBe('True');
    } finally {
      await runtime.stop();
    }
  }, 120_000);
});
