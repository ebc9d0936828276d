// Seed 004's case walkthrough on three real apiservers: a rolling upgrade (each apiserver restarted from
// Kubernetes 1.34 emulation to 1.35, which moves resource.k8s.io's storage versions), apiserver 3 rolled back
// at minute 22 after a migration that finished within a minute, and upgraded again. One reporter per
// apiserver reads its own apiserver's discovery. At every step, whatever etcd holds is in persisted.
import { pollReporter } from '../../functions/storage/poll.ts';
import { EMULATE_PREVIOUS_MINOR } from '../../local/apiserver.ts';
import { startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { GROUP, storageScene } from '../testbed/storage-scene.ts';

const REPORTERS = ['apiserver-1', 'apiserver-2', 'apiserver-3'];

let cp: TestControlPlane;

beforeAll(async () => {
  cp = await startTestControlPlane({ apiservers: 3, apiserverFlags: EMULATE_PREVIOUS_MINOR });
  process.stderr.write(`[control plane] 3 apiservers at 1.34 emulation ready in ${cp.startedInMs} ms\n`);
}, 180_000);

afterAll(async () => {
  await cp?.stop();
});

test('the HA case walkthrough with a real rolling upgrade and rollback: persisted always covers what etcd holds, and narrows only after every apiserver confirms', async () => {
  const scene = storageScene(cp, { reporters: REPORTERS });
  const { at, write, stored, migrateAll, persisted } = scene;
  const poll = async () => {
    for (const id of REPORTERS) await pollReporter(scene.ctx, { id, client: cp.clientOf(id, 'outrigger') }, { groups: [GROUP] });
  };

  // Before the walkthrough: all three at 1.34 (v1 here), first sight migrated and narrowed to [v1].
  await write('apiserver-1');
  await poll();
  expect(await migrateAll()).toBe(1);
  at(10);
  await poll();
  const [v1] = await persisted('prelude');
  expect(await persisted('prelude')).toEqual([v1]);

  // The walkthrough's minute m is the scene's 20 + m; the schedule polls every 10 minutes throughout.
  at(20);
  await poll();
  // 3: the rolling upgrade starts with apiserver 1, which writes in v2 at once.
  at(23);
  await cp.restartApiserver('apiserver-1');
  await write('apiserver-1');
  // 10: reporters see v2, v1, v1: persisted [v1, v2], no migration (no consensus).
  at(30);
  await poll();
  const persisted10 = await persisted('minute 10');
  const v2 = persisted10.find((h) => h !== v1)!;
  expect(persisted10).toEqual([v1, v2]);
  expect(await migrateAll()).toBe(0);
  // 12 and 18: apiservers 2 and 3 upgraded.
  at(32);
  await cp.restartApiserver('apiserver-2');
  at(38);
  await cp.restartApiserver('apiserver-3');
  // 20: consensus on v2: the leader starts a migration, and it finishes within a minute (its event reaches the leader).
  at(40);
  await poll();
  at(41);
  expect(await migrateAll()).toBe(1);
  expect(await persisted('minute 21')).toEqual([v1, v2]);
  // 22: apiserver 3 is rolled back, and writes in v1 again.
  at(42);
  await cp.restartApiserver('apiserver-3', EMULATE_PREVIOUS_MINOR);
  expect(await stored(await write('apiserver-3'))).toBe(v1);
  await persisted('minute 22');
  // 30: apiserver 3's reporter sees v1. Persisted was never narrowed to [v2]: the success waited for every
  // reporter to confirm v2 after it, and apiserver 3's reporter never did.
  at(50);
  await poll();
  expect(await persisted('minute 30')).toEqual([v1, v2]);
  // 34: apiserver 3 upgraded again; 40: consensus, a new migration (the epoch moved) rewrites the v1 objects.
  at(54);
  await cp.restartApiserver('apiserver-3');
  at(60);
  await poll();
  at(61);
  expect(await migrateAll()).toBe(1);
  expect(await persisted('minute 41')).toEqual([v1, v2]);
  // 50: every reporter confirms v2 after the success: persisted narrows, and etcd holds v2 only.
  at(70);
  await poll();
  expect(await persisted('minute 50')).toEqual([v2]);
}, 300_000);
