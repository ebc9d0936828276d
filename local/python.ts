// Python tools from PyPI (cfn-lint, AWS SAM CLI), each in a virtualenv of its own under the cache, installed from
// the project's pinned requirements file: the tests check the template with the tools users run on it, at a fixed
// version, without anything installed on the machine but `python3` with `venv`.
import { join } from 'node:path';
import { cacheDir } from './paths.ts';
import { buildOnce, fingerprint, run, type Log } from './process.ts';

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
      await run(join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', '-r', requirements]);
    },
    log,
  );
  return join(venv, 'bin');
}
