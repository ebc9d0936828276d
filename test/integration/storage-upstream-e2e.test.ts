// What kube-storage-version-migrator's end-to-end test expects of a StorageState's non-HA status fields, restated
// for Outrigger on the real apiserver and DynamoDB Local (docs/controllers/storage-migration.md#what-the-states-mean):
// once a CRD is in discovery its state exists and its currentStorageVersionHash is discovery's hash; after the
// CRD's storage version moves, the state shows the new hash within one poll period; every state then converges
// to persisted being exactly the current hash, and every migration has succeeded.
import { lead } from '../../functions/storage/leader.ts';
import { runMigration } from '../../functions/storage/migrator.ts';
import { migrations, storageStates, type StorageContext } from '../../functions/storage/context.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import { Resources, getResourceList, type KubeObject } from '../../shared/kube/index.ts';
import { phaseOf, rfc3339, type StorageState, type StorageVersionMigration } from '../../shared/storage/index.ts';
import { storageTestContext } from '../testbed/storage-scene.ts';
import { adminClient, eventually, migratorClient, outriggerClient, uniqueName } from '../testbed/index.ts';
import { widgetCrd } from '../testbed/widgets.ts';

interface CRD extends KubeObject {
  spec: { versions: Array<{ name: string; storage: boolean }> };
}

describe("kube-storage-version-migrator's e2e expectations", () => {
  test('currentStorageVersionHash is discovery’s hash and follows a storage version change within one poll; the states converge to persisted == [current], every migration Succeeded', async () => {
    const admin = adminClient();
    const group = `${uniqueName('e2e')}.storage.test`;
    const crd = await widgetCrd(group);
    let minute = 0;
    const base = Date.now();
    const ctx: StorageContext = { ...storageTestContext(), now: () => new Date(base + minute * 60_000) };
    const reporter = { id: 'apiserver', client: outriggerClient() };
    const migratorCtx = { cluster: ctx.cluster, kube: migratorClient(), state: ctx.state, holder: 'e2e-migrator', now: ctx.now };
    const discovered = async () =>
      (await getResourceList(admin, group, 'v1')).resources.find((r) => r.name === 'widgets')?.storageVersionHash;
    const poll = async (at: number) => {
      minute = at;
      return pollReporter(ctx, reporter, { groups: [group] });
    };
    const state = () => ctx.kube.get<StorageState>(storageStates, { name: crd.name });
    /** Runs every migration the leader made until none is left to run, then a poll (the confirmation round). */
    const settle = async (from: number) => {
      let at = from;
      for (let round = 0; round < 4; round += 1) {
        const own = (await ctx.kube.listAll<StorageVersionMigration>(migrations)).filter((m) =>
          m.metadata.ownerReferences?.some((o) => o.name === crd.name),
        );
        for (const m of own) if (phaseOf(m) !== 'Succeeded') await runMigration(migratorCtx, m.metadata.name ?? '');
        await lead(ctx, { states: [await state()] });
        at += 10;
        await poll(at);
        const s = (await state()).status;
        if (s?.persistedStorageVersionHashes?.length === 1 && s.persistedStorageVersionHashes[0] === s.currentStorageVersionHash) return at;
      }
      return at;
    };

    // The CRD is in discovery; the poll creates its state, whose current hash is discovery's.
    const v1Hash = (await discovered())!;
    await poll(0);
    expect((await state()).status).toMatchObject({ currentStorageVersionHash: v1Hash, lastHeartbeatTime: rfc3339(ctx.now()) });
    let at = await settle(0);

    // The storage version moves to v2; discovery's hash changes.
    const current = await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name });
    await admin.patch(
      Resources.customResourceDefinitions,
      { name: crd.name },
      { spec: { versions: current.spec.versions.map((v) => ({ ...v, storage: v.name === 'v2' })) } },
      'merge',
    );
    const v2Hash = await eventually(async () => {
      const h = await discovered();
      return h && h !== v1Hash ? h : undefined;
    }, 30_000);
    // Within one discovery period: the next poll.
    at += 10;
    await poll(at);
    expect((await state()).status).toMatchObject({ currentStorageVersionHash: v2Hash, lastHeartbeatTime: rfc3339(ctx.now()) });

    // Every state converges: persisted is exactly the current hash; and every migration succeeded.
    await settle(at);
    const converged = (await ctx.kube.listAll<StorageState>(storageStates)).filter((s) => s.spec.resource.group === group);
    expect(converged.map((s) => [s.status?.persistedStorageVersionHashes, s.status?.currentStorageVersionHash])).toEqual([
      [[v2Hash], v2Hash],
    ]);
    const made = (await ctx.kube.listAll<StorageVersionMigration>(migrations)).filter((m) => m.spec.resource.group === group);
    expect(made.length).toBeGreaterThan(0);
    expect(made.map(phaseOf)).toEqual(made.map(() => 'Succeeded'));
  });
});
