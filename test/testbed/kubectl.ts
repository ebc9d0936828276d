// The project's kubectl (1.35.4, built with the test cluster) as the admin, with `bin/` on PATH so that
// `kubectl outrigger` finds the plugin.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { kubectlBinary } from '../../local/apiserver.ts';
import { projectRoot } from '../../local/paths.ts';
import { testbed } from './index.ts';

const run = promisify(execFile);

/** Runs kubectl and gives its standard output; a non-zero exit rejects with the error (its `stderr` included). */
export async function kubectl(...args: string[]): Promise<string> {
  // KUBECONFIG, not --kubeconfig: kubectl takes no flags before a plugin's name.
  const env = { ...process.env, KUBECONFIG: testbed().kubeconfigs.admin, PATH: `${join(projectRoot, 'bin')}:${process.env.PATH ?? ''}` };
  const { stdout } = await run(kubectlBinary, args, { env });
  return stdout;
}
