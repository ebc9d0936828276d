// Running a bundle as Lambda would: in a Node process of its own (./child.ts), with the handler's environment.
import { spawn } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChildReply } from './child.ts';

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));

export function runChild(
  bundle: string,
  spec: { name: string; timeoutSeconds: number },
  eventFile: string,
  env: NodeJS.ProcessEnv,
): Promise<{ reply: ChildReply | undefined; code: number | null; signal: NodeJS.Signals | null }> {
  // As in Lambda, where the stack sets NODE_OPTIONS=--enable-source-maps: stack traces point into the sources.
  // The function's stdout (its logs) joins our stderr, so that our stdout is the result alone.
  const proc = spawn(process.execPath, ['--enable-source-maps', CHILD, bundle, spec.name, String(spec.timeoutSeconds), eventFile], {
    cwd: dirname(bundle),
    env,
    stdio: ['ignore', 2, 2, 'ipc'],
  });
  let reply: ChildReply | undefined;
  proc.on('message', (m) => (reply = m as ChildReply));
  return new Promise((ok, fail) => {
    proc.on('error', fail);
    proc.on('exit', (code, signal) => ok({ reply, code, signal }));
  });
}
