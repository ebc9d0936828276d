// A control plane reached through one endpoint only (a load balancer in front of three apiservers, as EKS
// gives): one reporter, discovery sampled over fresh connections, the apiservers' identity leases watched. A
// rolling upgrade, a rollback of apiserver 3 after a migration succeeded, and the upgrade again: at every step
// whatever etcd holds is in persisted, nothing starts or narrows until the control plane has been stable for a
// period, and a migration made before a change never narrows. The storage settings are those of the
// clusters.json that docs/getting-started/deploy.md's steps write, verbatim: the documented deploy is the tested one.
import { storagePlan } from '../../shared/clusters.ts';
import { deployableClusters } from '../../infra/config.ts';
import { CA_DATA } from '../unit/clusters.ts';
import { deployedClustersJson } from '../testbed/deploy-docs.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import { EMULATE_PREVIOUS_MINOR } from '../../local/apiserver.ts';
import { startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { GROUP, storageScene } from '../testbed/storage-scene.ts';

let cp: TestControlPlane;

beforeAll(async () => {
  cp = await startTestControlPlane({ apiservers: 3, apiserverFlags: EMULATE_PREVIOUS_MINOR });
}, 180_000);

afterAll(async () => {
  await cp?.stop();
});

test('one endpoint, as the deploy steps configure it: persisted always covers what etcd holds; no start or narrowing within a period of an apiserver restart', async () => {
  // As EKS describes a cluster; the stack's synth accepts the configuration before the functions read it.
  const clusters = await deployedClustersJson({ caData: CA_DATA });
  const [config] = deployableClusters(clusters as unknown[]);
  const scene = storageScene(cp, storagePlan(config!));
  const { at, write, stored, migrateAll, persisted } = scene;
  // Through the load balancer only: each sample a client of its own, so a connection of its own.
  const poll = () =>
    pollReporter(scene.ctx, { id: 'apiserver', client: cp.client('outrigger'), sample: () => cp.client('outrigger') }, { groups: [GROUP] });

  await write('apiserver-1');
  // 0: first sight; the control plane is new to Outrigger, so nothing starts for a period.
  await poll();
  expect(await migrateAll()).toBe(0);
  // 10: stable for a period: the migration of first sight runs; 20: confirmed, narrowed to v1.
  at(10);
  await poll();
  expect(await migrateAll()).toBe(1);
  at(20);
  await poll();
  const [v1] = await persisted('minute 20');
  expect(await persisted('minute 20')).toEqual([v1]);

  // 23-38: the rolling upgrade, with a v2 object written at once; the polls see new identities: no migration.
  at(23);
  await cp.restartApiserver('apiserver-1');
  await write('apiserver-1');
  at(30);
  await poll();
  const [, v2] = await persisted('minute 30');
  expect(v2).toBeDefined();
  expect(await migrateAll()).toBe(0);
  at(32);
  await cp.restartApiserver('apiserver-2');
  at(38);
  await cp.restartApiserver('apiserver-3');
  at(40);
  await poll();
  expect(await migrateAll()).toBe(0);
  expect(await persisted('minute 40')).toEqual([v1, v2]);
  // 50: a period without a change: the migration runs and succeeds.
  at(50);
  await poll();
  expect(await migrateAll()).toBe(1);
  // 52: apiserver 3 is rolled back and writes v1. 60: its new identity holds back narrowing, whatever the samples saw.
  at(52);
  await cp.restartApiserver('apiserver-3', EMULATE_PREVIOUS_MINOR);
  expect(await stored(await write('apiserver-3'))).toBe(v1);
  at(60);
  await poll();
  expect(await persisted('minute 60')).toEqual([v1, v2]);
  // 64: upgraded again; 70 a change, 80 stable: the migration made before the rollback no longer counts, a new one runs.
  at(64);
  await cp.restartApiserver('apiserver-3');
  at(70);
  await poll();
  expect(await migrateAll()).toBe(0);
  at(80);
  await poll();
  expect(await persisted('minute 80')).toEqual([v1, v2]);
  expect(await migrateAll()).toBe(1);
  // 90: confirmed: narrowed to v2.
  at(90);
  await poll();
  expect(await persisted('minute 90')).toEqual([v2]);
}, 300_000);
