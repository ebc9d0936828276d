// Child processes of the local runtime and the test bed: started with their output captured, stopped
// gracefully (SIGTERM, then SIGKILL after a grace period), never left behind.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { cacheDir, projectRoot } from './paths.ts';

export type Log = (message: string) => void;

export interface Captured {
  /** The exit code; null when a signal ended it. */
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to completion and hands back its exit code and whole output, whatever the code (the caller
 * decides what a failure is). Rejects only when it cannot be started, naming it as `name` (default `cmd`).
 */
export async function capture(cmd: string, args: string[], opts: SpawnOptions & { name?: string } = {}): Promise<Captured> {
  const { name = cmd, ...spawnOpts } = opts;
  const child = spawn(cmd, args, { ...spawnOpts, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
  // 'close', not 'exit': by then both streams have ended, so no output is missing.
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', (err) => reject(new Error(`${name} could not be started: ${err.message}`)));
    child.on('close', resolve);
  });
  return { code, stdout, stderr };
}

/** Runs a command to completion; rejects with its last output lines when it fails. */
export async function run(cmd: string, args: string[], opts: SpawnOptions & { log?: Log } = {}): Promise<void> {
  const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  const tail: string[] = [];
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) {
      if (!line.trim()) continue;
      tail.push(line);
      if (tail.length > 40) tail.shift();
      opts.log?.(line);
    }
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', (err) => reject(new Error(`${cmd} could not be started: ${err.message}`)));
    child.on('exit', resolve);
  });
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${tail.join('\n')}`);
}

export async function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * A digest of files' paths and contents, the stamp of what is built from them. Paths count relative to the
 * project, so that every clone and worktree of one commit agrees on the stamp: a cache shared between them is
 * rebuilt only when an input changes, never because another checkout used it.
 */
export async function fingerprint(files: string[]): Promise<string> {
  const h = createHash('sha256');
  for (const f of files)
    h.update(relative(projectRoot, f))
      .update('\0')
      .update(await readFile(f))
      .update('\0');
  return h.digest('hex');
}

export async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * The environment of a `go build` of one of the project's Go programs (buildGoProgram): go.sum is committed and
 * -mod=readonly verifies every download against it; a module go.sum does not list yet is checked against the
 * checksum database, which the Go module proxy serves (docs/contributing/test-beds.md#what-the-project-installs).
 */
export function goBuildEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    GOFLAGS: '-mod=readonly',
    GOSUMDB: 'sum.golang.org',
    GOTOOLCHAIN: 'local',
    GOPROXY: process.env.GOPROXY ?? 'https://proxy.golang.org',
  };
}

/**
 * Runs `build` unless `stampFile` already records `stamp`. A lock directory keeps two processes (the test
 * setup and a local runtime, say) from building the same thing at once.
 */
export async function buildOnce(stampFile: string, stamp: string, build: () => Promise<void>, log: Log): Promise<void> {
  const current = await readFile(stampFile, 'utf8').catch(() => '');
  if (current === stamp) return;
  await mkdir(dirname(stampFile), { recursive: true });
  const built = async () => (await readFile(stampFile, 'utf8').catch(() => '')) === stamp;
  await withLock(
    `${stampFile}.lock`,
    async () => {
      if (await built()) return;
      await build();
      await writeFile(stampFile, stamp);
    },
    log,
    built,
  );
}

/**
 * Runs `work` holding the lock directory `lock`, which holds the holder's pid; a lock whose process is gone is free.
 * The directory is made with its pid file inside and renamed into place, and renamed away before it is removed, so
 * no other process ever sees it without its pid (a lock seen without one would be waited on for ever). While another
 * process holds it, `done` (when given) is asked each second whether that process already did the work, and if so
 * `work` is not run.
 */
export async function withLock<T>(lock: string, work: () => Promise<T>, log: Log, done?: () => Promise<boolean>): Promise<T | undefined> {
  const mine = `${lock}.${process.pid}-${randomBytes(4).toString('hex')}`;
  await mkdir(mine, { recursive: true });
  await writeFile(join(mine, 'pid'), String(process.pid));
  try {
    for (let waited = 0; ; waited += 1) {
      try {
        // Onto a lock held (a directory with its pid file), rename fails.
        await rename(mine, lock);
        break;
      } catch (err) {
        if (!['ENOTEMPTY', 'EEXIST'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
        // A process killed midway leaves its lock behind; a lock whose process is gone is free.
        const holder = Number(await readFile(join(lock, 'pid'), 'utf8').catch(() => '0'));
        if (holder > 0 && !isAlive(holder)) {
          await release(lock);
          continue;
        }
        if (waited === 0) log(`waiting for another process (${lock})`);
        if (waited > 3600) throw new Error(`${lock} is held for over an hour; remove it if no build is running`);
        await sleep(1000);
        if (done && (await done())) return undefined;
      }
    }
  } finally {
    await rm(mine, { recursive: true, force: true });
  }
  try {
    return await work();
  } finally {
    await release(lock);
  }
}

/** Removes a lock directory: renamed away first, so that it never exists without its pid file. */
async function release(lock: string): Promise<void> {
  const gone = `${lock}.released-${randomBytes(4).toString('hex')}`;
  try {
    await rename(lock, gone);
  } catch {
    return; // released by another process already
  }
  await rm(gone, { recursive: true, force: true });
}

/**
 * One of the project's Go programs (test/cluster, test/helm, test/registry, test/kwok, test/lws, bench/storage-trigger), built into `binary` once, and again
 * only when its sources (go.mod, go.sum, *.go), `recipe` (the module that asks, with its program's flags) or this
 * module (the flags every build shares) change.
 * `ldflags` gets go.mod's text, for version stamps; `after` runs once the binary is there.
 */
export async function buildGoProgram(opts: {
  what: string;
  /** How long a first build takes, with Go's caches empty. */
  firstTime?: string;
  sourceDir: string;
  /** The package to build, when not the module's own (`.`): a command of a module it requires as a tool. */
  pkg?: string;
  binary: string;
  recipe: string;
  ldflags?: (goMod: string) => string[];
  after?: () => Promise<void>;
  log: Log;
}): Promise<string> {
  const { sourceDir, binary, log } = opts;
  const sources = (await readdir(sourceDir)).filter((f) => f === 'go.mod' || f === 'go.sum' || f.endsWith('.go')).sort();
  // This module holds the flags every build shares, `recipe` those of its program.
  const stamp = await fingerprint([...sources.map((f) => join(sourceDir, f)), fileURLToPath(opts.recipe), fileURLToPath(import.meta.url)]);
  await buildOnce(
    `${binary}.stamp`,
    stamp,
    async () => {
      log(`building ${opts.what} from its Go module${opts.firstTime ? ` (first time: ${opts.firstTime})` : ''}`);
      const started = Date.now();
      const ldflags = ['-s', '-w', ...(opts.ldflags?.(await readFile(join(sourceDir, 'go.mod'), 'utf8')) ?? [])];
      await run('go', ['build', '-trimpath', `-ldflags=${ldflags.join(' ')}`, '-o', binary, opts.pkg ?? '.'], {
        cwd: sourceDir,
        env: goBuildEnv(),
      });
      await opts.after?.();
      log(`built ${binary} in ${Math.round((Date.now() - started) / 1000)} s`);
    },
    log,
  );
  return binary;
}

/** Whether a process exists (EPERM: it does, but belongs to someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Maven's flags for fetching a pom's jars: -C fails on a checksum mismatch, where Maven's default only warns. */
export const MAVEN_FETCH_FLAGS = ['-B', '-q', '-C'] as const;

/**
 * The jars a Maven pom names (a Java server and its dependencies), fetched from Maven Central into
 * `.cache/<name>/lib` once per version of the pom.
 */
export async function mavenLibrary(name: string, pom: string, log: Log): Promise<string> {
  const libDir = join(cacheDir, name, 'lib');
  await buildOnce(
    join(cacheDir, name, 'stamp'),
    await fingerprint([pom]),
    async () => {
      log(`fetching ${name} from Maven Central`);
      await run('rm', ['-rf', libDir]);
      await run('mvn', [...MAVEN_FETCH_FLAGS, '-f', pom, 'dependency:copy-dependencies', `-DoutputDirectory=${libDir}`]);
    },
    log,
  );
  return libDir;
}

export interface LocalServer {
  endpoint: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Starts a server process on loopback and waits until `answers(endpoint)` holds (60 s at most). A server that
 * exits or never answers is stopped and reported with the tail of its stderr.
 */
// eslint-disable-next-line max-params -- name, command line, port, readiness probe and log file are unrelated to each other; five servers pass them so
export async function startLocalServer(
  name: string,
  cmd: string,
  args: string[],
  port: number,
  answers: (endpoint: string) => Promise<boolean>,
  /** Where its whole output (stdout and stderr) goes too, for a test that reads it or keeps it. */
  logFile?: string,
): Promise<LocalServer> {
  const child = spawn(cmd, args, { stdio: ['ignore', logFile ? 'pipe' : 'ignore', 'pipe'] });
  const log = logFile ? createWriteStream(logFile, { flags: 'a' }) : undefined;
  if (log) child.stdout?.pipe(log);
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => {
    log?.write(b);
    stderr = (stderr + b.toString()).slice(-4000);
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${stderr}`);
    if (await answers(endpoint)) break;
    if (Date.now() > deadline) {
      await stopProcess(child);
      throw new Error(`${name} did not answer on ${endpoint} within 60 s:\n${stderr}`);
    }
    await sleep(200);
  }
  return { endpoint, pid: child.pid ?? 0, stop: () => stopProcess(child) };
}
