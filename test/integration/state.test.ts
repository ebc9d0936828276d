// Leases and compare-and-set records against AWS's DynamoDB Local: conditional writes decide, not our code.
import { DescribeTimeToLiveCommand, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { LeaseLostError, TABLE, VersionConflictError, itemKey, type Lease } from '../../shared/state/index.ts';
import { testState, uniqueName } from '../testbed/index.ts';

describe('lease with a fencing term', () => {
  test('10 concurrent acquirers give exactly one holder', async () => {
    const state = testState();
    const cluster = uniqueName('c');
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => state.leases.acquire(cluster, 'leader', `candidate-${i}`, 30_000)),
    );
    const holders = results.filter((l): l is Lease => l !== undefined);
    expect(holders).toHaveLength(1);
    expect(holders[0]!.term).toBe(1);
    expect(await state.leases.get(cluster, 'leader')).toMatchObject({ holder: holders[0]!.holder, term: 1 });
  });

  test('the holder re-acquires at the same term; others are refused while it holds', async () => {
    const state = testState();
    const cluster = uniqueName('c');
    const first = await state.leases.acquire(cluster, 'leader', 'a', 30_000);
    expect(await state.leases.acquire(cluster, 'leader', 'b', 30_000)).toBeUndefined();
    const again = await state.leases.acquire(cluster, 'leader', 'a', 30_000);
    expect(again).toMatchObject({ holder: 'a', term: first!.term });
  });

  test("a deposed leader's write is rejected, and its successor's goes through", async () => {
    let now = 1_000_000;
    const state = testState({ now: () => now });
    const cluster = uniqueName('c');
    const key = { cluster, kind: 'record/decision', name: 'x' };
    const old = (await state.leases.acquire(cluster, 'leader', 'old', 10_000))!;
    await state.records.put(key, { by: 'old' }, 'absent', { fence: old });

    now += 10_001; // the old leader stalls past its lease
    const successor = (await state.leases.acquire(cluster, 'leader', 'new', 10_000))!;
    expect(successor.term).toBe(old.term + 1);
    await state.records.put(key, { by: 'new' }, 1, { fence: successor });

    // The old leader wakes up and writes as if it still led: both with its stale view and with a fresh read.
    await expect(state.records.put(key, { by: 'old' }, 1, { fence: old })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(state.records.put(key, { by: 'old' }, 2, { fence: old })).rejects.toBeInstanceOf(LeaseLostError);
    expect(await state.leases.renew(old, 10_000)).toBeUndefined();
    expect(await state.records.get(key)).toMatchObject({ value: { by: 'new' }, version: 2 });
  });

  test('a released lease is taken at once, with the next term', async () => {
    const state = testState();
    const cluster = uniqueName('c');
    const a = (await state.leases.acquire(cluster, 'leader', 'a', 60_000))!;
    expect(await state.leases.acquire(cluster, 'leader', 'b', 60_000)).toBeUndefined();
    expect(await state.leases.release(a)).toBe(true);
    const b = await state.leases.acquire(cluster, 'leader', 'b', 60_000);
    expect(b).toMatchObject({ holder: 'b', term: a.term + 1 });
    expect(await state.leases.release(a)).toBe(false);
  });

  test("a holder's memo reaches the next holder; a release without one keeps it; a deposed holder's does not land", async () => {
    let now = 7_000_000;
    const state = testState({ now: () => now });
    const cluster = uniqueName('c');
    const a = (await state.leases.acquire(cluster, 'history/x', 'a', 1_000))!;
    expect(a.memo).toBeUndefined();
    expect(await state.leases.release(a, { digest: 'd1', number: 1 })).toBe(true);
    const b = (await state.leases.acquire(cluster, 'history/x', 'b', 1_000))!;
    expect(b.memo).toEqual({ digest: 'd1', number: 1 });
    expect(await state.leases.release(b)).toBe(true);
    expect((await state.leases.get(cluster, 'history/x'))?.memo).toEqual({ digest: 'd1', number: 1 });

    const c = (await state.leases.acquire(cluster, 'history/x', 'c', 1_000))!;
    now += 1_000; // c stalls past its lease; d takes over and leaves its memo
    const d = (await state.leases.acquire(cluster, 'history/x', 'd', 1_000))!;
    expect(await state.leases.release(d, { digest: 'd2', number: 2 })).toBe(true);
    expect(await state.leases.release(c, { digest: 'stale', number: 1 })).toBe(false);
    expect((await state.leases.get(cluster, 'history/x'))?.memo).toEqual({ digest: 'd2', number: 2 });
  });

  test("a holder's parts reach the next holder; a deposed holder's late parts make them none until a holder writes them whole", async () => {
    let now = 8_000_000;
    const state = testState({ now: () => now });
    const cluster = uniqueName('c');
    const take = (holder: string) => state.leases.acquire(cluster, 'history/p', holder, 1_000, { parts: true }) as Promise<Lease>;
    const a = await take('a');
    expect(a.parts).toBeUndefined();
    expect(await state.leases.release(a, { n: 1 }, { r1: { x: 1 }, r2: { x: 2 } })).toBe(true);
    const b = await take('b');
    expect(b).toMatchObject({ memo: { n: 1 }, parts: { r1: { x: 1 }, r2: { x: 2 } } });
    expect(await state.leases.release(b, { n: 2 }, { r1: { x: 1 }, r3: { x: 3 } })).toBe(true);
    const c = await take('c');
    expect(c.parts).toEqual({ r1: { x: 1 }, r3: { x: 3 } });
    now += 1_000; // c stalls past its lease; d takes over and leaves its parts
    const d = await take('d');
    expect(await state.leases.release(d, { n: 3 }, { r1: { x: 1 }, r3: { x: 3 }, r4: { x: 4 } })).toBe(true);
    // c's parts land (they are not fenced), its release does not: they no longer add up to what d left.
    expect(await state.leases.release(c, { n: 9 }, { r1: { x: 1 }, r5: { x: 5 } })).toBe(false);
    const e = await take('e');
    expect(e.memo).toEqual({ n: 3 });
    expect(e.parts).toBeUndefined();
    expect(await state.leases.release(e, { n: 4 }, { r1: { x: 1 }, r4: { x: 4 } })).toBe(true);
    const f = await take('f');
    expect(f.parts).toEqual({ r1: { x: 1 }, r4: { x: 4 } });
    // A take that waits for the holder reads the parts it left once it has the lease.
    const waiting = state.leases.acquireWithin(cluster, 'history/p', 'g', 1_000, 10_000, { parts: true });
    await new Promise((r) => setTimeout(r, 50));
    expect(await state.leases.release(f, { n: 5 }, { r6: { x: 6 } })).toBe(true);
    expect(await waiting).toMatchObject({ holder: 'g', memo: { n: 5 }, parts: { r6: { x: 6 } } });
  });

  test('a lease taken with keepSeconds carries a TTL that far ahead, refreshed at each acquire and release; the table expires items by it', async () => {
    let now = 9_000_000_000;
    const state = testState({ now: () => now });
    const cluster = uniqueName('c');
    const ttlOf = async () => {
      const out = await state.client.send(
        new GetItemCommand({ TableName: state.tableName, Key: itemKey({ cluster, kind: 'lease', name: 'history/y' }) }),
      );
      return out.Item?.[TABLE.timeToLiveAttribute]?.N;
    };
    const a = (await state.leases.acquire(cluster, 'history/y', 'a', 1_000, { keepSeconds: 600 }))!;
    expect(await ttlOf()).toBe(String(9_000_000 + 600));
    now += 5_000;
    expect(await state.leases.release(a, { digest: 'd1' })).toBe(true);
    expect(await ttlOf()).toBe(String(9_000_005 + 600));
    // A lease taken without it (a leader's) gets none of its own.
    await state.leases.acquire(cluster, 'leader', 'a', 1_000);
    const leader = await state.client.send(
      new GetItemCommand({ TableName: state.tableName, Key: itemKey({ cluster, kind: 'lease', name: 'leader' }) }),
    );
    expect(leader.Item?.[TABLE.timeToLiveAttribute]).toBeUndefined();
    // The test table expires items by that attribute, as the stack's does (infra/outrigger.ts).
    const described = await state.client.send(new DescribeTimeToLiveCommand({ TableName: state.tableName }));
    expect(described.TimeToLiveDescription).toMatchObject({ TimeToLiveStatus: 'ENABLED', AttributeName: TABLE.timeToLiveAttribute });
  });

  test('an expired lease is taken over only after expiry', async () => {
    let now = 5_000_000;
    const state = testState({ now: () => now });
    const cluster = uniqueName('c');
    await state.leases.acquire(cluster, 'leader', 'a', 1_000);
    now += 999;
    expect(await state.leases.acquire(cluster, 'leader', 'b', 1_000)).toBeUndefined();
    now += 1;
    expect(await state.leases.acquire(cluster, 'leader', 'b', 1_000)).toMatchObject({ holder: 'b', term: 2 });
  });
});

describe('compare-and-set records', () => {
  test('a write at a stale version is rejected and changes nothing', async () => {
    const state = testState();
    const key = { cluster: uniqueName('c'), kind: 'record/test', name: 'r' };
    await state.records.put(key, { n: 1 }, 'absent');
    await expect(state.records.put(key, { n: 0 }, 'absent')).rejects.toBeInstanceOf(VersionConflictError);
    await state.records.put(key, { n: 2 }, 1);
    await expect(state.records.put(key, { n: 3 }, 1)).rejects.toBeInstanceOf(VersionConflictError);
    expect(await state.records.get(key)).toMatchObject({ value: { n: 2 }, version: 2 });
  });

  test('concurrent increments lose no update when each retries on conflict', async () => {
    const state = testState();
    const key = { cluster: uniqueName('c'), kind: 'record/test', name: 'counter' };
    await state.records.put(key, { n: 0 }, 'absent');
    const increment = async () => {
      for (;;) {
        const cur = (await state.records.get<{ n: number }>(key))!;
        try {
          await state.records.put(key, { n: cur.value.n + 1 }, cur.version);
          return;
        } catch (err) {
          if (!(err instanceof VersionConflictError)) throw err;
        }
      }
    };
    await Promise.all(Array.from({ length: 10 }, increment));
    expect(await state.records.get(key)).toMatchObject({ value: { n: 10 }, version: 11 });
  });

  test("a record put with ttlSeconds (a map parent's pass record, a composite parent's wake) carries a TTL that far ahead, moved on at each put; one put without it carries none", async () => {
    const state = testState();
    const cluster = uniqueName('c');
    const key = { cluster, kind: 'map-pass', name: 'gone-parent' };
    const ttlOf = async (k: typeof key) =>
      Number(
        (await state.client.send(new GetItemCommand({ TableName: state.tableName, Key: itemKey(k) }))).Item?.[TABLE.timeToLiveAttribute]?.N,
      );
    const before = Math.floor(Date.now() / 1000);
    await state.records.put(key, { n: 1 }, 'any', { ttlSeconds: 86_400 });
    const first = await ttlOf(key);
    expect(first).toBeGreaterThanOrEqual(before + 86_400);
    expect(first).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 86_400);
    // A parent still served is written again at each pass: its record never expires under it.
    await state.records.put(key, { n: 2 }, 'any', { ttlSeconds: 86_400 });
    expect(await ttlOf(key)).toBeGreaterThanOrEqual(first);
    const kept = { cluster, kind: 'storage-control-plane', name: 'control-plane' };
    await state.records.put(kept, { n: 1 }, 'absent');
    expect(await ttlOf(kept)).toBeNaN();
  });

  test('records of different clusters never collide', async () => {
    const state = testState();
    const name = uniqueName('shared');
    await state.records.put({ cluster: 'one', kind: 'record/test', name }, 'a', 'absent');
    await state.records.put({ cluster: 'two', kind: 'record/test', name }, 'b', 'absent');
    expect((await state.records.get({ cluster: 'one', kind: 'record/test', name }))?.value).toBe('a');
  });
});
