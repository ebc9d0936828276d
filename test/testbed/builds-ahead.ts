// test/testbed/prebuild.ts run beside the tests at the lowest CPU priority (nice 19: it gets what the tests leave
// idle), in a process group of its own so that the global teardown can stop it when a run ends first: a file that
// needs one of its programs and runs before its build ends waits for that build (buildOnce's lock).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Log } from '../../local/process.ts';

const script = fileURLToPath(new URL('./prebuild.ts', import.meta.url));
let child: ChildProcess | undefined;

export function startBuildsAhead(log: Log): void {
  child = spawn('nice', ['-n', '19', process.execPath, script], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  child.stderr?.on('data', (b: Buffer) => process.stderr.write(b));
  child.on('error', (err) => log(`builds ahead of need could not start: ${err.message}`));
  child.unref();
}

/** Stops the builds if they still run (their locks are freed by the next build, which finds their process gone). */
export function stopBuildsAhead(): void {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    // already gone
  }
}
