// withLock (local/process.ts), the lock directory that keeps two processes from building or starting the same
// thing at once: whoever looks at the lock while it is held sees its holder's pid, so a held lock is never taken
// for a dead one, and a lock left behind by a dead process is taken over.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { withLock } from '../../local/process.ts';

const processTs = fileURLToPath(new URL('../../local/process.ts', import.meta.url));
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'outrigger-lock-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

test('while held, the lock always names its holder, from the moment it exists to its release', async () => {
  const lock = join(dir, 'lock');
  // Another process takes and releases the lock over and over while this one watches it.
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { withLock } = await import(${JSON.stringify(processTs)});
       for (let i = 0; i < 200; i++) await withLock(${JSON.stringify(lock)}, async () => {}, () => {});`,
    ],
    { stdio: 'inherit' },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let seen = 0;
  let withoutPid = 0;
  while (child.exitCode === null) {
    const entries = await readdir(lock).catch(() => undefined);
    if (!entries) continue;
    seen += 1;
    const pid = await readFile(join(lock, 'pid'), 'utf8').catch((err: NodeJS.ErrnoException) => err.code);
    // The lock directory gone between the two reads is a release, not a lock without its pid.
    if (pid === 'ENOENT' && (await readdir(lock).catch(() => undefined)) !== undefined) withoutPid += 1;
  }
  expect(await exited).toBe(0);
  expect(seen).toBeGreaterThan(0);
  expect(withoutPid).toBe(0);
});

test("a lock whose holder is gone is taken over; a live holder's is waited for", async () => {
  const lock = join(dir, 'lock');
  await mkdir(lock);
  await writeFile(join(lock, 'pid'), '999999999');
  expect(
    await withLock(
      lock,
      async () => 'ran',
      () => {},
    ),
  ).toBe('ran');
  await mkdir(lock);
  await writeFile(join(lock, 'pid'), String(process.pid === 1 ? 2 : 1));
  let waited = false;
  expect(
    await withLock(
      lock,
      async () => 'ran',
      () => (waited = true),
      async () => true,
    ),
  ).toBeUndefined();
  expect(waited).toBe(true);
  await rm(lock, { recursive: true });
  expect(await readdir(dir)).toEqual([]);
});
