// Seed 004's case walkthrough on three real apiservers: a rolling upgrade (each apiserver restarted from
// Kubernetes 1.34 emulation to 1.35, which moves resource.k8s.io's storage versions), apiserver 3 rolled back
// at minute 22 after a migration that finished within a minute, and upgraded again. One reporter per
// apiserver reads its own apiserver's discovery. At every step, whatever etcd holds is in persisted.
import { randomUUID } from 'node:crypto';
import { lead } from '../../functions/storage/leader.ts';
import { runMigration, type MigratorContext } from '../../functions/storage/migrator.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import type { StorageContext } from '../../functions/storage/context.ts';
import { gvr } from '../../shared/kube/index.ts';
import { isOutriggers, isTerminal, phaseOf, storageStateName, storageVersionHash, UNKNOWN, type StorageState, type StorageVersionMigration } from '../../shared/storage/index.ts';
import { EMULATE_PREVIOUS_MINOR } from '../../local/apiserver.ts';
import { startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { etcdRead } from '../testbed/etcd.ts';
import { testState, uniqueName } from '../testbed/index.ts';

const GROUP = 'resource.k8s.io';
const deviceClasses = gvr(GROUP, 'v1', 'deviceclasses');
const storageStates = gvr('migration.k8s.io', 'v1alpha1', 'storagestates');
const migrations = gvr('migration.k8s.io', 'v1alpha1', 'storageversionmigrations');
const REPORTERS = ['apiserver-1', 'apiserver-2', 'apiserver-3'];
const MINUTE = 60_000;

let cp: TestControlPlane;

beforeAll(async () => {
  cp = await startTestControlPlane({ apiservers: 3, apiserverFlags: EMULATE_PREVIOUS_MINOR });
  process.stderr.write(`[control plane] 3 apiservers at 1.34 emulation ready in ${cp.startedInMs} ms\n`);
}, 180_000);

afterAll(async () => {
  await cp?.stop();
});

test("seed 004's walkthrough with a real rolling upgrade and rollback: persisted always covers what etcd holds, and narrows only after every apiserver confirms", async () => {
  // The simulated clock: each step is a poll period's minutes on, as the schedule would run them.
  const start = Date.now();
  let minute = 0;
  const now = () => new Date(start + minute * MINUTE + (Date.now() - start) / 1000);
  const ctx: StorageContext = {
    cluster: uniqueName('ha'),
    kube: cp.client('outrigger'),
    state: testState(),
    holder: `test-${randomUUID()}`,
    reporters: REPORTERS,
    mode: 'outrigger',
    periodMs: 10 * MINUTE,
    now,
  };
  const migrator: MigratorContext = { cluster: ctx.cluster, kube: cp.client('migrator'), state: ctx.state, holder: `migrator-${randomUUID()}`, now };
  const stateName = storageStateName({ group: GROUP, resource: 'deviceclasses' });
  const state = () => ctx.kube.get<StorageState>(storageStates, stateName);
  const poll = async (reporters = REPORTERS) => {
    for (const id of reporters) await pollReporter(ctx, { id, client: cp.clientOf(id, 'outrigger') }, { groups: [GROUP] });
  };
  const migrateAll = async () => {
    const pending = (await ctx.kube.listAll<StorageVersionMigration>(migrations)).filter((m) => isOutriggers(m) && !isTerminal(phaseOf(m)));
    for (const m of pending) await runMigration(migrator, m.metadata.name!);
    // Every resource.k8s.io resource changes alike; the count is DeviceClasses'.
    return pending.filter((m) => m.spec.resource.resource === 'deviceclasses').length;
  };
  // Which storage version each DeviceClass is stored in, read from etcd (protobuf: the apiVersion is plain text).
  const hashOfStored = (bytes: Buffer) => {
    const version = /resource\.k8s\.io\/(v\w+)/.exec(bytes.toString('latin1'))?.[1];
    if (!version) throw new Error('no apiVersion in the stored bytes');
    return storageVersionHash(GROUP, version, 'DeviceClass');
  };
  const classes: string[] = [];
  const write = async (apiserver: string) => {
    const name = uniqueName('dc');
    await cp.clientOf(apiserver, 'admin').create(deviceClasses, { apiVersion: `${GROUP}/v1`, kind: 'DeviceClass', metadata: { name }, spec: {} });
    classes.push(name);
  };
  const checkCovered = async (when: string) => {
    const persisted = (await state()).status?.persistedStorageVersionHashes ?? [UNKNOWN];
    if (persisted.includes(UNKNOWN)) return persisted;
    for (const name of classes) {
      const bytes = await etcdRead(`/registry/deviceclasses/${name}`, cp.etcdUrl);
      expect({ when, name, covered: persisted.includes(hashOfStored(bytes!)) }).toEqual({ when, name, covered: true });
    }
    return persisted;
  };

  // Before the walkthrough: all three at 1.34 (v1 here), first sight migrated and narrowed to [v1].
  await write('apiserver-1');
  await poll();
  expect(await migrateAll()).toBe(1);
  minute = 10;
  await poll();
  const [v1] = await checkCovered('prelude');
  expect((await state()).status?.persistedStorageVersionHashes).toEqual([v1]);

  const at = async (m: number) => {
    minute = 20 + m;
  };
  // 0: the walkthrough's first row; the schedule polls every 10 minutes throughout.
  await at(0);
  await poll();
  // 3: the rolling upgrade starts with apiserver 1, which writes in v2 at once.
  await at(3);
  await cp.restartApiserver('apiserver-1');
  await write('apiserver-1');
  // 10: reporters see v2, v1, v1: persisted [v1, v2], no migration (no consensus).
  await at(10);
  await poll();
  const persisted10 = await checkCovered('minute 10');
  const v2 = persisted10.find((h) => h !== v1)!;
  expect(persisted10).toEqual([v1, v2]);
  expect(await migrateAll()).toBe(0);
  // 12 and 18: apiservers 2 and 3 upgraded.
  await at(12);
  await cp.restartApiserver('apiserver-2');
  await at(18);
  await cp.restartApiserver('apiserver-3');
  // 20: consensus on v2: the leader starts a migration, and it finishes within a minute.
  await at(20);
  await poll();
  await at(21);
  expect(await migrateAll()).toBe(1);
  // The migration's event reaches the leader at once.
  await lead(ctx);
  expect(await checkCovered('minute 21')).toEqual([v1, v2]);
  // 22: apiserver 3 is rolled back, and writes in v1 again.
  await at(22);
  await cp.restartApiserver('apiserver-3', EMULATE_PREVIOUS_MINOR);
  await write('apiserver-3');
  expect(hashOfStored((await etcdRead(`/registry/deviceclasses/${classes.at(-1)}`, cp.etcdUrl))!)).toBe(v1);
  await checkCovered('minute 22');
  // 30: apiserver 3's reporter sees v1. Persisted was never narrowed to [v2]: the success waited for every
  // reporter to confirm v2 after it, and apiserver 3's reporter never did.
  await at(30);
  await poll();
  expect(await checkCovered('minute 30')).toEqual([v1, v2]);
  // 34: apiserver 3 upgraded again; 40: consensus, a new migration (the epoch moved) rewrites the v1 objects.
  await at(34);
  await cp.restartApiserver('apiserver-3');
  await at(40);
  await poll();
  await at(41);
  expect(await migrateAll()).toBe(1);
  await lead(ctx);
  expect(await checkCovered('minute 41')).toEqual([v1, v2]);
  // 50: every reporter confirms v2 after the success: persisted narrows, and etcd holds v2 only.
  await at(50);
  await poll();
  expect(await checkCovered('minute 50')).toEqual([v2]);
  for (const name of classes) expect(hashOfStored((await etcdRead(`/registry/deviceclasses/${name}`, cp.etcdUrl))!)).toBe(v2);
}, 300_000);
