// The container engine the project starts itself (docs/contributing/test-beds.md#the-container-engine): Debian's
// `docker.io` (Docker Engine 20.10), installed with apt when `dockerd` is missing, run as a daemon of the
// project's own beside any the user runs: its own socket, pidfile, exec-root, data-root and an empty config file
// (a user's /etc/docker/daemon.json would otherwise apply), no bridge and no iptables rules (containers use
// `--network host` or `none`). Every client call names its socket (DOCKER_HOST); /var/run/docker.sock is never
// touched.
//   node local/container-engine.ts start   starts it (or joins the one running) and prints its DOCKER_HOST
//   node local/container-engine.ts stop    lets it go: it stops once no test run uses it either
//   node local/container-engine.ts env     prints the variables a shell needs to use it with `docker`
//
// Its data-root is machine-level, under the user's cache directory ($XDG_CACHE_HOME or ~/.cache, or
// OUTRIGGER_ENGINE_DIR), not under the clone's .cache: like Go's build cache, it outlives a fresh clone, so the
// images built from the project's recipes (local/base-images.ts) and Docker's layer cache for the forwarder's
// Dockerfile are there for the next clone's run. The other way, a data-root per run with the images kept as
// `docker save` tarballs, costs a save and a load per image and run and keeps no layer cache for Dockerfile builds
// (figures: docs/contributing/test-beds.md#cost).
// One daemon serves one data-root: runs that want it at once share it. Each holds a lease (a file named by its pid;
// `start` from the command line holds `manual`), and the daemon is stopped when the last lease is let go; a lock
// directory makes the start and stop decisions one at a time.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { openSync, closeSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile, access, constants } from 'node:fs/promises';
import { request } from 'node:http';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { capture, isAlive, run, withLock, type Log } from './process.ts';

/** The machine-level directory of the engine: its data-root, leases, lock and log. */
export const engineDir =
  process.env.OUTRIGGER_ENGINE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'outrigger', 'container-engine');

/**
 * Where the daemon's socket, pidfile and exec-root are: under /tmp with a short name (a unix socket's path has at
 * most 107 bytes, and containerd's socket sits under the exec-root), one per engine directory.
 */
export const runDir = `/tmp/outrigger-engine-${createHash('sha256').update(engineDir).digest('hex').slice(0, 8)}`;
const socket = join(runDir, 'docker.sock');
const pidFile = join(runDir, 'dockerd.pid');
const dataRoot = join(engineDir, 'data');
const leases = join(engineDir, 'leases');
const lock = join(engineDir, 'lock');
const logFile = join(engineDir, 'dockerd.log');

/**
 * The environment of a `docker` client for this engine. DOCKER_BUILDKIT=0 takes the classic builder, which the
 * 20.10 daemon runs itself: a newer client would otherwise want its buildx plugin.
 */
export function engineEnv(): NodeJS.ProcessEnv {
  return { ...process.env, DOCKER_HOST: `unix://${socket}`, DOCKER_BUILDKIT: '0' };
}

export interface ContainerEngine {
  /** DOCKER_HOST for a client of this engine. */
  host: string;
  env: NodeJS.ProcessEnv;
  /** Runs `docker` against this engine and hands back its stdout; rejects with its output when it fails. */
  docker(...args: string[]): Promise<string>;
  /** Lets the engine go: the daemon stops when no other run holds it. */
  release(): Promise<void>;
}

/** Runs `docker` against the engine; rejects with the command and its output when it fails. */
export async function docker(...args: string[]): Promise<string> {
  const out = await capture('docker', args, { env: engineEnv() });
  if (out.code !== 0)
    throw new Error(`docker ${args.join(' ')} exited with ${out.code}:\n${out.stderr.slice(-4000)}${out.stdout.slice(-2000)}`);
  return out.stdout;
}

async function onPath(name: string): Promise<string | undefined> {
  for (const dir of [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/bin', '/sbin'].filter(Boolean)) {
    const file = join(dir, name);
    if (
      await access(file, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return file;
  }
  return undefined;
}

/**
 * The daemon's binary: `dockerd` on PATH (or OUTRIGGER_DOCKERD), else Debian's `docker.io` installed with apt,
 * which needs root. `docker.io` also brings containerd, runc and a 20.10 `docker` client.
 */
export async function ensureDockerd(log: Log = () => {}): Promise<string> {
  const given = process.env.OUTRIGGER_DOCKERD ?? (await onPath('dockerd'));
  if (given) return given;
  if (process.getuid?.() !== 0)
    throw new Error(
      'dockerd is missing and installing it needs root: run `sudo apt-get install -y --no-install-recommends docker.io` ' +
        '(or install Docker Engine another way), then run again as root: dockerd runs as root (docs/contributing/test-beds.md#the-container-engine)',
    );
  await withLock(
    join(engineDir, 'install.lock'),
    async () => {
      if (await onPath('dockerd')) return;
      log("installing Debian's docker.io with apt (first time: about 30 s)");
      const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
      await run('apt-get', ['update', '-q'], { env });
      await run('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'docker.io'], { env });
    },
    log,
    async () => (await onPath('dockerd')) !== undefined,
  );
  const installed = await onPath('dockerd');
  if (!installed) throw new Error('apt-get installed docker.io but no dockerd is on PATH or in /usr/sbin');
  return installed;
}

/** Whether the daemon answers on its socket. */
function pings(): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath: socket, path: '/_ping', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}

/** The pid of this engine's daemon when it runs: the pidfile's process, if it is a dockerd on this data-root. */
async function daemonPid(): Promise<number | undefined> {
  const pid = Number(await readFile(pidFile, 'utf8').catch(() => '0'));
  if (!(pid > 0) || !isAlive(pid)) return undefined;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.includes(dataRoot) ? pid : undefined;
}

async function liveLeases(): Promise<string[]> {
  const names = await readdir(leases).catch(() => [] as string[]);
  const live: string[] = [];
  for (const name of names) {
    if (name === 'manual' || isAlive(Number(name))) live.push(name);
    else await rm(join(leases, name), { force: true });
  }
  return live;
}

async function waitForPing(pid: number, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await pings())) {
    if (!isAlive(pid)) throw new Error(`dockerd exited while starting:\n${(await readFile(logFile, 'utf8').catch(() => '')).slice(-4000)}`);
    if (Date.now() > deadline)
      throw new Error(
        `dockerd did not answer on ${socket} within ${deadlineMs / 1000} s:\n${(await readFile(logFile, 'utf8')).slice(-4000)}`,
      );
    await sleep(100);
  }
}

/**
 * Unmounts what a daemon killed earlier left mounted under its exec-root and over its data-root (dockerd mounts
 * the data-root over itself), deepest first; with no daemon running, nothing else mounts there.
 */
async function unmountLeftovers(): Promise<void> {
  const mounts = (await readFile('/proc/self/mounts', 'utf8'))
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((point) => point === dataRoot || point.startsWith(`${dataRoot}/`) || point.startsWith(`${runDir}/`));
  for (const point of mounts.reverse()) await run('umount', ['-l', point]);
}

async function startDaemon(dockerd: string, log: Log): Promise<number> {
  // A daemon killed earlier leaves its socket and pidfile (dockerd refuses to start over a pidfile whose process
  // lives, so a reused pid would stop it too), and mounts; its containerd's state is under the exec-root, which
  // dockerd cleans.
  await unmountLeftovers();
  await rm(socket, { force: true });
  await rm(pidFile, { force: true });
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  await mkdir(dataRoot, { recursive: true });
  const config = join(engineDir, 'daemon.json');
  await writeFile(config, '{}\n');
  const out = openSync(logFile, 'w');
  const child = spawn(
    dockerd,
    [
      `--host=unix://${socket}`,
      `--pidfile=${pidFile}`,
      `--exec-root=${join(runDir, 'exec')}`,
      `--data-root=${dataRoot}`,
      `--config-file=${config}`,
      '--iptables=false',
      '--ip-forward=false',
      '--bridge=none',
    ],
    // Its own session: it outlives the process that starts it (`start` from the command line), and a Ctrl-C in a
    // terminal running the tests reaches the tests, whose teardown stops it, not the daemon mid-write.
    { detached: true, stdio: ['ignore', out, out] },
  );
  closeSync(out);
  child.unref();
  const pid = child.pid;
  if (!pid) throw new Error(`${dockerd} could not be started`);
  log(`started dockerd (pid ${pid}) on ${socket}, data-root ${dataRoot}`);
  await waitForPing(pid, 60_000);
  return pid;
}

/**
 * Starts the engine, or joins the one running on this data-root, and holds a lease on it until `release`.
 * `lease` names the holder: this process's pid (the default) or `manual` (the command line's `start`).
 */
export async function startContainerEngine(opts: { log?: Log; lease?: string } = {}): Promise<ContainerEngine> {
  const log = opts.log ?? (() => {});
  const lease = opts.lease ?? String(process.pid);
  const dockerd = await ensureDockerd(log);
  await withLock(
    lock,
    async () => {
      await mkdir(leases, { recursive: true });
      await writeFile(join(leases, lease), '');
      const pid = await daemonPid();
      if (pid) await waitForPing(pid, 60_000);
      else await startDaemon(dockerd, log);
    },
    log,
  );
  return { host: `unix://${socket}`, env: engineEnv(), docker, release: () => releaseContainerEngine(lease, log) };
}

/** Lets go of a lease; the daemon is stopped (SIGTERM, then SIGKILL after 30 s) when no live lease is left. */
export async function releaseContainerEngine(lease: string = String(process.pid), log: Log = () => {}): Promise<void> {
  await withLock(
    lock,
    async () => {
      await rm(join(leases, lease), { force: true });
      const holders = await liveLeases();
      if (holders.length > 0) {
        log(`the container engine stays up for ${holders.join(', ')}`);
        return;
      }
      const pid = await daemonPid();
      if (!pid) return;
      process.kill(pid, 'SIGTERM');
      for (let waited = 0; isAlive(pid); waited += 100) {
        if (waited === 30_000) process.kill(pid, 'SIGKILL');
        await sleep(100);
      }
      await unmountLeftovers();
      await rm(runDir, { recursive: true, force: true });
      log(`stopped dockerd (pid ${pid})`);
    },
    log,
  );
}

// No top-level await: jest's global setup loads this module with require(), which refuses one.
if (import.meta.main) {
  const log = (m: string) => process.stderr.write(`${m}\n`);
  const command = process.argv[2];
  const main = async () => {
    if (command === 'start') {
      const engine = await startContainerEngine({ log, lease: 'manual' });
      process.stdout.write(`export DOCKER_HOST=${engine.host} DOCKER_BUILDKIT=0\n`);
    } else if (command === 'stop') await releaseContainerEngine('manual', log);
    else if (command === 'env') process.stdout.write(`export DOCKER_HOST=unix://${socket} DOCKER_BUILDKIT=0\n`);
    else {
      process.stderr.write('usage: node local/container-engine.ts start|stop|env\n');
      process.exitCode = 2;
    }
  };
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
