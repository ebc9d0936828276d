// Python tools from PyPI (cfn-lint, AWS SAM CLI), each in a virtualenv of its own under the cache, installed from
// the project's pinned requirements file: the tests check the template with the tools users run on it, at a fixed
// version, without anything installed on the machine but `python3` with `venv`.
import { join } from 'node:path';
import { cacheDir } from './paths.ts';
import { buildOnce, fingerprint, run, type Log } from './process.ts';

/**
 * pip's flags for a tool's requirements: every file must match a hash the requirements file pins, and only wheels are
 * taken, so no sdist runs a build step with unpinned build tools (docs/contributing/test-beds.md#what-the-project-installs).
 */
export const PIP_INSTALL_FLAGS = ['--quiet', '--disable-pip-version-check', '--require-hashes', '--only-binary=:all:'] as const;

/** The interpreter the virtualenvs are made with (OUTRIGGER_PYTHON, default python3). */
export const python = process.env.OUTRIGGER_PYTHON ?? 'python3';

/**
 * Installs `requirements` into `.cache/<name>/venv`, once per content of the file and Python (a change of either
 * reinstalls it from scratch), and returns the virtualenv's `bin` directory.
 */
export async function pythonTool(name: string, requirements: string, log: Log = () => {}): Promise<string> {
  const venv = join(cacheDir, name, 'venv');
  await buildOnce(
    join(cacheDir, name, 'stamp'),
    `${await fingerprint([requirements])} ${python}`,
    async () => {
      log(`installing ${name} from PyPI into ${venv}`);
      await run('rm', ['-rf', venv]);
      await run(python, ['-m', 'venv', venv]);
      await run(join(venv, 'bin', 'pip'), ['install', ...PIP_INSTALL_FLAGS, '-r', requirements]);
    },
    log,
  );
  return join(venv, 'bin');
}
