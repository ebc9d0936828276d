// A reporter's missed poll (a throttled or failed invocation) on the real apiserver and DynamoDB Local: staleness
// is judged from the reporter's last successful poll, which the poll records in DynamoDB once per poll.
import { randomUUID } from 'node:crypto';
import { pollKey, storageStates, type StorageContext } from '../../functions/storage/context.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import { DEFAULT_PERIOD_MS, storageVersionHash, UNKNOWN, type StorageState } from '../../shared/storage/index.ts';
import { outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { widgetCrd } from '../testbed/widgets.ts';

const at = (base: number, minutes: number) => () => new Date(base + minutes * 60_000);

describe('storage: a missed poll', () => {
  test('one missed poll keeps persisted and is counted; two in a row persist Unknown', async () => {
    const group = `${uniqueName('sv')}.storage.test`;
    const crd = await widgetCrd(group);
    const h1 = storageVersionHash(group, 'v1', 'Widget');
    const base = Date.now();
    const ctx: StorageContext = {
      cluster: uniqueName('missed'),
      kube: outriggerClient(),
      state: testState(),
      holder: `test-${randomUUID()}`,
      reporters: ['apiserver'],
      mode: 'outrigger',
      periodMs: DEFAULT_PERIOD_MS,
      now: () => new Date(),
    };
    const reporter = { id: 'apiserver', client: outriggerClient() };
    const poll = (minute: number) => pollReporter({ ...ctx, now: at(base, minute) }, reporter, { groups: [group], lead: false });
    const persisted = async () =>
      (await ctx.kube.get<StorageState>(storageStates, { name: crd.name })).status?.persistedStorageVersionHashes;

    expect(await poll(0)).toMatchObject({ created: 1, missedPolls: {} });
    // As if migrated: persisted is the one hash.
    await ctx.kube.patch(
      storageStates,
      { name: crd.name, subresource: 'status' },
      { status: { persistedStorageVersionHashes: [h1] } },
      'merge',
    );
    // One record per reporter, written once per poll, not per resource.
    expect((await ctx.state.records.get<{ time: string }>(pollKey(ctx.cluster, 'apiserver')))?.value.time).toBe(
      at(base, 0)().toISOString(),
    );

    // The poll at 10 failed: at 20 the heartbeat is 20 minutes old, yet the last successful poll saw the resource.
    expect(await poll(20)).toMatchObject({ heartbeats: 1, changed: 0, reset: 0, missedPolls: { apiserver: 1 } });
    expect(await persisted()).toEqual([h1]);
    expect(await poll(30)).toMatchObject({ heartbeats: 1, missedPolls: {} });

    // The polls at 40 and 50 failed: it may have missed a change and back.
    expect(await poll(60)).toMatchObject({ heartbeats: 0, reset: 1, missedPolls: { apiserver: 2 } });
    expect(await persisted()).toEqual([UNKNOWN]);
  });
});
