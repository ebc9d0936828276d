// The running local runtime (`npm start`), as the runtime.json it writes describes it (runtime/local.ts): what
// `npm run invoke` and `npm run sam-env` take the handlers' environment from.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isAlive } from '../local/process.ts';

/** What the local runtime writes to <state-dir>/runtime.json (runtime/local.ts). */
export interface RuntimeFile {
  kubeconfig: string;
  server: string;
  dynamodb: string;
  pid: number;
}

/**
 * The local runtime's table name (local/testbed.ts DEFAULT_TABLE, not imported: importing it loads the whole
 * testbed) and cluster id (its default).
 */
export const DEFAULT_TABLE = 'outrigger';
export const RUNTIME_CLUSTER = 'local';

/** The runtime whose runtime.json is in `stateDir`, if it is still running; `log` says why one is ignored. */
export async function runningRuntime(
  stateDir: string,
  log: (message: string) => void,
): Promise<{ file: string; info: RuntimeFile } | undefined> {
  const file = join(stateDir, 'runtime.json');
  let info: RuntimeFile;
  try {
    info = JSON.parse(await readFile(file, 'utf8')) as RuntimeFile;
  } catch {
    return undefined;
  }
  if (!info.pid || !isAlive(info.pid)) {
    log(`ignoring ${file}: its runtime (pid ${info.pid}) is not running`);
    return undefined;
  }
  return { file, info };
}
