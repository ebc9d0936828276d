// What invoke tells the user: its progress on stderr, and after the run what the function left (dead letters,
// the sync requests it would send, saved to feed their targets) and its result on stdout.
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { sqsEvent, type SyncCapture } from './capture.ts';
import type { ChildReply } from './child.ts';

export const log = (message: string) => process.stderr.write(`[invoke] ${message}\n`);

/** A path as the user would type it: relative when under the working directory. */
export function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

export async function fileSize(path: string | undefined): Promise<number> {
  if (!path) return 0;
  return stat(path).then(
    (s) => s.size,
    () => 0,
  );
}

/** The letters written to `file` past `before` bytes: this run's. */
export async function reportDeadLetters(file: string | undefined, before: number): Promise<void> {
  if (!file || (await fileSize(file)) <= before) return;
  const added = (await readFile(file)).subarray(before).toString('utf8').split('\n').filter(Boolean);
  log(`${added.length} message(s) dead-lettered to ${shown(file)}:`);
  for (const line of added) log(`  ${(JSON.parse(line) as { reason: string }).reason}`);
}

/** Last run's would-be sends must not pass for this run's. */
export async function forgetCaptured(dir: string): Promise<void> {
  for (const f of await readdir(dir).catch(() => [])) if (/^sent-.*\.json$/.test(f)) await rm(join(dir, f));
}

/** Each target's captured requests, printed and saved as an SQS event in `dir` (sent-<target>.json). */
export async function reportCaptured(capture: SyncCapture, dir: string, spec: { events?: unknown; sync?: unknown }): Promise<void> {
  const byTarget = Map.groupBy(capture.messages, (m) => m.target);
  for (const [target, messages] of byTarget) {
    const file = join(dir, `sent-${target}.json`);
    await writeFile(file, `${JSON.stringify(sqsEvent(messages), null, 2)}\n`);
    log(`would send ${messages.length} sync request(s) to ${target}; to run them: npm run invoke -- ${target} ${shown(file)}`);
    for (const m of messages) log(`  ${m.body}`);
  }
  if (!byTarget.size && (spec.events || spec.sync)) log('no sync requests sent');
}

/** The handler's result on stdout, or Lambda's error shape; the exit code. */
export function reportReply(
  name: string,
  { reply, code, signal }: { reply: ChildReply | undefined; code: number | null; signal: NodeJS.Signals | null },
): number {
  if (!reply) {
    log(`the function's process ${signal ? `was killed by ${signal}` : `exited with code ${code}`} before returning`);
    return 1;
  }
  if (!reply.ok) {
    log(`${name} ${reply.phase === 'init' ? 'failed to load' : 'threw'}: ${reply.error.errorType}: ${reply.error.errorMessage}`);
    process.stdout.write(`${JSON.stringify(reply.error, null, 2)}\n`);
    return 1;
  }
  process.stdout.write(`${JSON.stringify(reply.result ?? null, null, 2)}\n`);
  return 0;
}
