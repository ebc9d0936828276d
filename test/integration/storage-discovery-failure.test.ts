// A group version whose discovery keeps failing (an aggregated API whose backend is gone: the apiserver answers
// 503 for it), on the real apiserver and DynamoDB Local: it marks the StorageStates it serves DiscoveryFailed
// and counts them (the StorageDiscoveryFailed alarm's metric), and is no missed poll: other resources keep
// their heartbeats and the poll is recorded (docs/controllers/storage-migration.md#a-group-version-whose-discovery-fails).
import { randomUUID } from 'node:crypto';
import { pollKey, storageStates, type StorageContext } from '../../functions/storage/context.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import { DEFAULT_PERIOD_MS, DISCOVERY_FAILED, rfc3339, storageVersionHash, type StorageState } from '../../shared/storage/index.ts';
import { adminClient, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { apiServices, downApiGroup } from '../testbed/down-api.ts';
import { widgetCrd } from '../testbed/widgets.ts';

const at = (base: number, minutes: number) => () => new Date(base + minutes * 60_000);

describe('storage: a group version whose discovery keeps failing', () => {
  test('marks the states it serves DiscoveryFailed and counts them, and is no missed poll: the other states keep their heartbeats', async () => {
    const admin = adminClient();
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const h1 = storageVersionHash(group, 'v1', 'Widget');
    // An aggregated API whose Service does not exist: its group is listed in /apis, its group version answers 503.
    const broken = await downApiGroup('agg', 'storage.test');

    const base = Date.now();
    const ctx: StorageContext = {
      cluster: uniqueName('undiscovered'),
      kube: outriggerClient(),
      state: testState(),
      holder: `test-${randomUUID()}`,
      reporters: ['apiserver'],
      mode: 'outrigger',
      periodMs: DEFAULT_PERIOD_MS,
      now: () => new Date(),
    };
    const reporter = { id: 'apiserver', client: outriggerClient() };
    const poll = (minute: number) => pollReporter({ ...ctx, now: at(base, minute) }, reporter, { groups: [group, broken], lead: false });
    // A state of a resource that group version served (with a hash) when it last answered.
    const served = `things.${broken}`;
    await admin.create(storageStates, {
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageState',
      metadata: { name: served },
      spec: { resource: { group: broken, resource: 'things' } },
    } as KubeObject);
    await admin.patch(
      storageStates,
      { name: served, subresource: 'status' },
      {
        status: {
          currentStorageVersionHashes: [
            { reporterID: 'apiserver', currentStorageVersionHash: 'aGFzaA==', lastHeartbeatTime: rfc3339(at(base, 0)()) },
          ],
          persistedStorageVersionHashes: ['aGFzaA=='],
        },
      },
      'merge',
    );
    const stateOf = (name: string) => ctx.kube.get<StorageState>(storageStates, { name });

    for (const minute of [0, 10, 20, 30]) {
      const result = await poll(minute);
      // Every poll is recorded: the failure is not a missed poll, however long it lasts.
      expect(result).toMatchObject({
        missedPolls: {},
        failedGroups: [expect.objectContaining({ group: broken, version: 'v1' })],
        undiscovered: [served],
      });
      expect((await ctx.state.records.get<{ time: string }>(pollKey(ctx.cluster, 'apiserver')))?.value.time).toBe(
        at(base, minute)().toISOString(),
      );
    }
    // The widgets' state kept its heartbeats and its persisted hash (no reset, no Unknown).
    expect((await stateOf(crd.name)).status).toMatchObject({
      persistedStorageVersionHashes: [expect.any(String)],
      currentStorageVersionHash: h1,
      lastHeartbeatTime: rfc3339(at(base, 30)()),
    });
    // The state it serves says why it gets no heartbeat, since the first failed poll.
    const conditions = (await stateOf(served)).status?.conditions;
    expect(conditions).toEqual([
      expect.objectContaining({
        type: DISCOVERY_FAILED,
        status: 'True',
        reason: 'GroupVersionUnavailable',
        lastTransitionTime: rfc3339(at(base, 0)()),
        message: expect.stringContaining(`reporter apiserver could not read the discovery of ${broken}/v1`),
      }),
    ]);
    await admin.delete(apiServices, { name: `v1.${broken}` });
    await admin.delete(storageStates, { name: served });
  });
});
