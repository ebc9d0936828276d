// test/testbed/prebuild.ts run beside the tests at the lowest CPU priority (nice 19: it gets what the tests leave
// idle), in a process group of its own so that the global teardown can stop it when a run ends first: a file that
// needs one of its programs and runs before its build ends waits for that build (buildOnce's lock).
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Log } from '../../local/process.ts';

const script = fileURLToPath(new URL('./prebuild.ts', import.meta.url));
let child: ChildProcess | undefined;

export function startBuildsAhead(log: Log): void {
  child = spawn('nice', ['-n', '19', process.execPath, script], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  child.stderr?.on('data', (b: Buffer) => process.stderr.write(b));
  child.on('error', (err) => log(`builds ahead of need could not start: ${err.message}`));
  child.unref();
  // Its own session is also its own scheduling group where Linux groups by session (sched_autogroup), and groups
  // share the CPU equally whatever their processes' nice values: the group itself is made nice, or the builds take
  // half the CPU from the test bed's own build (a cold run: the four ended before it, at 424-491 s, it at 571 s).
  if (child.pid)
    try {
      writeFileSync(`/proc/${child.pid}/autogroup`, '19');
    } catch {
      // no autogroups here (another OS, or the kernel's grouping off): nice alone does it
    }
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
