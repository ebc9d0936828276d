// A control plane reached through one endpoint only (a load balancer in front of three apiservers, as EKS
// gives): one reporter, discovery sampled over fresh connections, the apiservers' identity leases watched. A
// rolling upgrade, a rollback of apiserver 3 after a migration succeeded, and the upgrade again: at every step
// whatever etcd holds is in persisted, nothing starts or narrows until the control plane has been stable for a
// period, and a migration made before a change never narrows.
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
const MINUTE = 60_000;

let cp: TestControlPlane;

beforeAll(async () => {
  cp = await startTestControlPlane({ apiservers: 3, apiserverFlags: EMULATE_PREVIOUS_MINOR });
}, 180_000);

afterAll(async () => {
  await cp?.stop();
});

test('one endpoint, sampled: persisted always covers what etcd holds; no start or narrowing within a period of an apiserver restart', async () => {
  const start = Date.now();
  let minute = 0;
  const now = () => new Date(start + minute * MINUTE + (Date.now() - start) / 1000);
  const ctx: StorageContext = {
    cluster: uniqueName('lb'),
    kube: cp.client('outrigger'),
    state: testState(),
    holder: `test-${randomUUID()}`,
    reporters: ['apiserver'],
    mode: 'outrigger',
    periodMs: 10 * MINUTE,
    now,
    samples: 4,
  };
  const migrator: MigratorContext = { cluster: ctx.cluster, kube: cp.client('migrator'), state: ctx.state, holder: `migrator-${randomUUID()}`, now };
  const state = () => ctx.kube.get<StorageState>(storageStates, storageStateName({ group: GROUP, resource: 'deviceclasses' }));
  // Through the load balancer only: each sample a client of its own, so a connection of its own.
  const poll = () => pollReporter(ctx, { id: 'apiserver', client: cp.client('outrigger'), sample: () => cp.client('outrigger') }, { groups: [GROUP] });
  const migrateAll = async () => {
    const pending = (await ctx.kube.listAll<StorageVersionMigration>(migrations)).filter((m) => isOutriggers(m) && !isTerminal(phaseOf(m)));
    for (const m of pending) await runMigration(migrator, m.metadata.name!);
    await lead(ctx);
    return pending.filter((m) => m.spec.resource.resource === 'deviceclasses').length;
  };
  const stored = async (name: string) => {
    const version = /resource\.k8s\.io\/(v\w+)/.exec((await etcdRead(`/registry/deviceclasses/${name}`, cp.etcdUrl))!.toString('latin1'))?.[1];
    return storageVersionHash(GROUP, version!, 'DeviceClass');
  };
  const classes: string[] = [];
  const write = async (apiserver: string) => {
    const name = uniqueName('dc');
    await cp.clientOf(apiserver, 'admin').create(deviceClasses, { apiVersion: `${GROUP}/v1`, kind: 'DeviceClass', metadata: { name }, spec: {} });
    classes.push(name);
  };
  const persisted = async (when: string) => {
    const p = (await state()).status?.persistedStorageVersionHashes ?? [UNKNOWN];
    if (!p.includes(UNKNOWN)) for (const name of classes) expect({ when, name, covered: p.includes(await stored(name)) }).toEqual({ when, name, covered: true });
    return p;
  };

  await write('apiserver-1');
  // 0: first sight; the control plane is new to Outrigger, so nothing starts for a period.
  await poll();
  expect(await migrateAll()).toBe(0);
  // 10: stable for a period: the migration of first sight runs; 20: confirmed, narrowed to v1.
  minute = 10;
  await poll();
  expect(await migrateAll()).toBe(1);
  minute = 20;
  await poll();
  const [v1] = await persisted('minute 20');
  expect((await state()).status?.persistedStorageVersionHashes).toEqual([v1]);

  // 23-38: the rolling upgrade, with a v2 object written at once; the polls see new identities: no migration.
  minute = 23;
  await cp.restartApiserver('apiserver-1');
  await write('apiserver-1');
  minute = 30;
  await poll();
  const [, v2] = await persisted('minute 30');
  expect(v2).toBeDefined();
  expect(await migrateAll()).toBe(0);
  minute = 32;
  await cp.restartApiserver('apiserver-2');
  minute = 38;
  await cp.restartApiserver('apiserver-3');
  minute = 40;
  await poll();
  expect(await migrateAll()).toBe(0);
  expect(await persisted('minute 40')).toEqual([v1, v2]);
  // 50: a period without a change: the migration runs and succeeds.
  minute = 50;
  await poll();
  expect(await migrateAll()).toBe(1);
  // 52: apiserver 3 is rolled back and writes v1. 60: its new identity holds back narrowing, whatever the samples saw.
  minute = 52;
  await cp.restartApiserver('apiserver-3', EMULATE_PREVIOUS_MINOR);
  await write('apiserver-3');
  expect(await stored(classes.at(-1)!)).toBe(v1);
  minute = 60;
  await poll();
  expect(await persisted('minute 60')).toEqual([v1, v2]);
  // 64: upgraded again; 70 a change, 80 stable: the migration made before the rollback no longer counts, a new one runs.
  minute = 64;
  await cp.restartApiserver('apiserver-3');
  minute = 70;
  await poll();
  expect(await migrateAll()).toBe(0);
  minute = 80;
  await poll();
  expect(await persisted('minute 80')).toEqual([v1, v2]);
  expect(await migrateAll()).toBe(1);
  // 90: confirmed: narrowed to v2, and etcd holds v2 only.
  minute = 90;
  await poll();
  expect(await persisted('minute 90')).toEqual([v2]);
  for (const name of classes) expect(await stored(name)).toBe(v2);
}, 300_000);
