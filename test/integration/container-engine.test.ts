// The container engine the project starts itself (docs/contributing/test-beds.md#the-container-engine), as a
// user's command line starts and stops it: a daemon of its own on a data-root of its own (here a fresh one, so
// that the bed's engine, which other files use, is left alone), shared by the runs that start it at once,
// stopped when the last lets go, and started again over what a killed one left behind.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { capture, exists, isAlive } from '../../local/process.ts';
import { containerEngineHost } from '../testbed/index.ts';

const script = fileURLToPath(new URL('../../local/container-engine.ts', import.meta.url));
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'outrigger-engine-test-'));
  env = { ...process.env, OUTRIGGER_ENGINE_DIR: dir };
});
afterAll(async () => {
  await capture(process.execPath, [script, 'stop'], { env });
  await rm(dir, { recursive: true, force: true });
});

async function cli(command: string): Promise<string> {
  const out = await capture(process.execPath, [script, command], { env });
  if (out.code !== 0) throw new Error(`container-engine.ts ${command} exited with ${out.code}:\n${out.stderr}`);
  return out.stdout;
}

/** The engine's socket and pidfile, from what `env` prints. */
async function paths(): Promise<{ socket: string; pidFile: string }> {
  const socket = /DOCKER_HOST=unix:\/\/(\S+)/.exec(await cli('env'))![1]!;
  return { socket, pidFile: join(socket, '..', 'dockerd.pid') };
}

async function dockerVersion(host: string): Promise<string> {
  const out = await capture('docker', ['version', '--format', '{{.Server.Version}}'], { env: { ...process.env, DOCKER_HOST: host } });
  return out.code === 0 ? out.stdout.trim() : `failed: ${out.stderr}`;
}

test('the bed has an engine of its own, not the default socket', async () => {
  const host = containerEngineHost();
  expect(host).not.toBe('unix:///var/run/docker.sock');
  expect(await dockerVersion(host)).toMatch(/^\d+\.\d+/);
});

test('start runs a private daemon; stop ends it and removes its socket', async () => {
  const printed = await cli('start');
  const { socket, pidFile } = await paths();
  expect(printed).toContain(`DOCKER_HOST=unix://${socket}`);
  expect(socket.length).toBeLessThan(108);
  expect(await dockerVersion(`unix://${socket}`)).toMatch(/^\d+\.\d+/);
  const pid = Number(await readFile(pidFile, 'utf8'));
  const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
  expect(cmdline).toEqual(expect.arrayContaining([`--data-root=${join(dir, 'data')}`, '--bridge=none', '--iptables=false']));
  await cli('stop');
  expect(isAlive(pid)).toBe(false);
  expect(await exists(socket)).toBe(false);
});

test('a daemon killed earlier leaves a pidfile, a socket and mounts; the next start cleans them and answers', async () => {
  await cli('start');
  const { socket, pidFile } = await paths();
  const pid = Number(await readFile(pidFile, 'utf8'));
  process.kill(pid, 'SIGKILL');
  while (isAlive(pid)) await sleep(50);
  expect(await exists(socket)).toBe(true);
  expect(await readFile('/proc/self/mounts', 'utf8')).toContain(` ${join(dir, 'data')} `);
  await cli('start');
  const again = Number(await readFile(pidFile, 'utf8'));
  expect(again).not.toBe(pid);
  expect(await dockerVersion(`unix://${socket}`)).toMatch(/^\d+\.\d+/);
  await cli('stop');
  expect(isAlive(again)).toBe(false);
  // Nothing is left mounted or in /tmp: the data-root can be removed.
  expect(await readFile('/proc/self/mounts', 'utf8')).not.toContain(dir);
  expect(await exists(join(socket, '..'))).toBe(false);
});

test('a run holding the engine keeps it up past a stop; the last to let go stops it', async () => {
  const holder = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { startContainerEngine } = await import(${JSON.stringify(script)}); await startContainerEngine(); console.log('held'); setInterval(() => {}, 1000);`,
    ],
    { env, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    await new Promise<void>((resolve) => holder.stdout!.once('data', () => resolve()));
    await cli('start');
    const { socket, pidFile } = await paths();
    const pid = Number(await readFile(pidFile, 'utf8'));
    await cli('stop');
    expect(isAlive(pid)).toBe(true);
    expect(await dockerVersion(`unix://${socket}`)).toMatch(/^\d+\.\d+/);
    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    // The holder is gone without letting go (a crashed run): its lease is dead, so the next stop ends the daemon.
    await cli('start');
    await cli('stop');
    expect(isAlive(pid)).toBe(false);
  } finally {
    holder.kill('SIGKILL');
  }
});
