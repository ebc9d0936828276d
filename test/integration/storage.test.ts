// Storage version migration (docs/controllers/storage-migration.md) end to end on the real apiserver and DynamoDB Local, acting as the
// project's identities: `outrigger` polls and leads, `migrator` rewrites. Each test has its own CRD group and
// DynamoDB cluster id, and limits the poll to its group, so tests sharing the bed do not meet.
/* eslint-disable max-lines -- the migration scenarios share storageTestContext and the stateOf, afterwards and ownedMigrations helpers below; each keeps to its own group, so they share the bed */
import {
  decisionKey,
  EPOCH_ANNOTATION,
  epochKey,
  LEADER_LEASE,
  migrations,
  inTreeMigrations,
  storageStates,
  type StorageContext,
} from '../../functions/storage/context.ts';
import { lead, recordMigration } from '../../functions/storage/leader.ts';
import { runMigration } from '../../functions/storage/migrator.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import { Resources, getResourceList, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { newControllerRef } from '../../shared/ownership/index.ts';
import { LeaseLostError } from '../../shared/state/index.ts';
import {
  HASH_ANNOTATION,
  heartbeatPatch,
  migrationName,
  MIGRATOR_LABEL,
  MIGRATOR_LABEL_VALUE,
  STATE_LABEL,
  storageVersionHash,
  UNKNOWN,
  type StorageState,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';
import { storageTestContext } from '../testbed/storage-scene.ts';
import {
  adminClient,
  createNamespace,
  eventually,
  migratorClient,
  outriggerClient,
  startTestRuntime,
  testbed,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { widgetCrd } from '../testbed/widgets.ts';

interface CRD extends KubeObject {
  spec: { versions: Array<{ name: string; served: boolean; storage: boolean }> };
  status?: { storedVersions?: string[] };
}

const context = storageTestContext;

const stateOf = (kube: KubeClient, name: string) => kube.get<StorageState>(storageStates, { name });
/** The context a second or more later: heartbeats written with it come after anything done before the call. */
const afterwards = (ctx: StorageContext, ms = 1_000): StorageContext => ({ ...ctx, now: () => new Date(Date.now() + ms) });
const ownedMigrations = async (kube: KubeClient, state: StorageState, r = migrations) =>
  (await kube.listAll<StorageVersionMigration>(r)).filter((m) => m.metadata.ownerReferences?.some((o) => o.uid === state.metadata.uid));

describe('storage version migration', () => {
  test('a CRD whose storage version moves from v1 to v2: detected, migrated in resumable chunks, persisted and storedVersions narrowed', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('storage');
    const admin = adminClient();
    for (let i = 0; i < 5; i += 1)
      await admin.create(crd.resource, {
        apiVersion: `${group}/v1`,
        kind: 'Widget',
        metadata: { name: `w${i}`, namespace: ns },
        spec: { i },
      } as KubeObject);
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
    expect(state.status).toMatchObject({
      persistedStorageVersionHashes: [UNKNOWN],
      currentStorageVersionHashes: [{ reporterID: 'apiserver', currentStorageVersionHash: h1 }],
    });
    const m1 = first.leader!.created[0]!;
    expect(await runMigration(migratorCtx, m1)).toMatchObject({ outcome: 'Succeeded', rewritten: 5 });
    // Narrowed once the reporter has reported again after the success (the confirmation round).
    expect((await lead(ctx, { states: [await stateOf(ctx.kube, crd.name)] })).narrowed).toEqual([]);
    expect((await pollReporter(afterwards(ctx), reporter, { groups: [group] })).leader?.narrowed).toEqual([crd.name]);
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([h1]);

    // The storage version moves to v2; the next poll sees the new hash in discovery.
    const current = await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name });
    await admin.patch(
      Resources.customResourceDefinitions,
      { name: crd.name },
      { spec: { versions: current.spec.versions.map((v) => ({ ...v, storage: v.name === 'v2' })) } },
      'merge',
    );
    await eventually(
      async () => (await getResourceList(admin, group, 'v1')).resources.find((r) => r.name === 'widgets')?.storageVersionHash === h2,
      30_000,
    );
    expect((await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name })).status?.storedVersions).toEqual(['v1', 'v2']);
    const second = await pollReporter(ctx, reporter, { groups: [group] });
    expect(second).toMatchObject({ created: 0, changed: 1 });
    state = await stateOf(ctx.kube, crd.name);
    expect(state.status?.persistedStorageVersionHashes).toEqual([h1, h2]);
    const m2 = second.leader!.created[0]!;
    expect((await ownedMigrations(ctx.kube, state)).map((m) => m.metadata.name)).toEqual([m2]);

    // The migrator stops after its first chunk (as a timed-out invocation would) and resumes from the token.
    const paused = await runMigration(migratorCtx, m2, { chunk: 2, shouldPause: () => true });
    expect(paused).toMatchObject({ outcome: 'paused', chunks: 1, rewritten: 2 });
    expect((await ctx.kube.get<StorageVersionMigration>(migrations, { name: m2 })).status).toMatchObject({
      progress: { continueToken: expect.stringMatching(/./), complete: false },
    });
    const resumed = await runMigration(migratorCtx, m2, { chunk: 2 });
    expect(resumed).toMatchObject({ outcome: 'Succeeded', chunks: 2, rewritten: 3, storedVersions: ['v2'] });
    expect((await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name })).status?.storedVersions).toEqual(['v2']);
    expect((await pollReporter(afterwards(ctx), reporter, { groups: [group] })).leader?.narrowed).toEqual([crd.name]);
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
    expect(results.map((r) => [r.heartbeats, r.conflicts])).toEqual([
      [1, 0],
      [1, 0],
      [1, 0],
    ]);
    const state = await stateOf(ctx.kube, crd.name);
    expect(state.status?.currentStorageVersionHashes?.map((e) => e.lastHeartbeatTime)).toEqual(
      reporters.map(() => t.toISOString().slice(0, 19) + 'Z'),
    );

    // A heartbeat whose test operations no longer hold (the persisted list changed since the view was read)
    // is refused by the apiserver as a whole; the reporter rereads and writes through the compare-and-set path.
    const h1 = storageVersionHash(group, 'v1', 'Widget');
    await ctx.kube.patch(
      storageStates,
      { name: crd.name, subresource: 'status' },
      { status: { persistedStorageVersionHashes: [h1] } },
      'merge',
    );
    const stale = { ...state, metadata: { ...state.metadata } };
    await expect(
      ctx.kube.patch(
        storageStates,
        { name: crd.name, subresource: 'status' },
        heartbeatPatch(stale, { reporter: 'apiserver-a', hash: h1, now: t }),
        'json',
      ),
    ).rejects.toMatchObject({ kind: 'Invalid' });
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([h1]);
  });

  test('an outage of two polls or more resets the state to Unknown', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ctx = context();
    const reporter = { id: 'apiserver', client: outriggerClient() };
    await pollReporter(ctx, reporter, { groups: [group], lead: false });
    await ctx.kube.patch(
      storageStates,
      { name: crd.name, subresource: 'status' },
      { status: { persistedStorageVersionHashes: [storageVersionHash(group, 'v1', 'Widget')] } },
      'merge',
    );
    const before = await stateOf(ctx.kube, crd.name);
    // One missed poll is tolerated (docs/operations/operating.md#a-missed-poll); two are not.
    const later = new Date(Date.now() + 26 * 60_000);
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

  // Only the DynamoDB decision record is fenced; the deposed leader's Kubernetes writes are compare-and-set, not
  // fenced (docs/design/storage-trigger.md#ha-and-the-leader), and this test does not exercise them.
  test("a leader that dies mid-decision is replaced within one lease, and the deposed leader's late decision record is refused", async () => {
    let clock = Date.now();
    const state = testState({ now: () => clock });
    const ctx = context({ state, now: () => new Date(clock) });
    const deposed = await state.leases.acquire(ctx.cluster, LEADER_LEASE, 'deposed', 60_000);
    expect(deposed).toBeDefined();
    clock += 61_000;
    const successor = await lead(ctx);
    expect(successor).toMatchObject({ leader: true, term: deposed!.term + 1 });
    await expect(
      state.records.put(decisionKey(ctx.cluster, 'widgets.x'), { action: 'create' }, 'any', { fence: deposed! }),
    ).rejects.toBeInstanceOf(LeaseLostError);
  });

  test('in-tree mode creates storagemigration.k8s.io migrations and narrows when the cluster reports success', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ctx = context({ mode: 'in-tree' });
    const polled = await pollReporter(ctx, { id: 'apiserver', client: outriggerClient() }, { groups: [group] });
    const name = polled.leader!.created[0]!;
    const svm = await ctx.kube.get<StorageVersionMigration>(inTreeMigrations, { name });
    expect(svm.spec).toEqual({ resource: { group, resource: 'widgets' } });
    const now = new Date().toISOString();
    // As kube-controller-manager's migrator would (the test cluster runs none).
    await adminClient().patch(
      inTreeMigrations,
      { name, subresource: 'status' },
      {
        status: {
          resourceVersion: svm.metadata.resourceVersion,
          conditions: [
            { type: 'Succeeded', status: 'True', lastTransitionTime: now, reason: 'StorageVersionMigrationSucceeded', message: 'done' },
          ],
        },
      },
      'merge',
    );
    expect(
      (await pollReporter(afterwards(ctx), { id: 'apiserver', client: outriggerClient() }, { groups: [group] })).leader?.narrowed,
    ).toEqual([crd.name]);
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([storageVersionHash(group, 'v1', 'Widget')]);
  });

  test('a StorageState must be named after its resource; only the migrator identity may rewrite arbitrary objects', async () => {
    await expect(
      adminClient().create(storageStates, {
        apiVersion: 'migration.k8s.io/v1alpha1',
        kind: 'StorageState',
        metadata: { name: 'pods.apps' },
        spec: { resource: { group: 'apps', resource: 'deployments' } },
      } as KubeObject),
    ).rejects.toMatchObject({ kind: 'Invalid', message: expect.stringContaining('must be <resource>.<group>') });
    await expect(outriggerClient().list(Resources.namespaces)).rejects.toMatchObject({ kind: 'Forbidden' });
    await expect(migratorClient().list(Resources.namespaces)).resolves.toBeDefined();
  });
});

describe('storage version migration: the leader trusts only its own records', () => {
  test('trust boundary: a forged Succeeded migration narrows nothing; the leader acts only on a migration it recorded, as recorded', async () => {
    // Three resources, each with a migration forged as anyone in outrigger:controllers may (create, then patch
    // the status): the state's label, an owner reference to the state, the current hash and epoch, the very
    // name the leader would give it, Succeeded. (1) no record; (2) a record naming another resource and hash;
    // (3) a record attempted under a released leader lease, which its fence refuses.
    const groups = [0, 1, 2].map(() => `${uniqueName('sv')}.storage.test`);
    const crds = await Promise.all(groups.map((g) => widgetCrd(g)));
    const logs: Array<{ level: string; message: string; fields?: Record<string, unknown> }> = [];
    const queued: string[] = [];
    const ctx = context({
      log: (level, message, fields) => logs.push({ level, message, ...(fields ? { fields } : {}) }),
      queueMigrations: async (ms) => {
        queued.push(...ms.map((m) => m.metadata.name ?? ''));
      },
    });
    const reporter = { id: 'apiserver', client: outriggerClient() };
    await pollReporter(ctx, reporter, { groups, lead: false });
    const admin = adminClient();
    const forged: string[] = [];
    for (const [i, group] of groups.entries()) {
      const state = await stateOf(ctx.kube, crds[i]!.name);
      const hash = storageVersionHash(group, 'v1', 'Widget');
      const epoch = await ctx.state.records.counter(epochKey(ctx.cluster, crds[i]!.name));
      const name = migrationName(state, hash, epoch);
      await admin.create(migrations, {
        apiVersion: 'migration.k8s.io/v1alpha1',
        kind: 'StorageVersionMigration',
        metadata: {
          name,
          ownerReferences: [newControllerRef(state)],
          labels: { [STATE_LABEL]: state.metadata.uid ?? '', [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE },
          annotations: { [HASH_ANNOTATION]: hash, [EPOCH_ANNOTATION]: String(epoch) },
        },
        spec: { resource: { group, version: 'v1', resource: 'widgets' } },
      } as KubeObject);
      const at = `${new Date().toISOString().slice(0, 19)}Z`;
      await admin.patch(
        migrations,
        { name, subresource: 'status' },
        { status: { conditions: [{ type: 'Succeeded', status: 'True', lastUpdateTime: at, reason: 'Forged', message: 'forged' }] } },
        'merge',
      );
      forged.push(name);
    }
    // (2) A record for the name, but of another resource and hash, written under a held leader lease.
    const held = await ctx.state.leases.acquire(ctx.cluster, LEADER_LEASE, 'other', 60_000);
    await recordMigration(ctx.state, ctx.cluster, held!, forged[1]!, {
      state: crds[1]!.name,
      resource: { group: '', version: 'v1', resource: 'secrets' },
      hash: 'another-hash',
    });
    await ctx.state.leases.release(held!);
    // (3) A record under a lease already released: the fence refuses it, so nothing vouches for the migration.
    await expect(
      recordMigration(ctx.state, ctx.cluster, held!, forged[2]!, {
        state: crds[2]!.name,
        resource: { group: groups[2]!, version: 'v1', resource: 'widgets' },
        hash: storageVersionHash(groups[2]!, 'v1', 'Widget'),
      }),
    ).rejects.toThrow();

    // A labelled Pending migration of the resource that nobody owns or recorded: never "stranded", never queued.
    const pending = uniqueName('forged-pending');
    await admin.create(migrations, {
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageVersionMigration',
      metadata: {
        name: pending,
        labels: { [STATE_LABEL]: (await stateOf(ctx.kube, crds[0]!.name)).metadata.uid ?? '', [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE },
      },
      spec: { resource: { group: groups[0]!, version: 'v1', resource: 'widgets' } },
    } as KubeObject);

    // The reporter confirming the hash after each "success", within one period: all a real success needs to narrow.
    const step = await pollReporter(afterwards(ctx, 2_000), reporter, { groups });
    expect(step.leader?.narrowed).toEqual([]);
    for (const crd of crds) expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([UNKNOWN]);
    // Each is named, with why, once; none is handed to the migrator as stranded.
    const refused = logs.filter((l) => l.message === 'migration not recorded by the storage leader: ignored');
    expect(refused.map((l) => l.fields?.migration).sort()).toEqual([...forged].sort());
    expect(refused.find((l) => l.fields?.migration === forged[0])?.fields?.reason).toContain('recorded no migration of this name');
    expect(refused.find((l) => l.fields?.migration === forged[1])?.fields?.reason).toContain(
      `it names widgets.${groups[1]}/v1, the storage leader recorded secrets./v1`,
    );
    // The leader cancelled each in favour of a migration of its own, recorded.
    expect(step.leader?.cancelled.sort()).toEqual([...forged].sort());
    // Past the migrator's lease the leader queues its own Pending migrations again (they took the names it
    // fixes, the forged ones' names), never the forged one.
    const states = await Promise.all(crds.map((c) => stateOf(ctx.kube, c.name)));
    await lead({ ...ctx, now: () => new Date(Date.now() + 20 * 60_000) }, { states });
    expect(queued.sort()).toEqual([...forged].sort());
  });
});

describe('storage version migration: the trigger on the real apiserver', () => {
  // Three reporters on the one apiserver, on a simulated clock (ctx.now) that the migrator shares: the poll per
  // reporter and the leader step as a replay drives them (one apiserver per reporter in a real HA cluster).
  const at = (base: number, minutes: number) => () => new Date(base + minutes * 60_000);

  test('a success narrows only after every configured reporter reported the same hash again after it', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('storage-confirm');
    await adminClient().create(crd.resource, {
      apiVersion: `${group}/v1`,
      kind: 'Widget',
      metadata: { name: 'w0', namespace: ns },
      spec: {},
    } as KubeObject);
    const reporters = ['apiserver-1', 'apiserver-2', 'apiserver-3'];
    const base = Date.now();
    const ctx = context({ reporters });
    const clients = new Map(reporters.map((id) => [id, { id, client: outriggerClient() }]));
    const poll = (id: string, minute: number) => pollReporter({ ...ctx, now: at(base, minute) }, clients.get(id)!, { groups: [group] });
    for (const id of reporters) await poll(id, 0);
    const state = await stateOf(ctx.kube, crd.name);
    const [made] = await ownedMigrations(ctx.kube, state);
    expect(made).toBeDefined();
    // The migration finishes within a minute.
    const migratorCtx = { cluster: ctx.cluster, kube: migratorClient(), state: ctx.state, holder: 'migrator-test', now: at(base, 1) };
    expect(await runMigration(migratorCtx, made!.metadata.name!)).toMatchObject({ outcome: 'Succeeded' });
    expect((await lead({ ...ctx, now: at(base, 1) }, { states: [state] })).narrowed).toEqual([]);
    expect((await poll('apiserver-1', 10)).leader?.narrowed).toEqual([]);
    expect((await poll('apiserver-2', 10)).leader?.narrowed).toEqual([]);
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([UNKNOWN]);
    expect((await poll('apiserver-3', 10)).leader?.narrowed).toEqual([crd.name]);
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([storageVersionHash(group, 'v1', 'Widget')]);
  });

  test('a reporter silent for two polls or more persists Unknown and moves the epoch, though its hash is unchanged', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const base = Date.now();
    const ctx = context({ reporters: ['a', 'b'] });
    const h1 = storageVersionHash(group, 'v1', 'Widget');
    const poll = (id: string, minute: number) =>
      pollReporter({ ...ctx, now: at(base, minute) }, { id, client: outriggerClient() }, { groups: [group], lead: false });
    await poll('a', 0);
    await poll('b', 0);
    await ctx.kube.patch(
      storageStates,
      { name: crd.name, subresource: 'status' },
      { status: { persistedStorageVersionHashes: [h1] } },
      'merge',
    );
    expect((await poll('b', 10)).heartbeats).toBe(1);
    const epoch = await ctx.state.records.counter(epochKey(ctx.cluster, crd.name));
    // a was silent from 0 to 26 (two polls missed): its apiserver may have gone v1 → v2 → v1 meanwhile.
    expect(await poll('a', 26)).toMatchObject({ heartbeats: 0, changed: 1, reset: 0 });
    expect((await stateOf(ctx.kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([UNKNOWN]);
    expect(await ctx.state.records.counter(epochKey(ctx.cluster, crd.name))).toBe(epoch + 1);
  });

  test("every served version is discovered: a resource served only in its group's non-preferred version gets a state and a migration through that version", async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    await widgetCrd(group);
    const admin = adminClient();
    // Widgets are served in v1 and v2, so the group prefers v2; gadgets are served in v1 only.
    await admin.create(Resources.customResourceDefinitions, {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `gadgets.${group}` },
      spec: {
        group,
        scope: 'Namespaced',
        names: { kind: 'Gadget', plural: 'gadgets', singular: 'gadget' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } },
            },
          },
        ],
      },
    } as KubeObject);
    await eventually(
      async () => (await getResourceList(admin, group, 'v1').catch(() => undefined))?.resources.some((r) => r.name === 'gadgets') ?? false,
      30_000,
    );
    const apiGroup = await admin.getPath<{ preferredVersion: { version: string } }>(`/apis/${group}`);
    expect(apiGroup.preferredVersion.version).toBe('v2');
    const ns = await createNamespace('storage-gadgets');
    await admin.create(gvr(group, 'v1', 'gadgets'), {
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      metadata: { name: 'g0', namespace: ns },
      spec: {},
    } as KubeObject);

    const ctx = context();
    const polled = await pollReporter(ctx, { id: 'apiserver', client: outriggerClient() }, { groups: [group] });
    expect(polled).toMatchObject({ resources: 2, created: 2, failedGroups: [] });
    const state = await stateOf(ctx.kube, `gadgets.${group}`);
    expect(state.status?.currentStorageVersionHashes?.[0]?.currentStorageVersionHash).toBe(storageVersionHash(group, 'v1', 'Gadget'));
    const [m] = await ownedMigrations(ctx.kube, state);
    expect(m?.spec.resource).toEqual({ group, version: 'v1', resource: 'gadgets' });
    const migratorCtx = { cluster: ctx.cluster, kube: migratorClient(), state: ctx.state, holder: 'migrator-test', now: () => new Date() };
    expect(await runMigration(migratorCtx, m!.metadata.name!)).toMatchObject({ outcome: 'Succeeded', rewritten: 1 });
  });
});

describe('storage version migration: the leader step', () => {
  /** States for `n` CRDs of one group, reported by the one reporter (no leader step yet). */
  async function reportedStates(ctx: StorageContext, n: number): Promise<{ group: string; names: string[] }> {
    const group = `${uniqueName('sv')}.storage.test`;
    const admin = adminClient();
    const kinds = Array.from({ length: n }, (_, i) => ({ kind: `Part${i}`, plural: `part${i}s` }));
    for (const k of kinds) {
      await admin.create(Resources.customResourceDefinitions, {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: `${k.plural}.${group}` },
        spec: {
          group,
          scope: 'Namespaced',
          names: { kind: k.kind, plural: k.plural, singular: k.kind.toLowerCase() },
          versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object' } } }],
        },
      } as KubeObject);
    }
    await eventually(async () => ((await getResourceList(admin, group, 'v1').catch(() => undefined))?.resources.length ?? 0) >= n, 30_000);
    expect(await pollReporter(ctx, { id: 'apiserver', client: outriggerClient() }, { groups: [group], lead: false })).toMatchObject({
      created: n,
    });
    return { group, names: kinds.map((k) => `${k.plural}.${group}`) };
  }

  test("a migration's event lists that state's migrations only, by their label", async () => {
    const ctx = context();
    const { names } = await reportedStates(ctx, 2);
    const [a, b] = await Promise.all(names.map((n) => stateOf(ctx.kube, n)));
    expect((await lead(ctx, { states: [a!, b!] })).created).toHaveLength(2);
    // What the step asks the apiserver for, recorded on its way through.
    const kube = outriggerClient();
    const selectors: Array<string | undefined> = [];
    const list = kube.list.bind(kube);
    kube.list = ((r, opts) => {
      if (r.resource === migrations.resource) selectors.push(opts?.labelSelector);
      return list(r, opts);
    }) as typeof kube.list;
    await lead({ ...ctx, kube }, { states: [a!] });
    expect(selectors).toEqual([`${STATE_LABEL}=${a!.metadata.uid}`]);
    const [m] = await ctx.kube.listAll<StorageVersionMigration>(migrations, { labelSelector: `${STATE_LABEL}=${b!.metadata.uid}` });
    expect(m?.metadata.ownerReferences?.[0]?.uid).toBe(b!.metadata.uid);
  });

  test('one state failing leaves the others to finish, and nothing is written after the step returns', async () => {
    const ctx = context();
    const { names } = await reportedStates(ctx, 3);
    // A state for a resource the cluster does not serve (its CRD deleted since, say): creating its migration fails.
    const ghost = `widgets.${uniqueName('gone')}.storage.test`;
    const created = await ctx.kube.create<StorageState>(storageStates, {
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageState',
      metadata: { name: ghost },
      spec: { resource: { group: ghost.slice('widgets.'.length), resource: 'widgets' } },
    });
    const entry = {
      reporterID: 'apiserver',
      currentStorageVersionHash: 'h',
      lastHeartbeatTime: new Date().toISOString().slice(0, 19) + 'Z',
    };
    await ctx.kube.patch(
      storageStates,
      { name: ghost, subresource: 'status' },
      {
        metadata: { resourceVersion: created.metadata.resourceVersion },
        status: { currentStorageVersionHashes: [entry], persistedStorageVersionHashes: [UNKNOWN] },
      },
      'merge',
    );
    const states = await Promise.all([ghost, ...names].map((n) => stateOf(ctx.kube, n)));
    const result = await lead(ctx, { states });
    expect(result.failed).toEqual([{ state: ghost, error: expect.any(String) }]);
    expect(result.created).toHaveLength(3);
    const count = async () =>
      (await ctx.kube.listAll<StorageVersionMigration>(migrations)).filter((m) =>
        states.some((s) => m.metadata.ownerReferences?.[0]?.uid === s.metadata.uid),
      ).length;
    expect(await count()).toBe(3);
    // Released at once (the next holder gets the next term), with nothing still in flight.
    const next = await ctx.state.leases.acquire(ctx.cluster, LEADER_LEASE, 'next', 60_000);
    expect(next?.term).toBe(result.term! + 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(await count()).toBe(3);
  });

  test('a long step renews the lease; a step whose lease is lost stops writing', async () => {
    let clock = Date.now();
    const state = testState({ now: () => clock });
    // Each decision takes 15 s of the lease's clock: four of them outlast a 60 s lease unless it is renewed.
    let perDecisionMs = 15_000;
    const ctx = context({
      state,
      log: (_level, message) => {
        if (message === 'storage leader decision') clock += perDecisionMs;
      },
    });
    const { names } = await reportedStates(ctx, 4);
    const renewed = await lead(ctx, { states: await Promise.all(names.map((n) => stateOf(ctx.kube, n))) });
    expect(renewed).toMatchObject({ failed: [] });
    expect(renewed.created).toHaveLength(4);

    // The next step's lease runs out at its first decision: that one and every state after write nothing.
    const polled = await reportedStates(ctx, 3);
    perDecisionMs = 61_000;
    const states = await Promise.all(polled.names.map((n) => stateOf(ctx.kube, n)));
    await expect(lead(ctx, { states })).rejects.toBeInstanceOf(LeaseLostError);
    const owners = new Set<string | undefined>(states.map((s) => s.metadata.uid));
    expect(
      (await ctx.kube.listAll<StorageVersionMigration>(migrations)).filter((m) => owners.has(m.metadata.ownerReferences?.[0]?.uid)),
    ).toEqual([]);
  });
});

describe('storage version migration through the local runtime', () => {
  test('the poll starts a migration; its event reaches the storage handler and the migrator; success narrows persisted', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('storage-rt');
    for (let i = 0; i < 3; i += 1)
      await adminClient().create(crd.resource, {
        apiVersion: `${group}/v1`,
        kind: 'Widget',
        metadata: { name: `w${i}`, namespace: ns },
        spec: { i },
      } as KubeObject);
    const runtime = await startTestRuntime('storage-rt', ['router', 'storage-poll', 'storage', 'migrator'], {
      migratorKubeconfig: testbed().kubeconfigs.migrator,
      storageGroups: [group],
    });
    try {
      const kube = outriggerClient();
      const h1 = storageVersionHash(group, 'v1', 'Widget');
      // The poll ran at start; the migration's events reach the storage handler and the migrator through queues.
      const state = await eventually(() => stateOf(kube, crd.name).catch(() => undefined), 30_000);
      await eventually(
        async () => (await ownedMigrations(kube, state))[0]?.status?.conditions?.some((c) => c.type === 'Succeeded' && c.status === 'True'),
        60_000,
      );
      expect((await stateOf(kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([UNKNOWN]);
      // The next scheduled poll (a later second than the success) is the confirmation round that narrows.
      await new Promise((r) => setTimeout(r, 1_100));
      await runtime.runScheduled('storage-poll');
      expect((await stateOf(kube, crd.name)).status?.persistedStorageVersionHashes).toEqual([h1]);
    } finally {
      await runtime.stop();
    }
  }, 120_000);
});
