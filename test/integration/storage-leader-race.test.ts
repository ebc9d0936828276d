// A hash change and its reversal landing between the storage leader's epoch read and its state read (audit
// 2026-11-26 map-storage L4), on the real apiserver and DynamoDB Local: the CRD's storage version really moves to
// v2 and back, and a reporter really polls each, while the leader step is between its two reads.
import { storageStates, type StorageContext } from '../../functions/storage/context.ts';
import { lead } from '../../functions/storage/leader.ts';
import { runMigration } from '../../functions/storage/migrator.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import { Resources, getResourceList, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { storageVersionHash, UNKNOWN, type StorageState } from '../../shared/storage/index.ts';
import { storageTestContext } from '../testbed/storage-scene.ts';
import { adminClient, eventually, migratorClient, outriggerClient, uniqueName } from '../testbed/index.ts';
import { widgetCrd } from '../testbed/widgets.ts';

interface CRD extends KubeObject {
  spec: { versions: Array<{ name: string; storage: boolean }> };
}

describe('storage leader: a change and its reversal between its epoch read and its state read', () => {
  test('do not let a migration made before them narrow persisted', async () => {
    const admin = adminClient();
    const group = `${uniqueName('race')}.storage.test`;
    const crd = await widgetCrd(group);
    const h1 = storageVersionHash(group, 'v1', 'Widget');
    const h2 = storageVersionHash(group, 'v2', 'Widget');
    const ctx = storageTestContext();
    const reporter = { id: 'apiserver', client: outriggerClient() };
    const later = (ms: number): StorageContext => ({ ...ctx, now: () => new Date(Date.now() + ms) });
    const storeIn = async (version: string, hash: string) => {
      const current = await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name });
      await admin.patch(
        Resources.customResourceDefinitions,
        { name: crd.name },
        { spec: { versions: current.spec.versions.map((v) => ({ ...v, storage: v.name === version })) } },
        'merge',
      );
      await eventually(
        async () => (await getResourceList(admin, group, 'v1')).resources.find((r) => r.name === 'widgets')?.storageVersionHash === hash,
        30_000,
      );
    };

    // First sight: Unknown, and a migration for h1, which succeeds.
    const first = await pollReporter(ctx, reporter, { groups: [group] });
    const m = first.leader!.created[0]!;
    const migratorCtx = { cluster: ctx.cluster, kube: migratorClient(), state: ctx.state, holder: 'race-migrator', now: () => new Date() };
    expect(await runMigration(migratorCtx, m)).toMatchObject({ outcome: 'Succeeded' });

    // The leader's state read waits while the storage version goes to v2 and back, each seen by a poll (each a
    // hash change: the epoch moves twice), then reads the state: its entry agrees on h1 again, heartbeated after
    // the success, and persisted still holds Unknown (which covers h2).
    let raced = false;
    const plain = ctx.kube;
    const racing = new Proxy(plain, {
      get(target, prop) {
        if (prop === 'get')
          return async (...args: Parameters<KubeClient['get']>) => {
            if (!raced && args[1].name === crd.name) {
              raced = true;
              await storeIn('v2', h2);
              expect(await pollReporter(later(2_000), reporter, { groups: [group], lead: false })).toMatchObject({ changed: 1 });
              await storeIn('v1', h1);
              expect(await pollReporter(later(3_000), reporter, { groups: [group], lead: false })).toMatchObject({ changed: 1 });
            }
            return target.get(...args);
          };
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const state = await plain.get<StorageState>(storageStates, { name: crd.name });
    const step = await lead({ ...later(5_000), kube: racing }, { states: [state] });
    expect(raced).toBe(true);
    expect(step.narrowed).toEqual([]);
    expect((await plain.get<StorageState>(storageStates, { name: crd.name })).status?.persistedStorageVersionHashes).toEqual([UNKNOWN]);
  });
});
