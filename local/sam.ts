// AWS SAM CLI (Apache-2.0), from PyPI, in a virtualenv under the cache, for test/sam/resolve.py: it resolves with
// SAM's own code what `sam local invoke` (docs/contributing/invoking-locally.md#with-docker-sam) would hand to the Lambda container
// for every function of a synthesized template, short of the container engine this machine lacks.
//   node local/sam.ts <template.json> <env.json>   resolves them (installing SAM on first use), prints one JSON
//                                                  line per function and a summary, and exits 1 on any problem
import { join } from 'node:path';
import { projectRoot } from './paths.ts';
import { capture, type Log } from './process.ts';
import { pythonTool } from './python.ts';

const requirements = join(projectRoot, 'test', 'sam', 'requirements.txt');
const resolveScript = join(projectRoot, 'test', 'sam', 'resolve.py');

/** Installs SAM CLI (once per requirements file and Python) and returns its virtualenv's Python. */
export async function ensureSam(log: Log = () => {}): Promise<string> {
  return join(await pythonTool('sam', requirements, log), 'python');
}

export interface SamFunction {
  construct_id: string;
  logical_id: string;
  problems: string[];
  handler?: string;
  code_dir?: string;
  layers?: string[];
  env?: Record<string, string>;
}

export interface SamResolution {
  /** resolve.py's exit code: 0 when every function would be invoked as docs/contributing/invoking-locally.md#with-docker-sam says. */
  code: number | null;
  functions: SamFunction[];
  failures: string[];
  stdout: string;
  stderr: string;
}

/**
 * Runs test/sam/resolve.py on a template and an `--env-vars` file. Its environment holds no OUTRIGGER_* or
 * POWERTOOLS_* (SAM would take a declared variable's value from there) and telemetry is off.
 */
export async function samResolve(template: string, envFile: string, log?: Log): Promise<SamResolution> {
  const bin = await ensureSam(log);
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(OUTRIGGER|POWERTOOLS)_/.test(name)));
  const out = await capture(bin, [resolveScript, template, envFile, projectRoot], {
    name: 'test/sam/resolve.py',
    env: { ...env, SAM_CLI_TELEMETRY: '0' },
  });
  const lines = out.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as SamFunction & { failures?: string[] });
  const summary = lines.at(-1)?.failures ? lines.pop() : undefined;
  // A crash (a traceback, no summary) is a failure too, with its output.
  const failures = summary?.failures ?? [`resolve.py exited with ${out.code} and no summary:\n${out.stderr.slice(-4000)}`];
  return { code: out.code, functions: lines, failures, stdout: out.stdout, stderr: out.stderr };
}

// No top-level await: jest's global setup loads this module with require(), which refuses one.
if (import.meta.main) {
  const [template, envFile] = process.argv.slice(2);
  if (!template || !envFile) {
    process.stderr.write('usage: node local/sam.ts <template.json> <env.json>\n');
    process.exit(2);
  }
  void samResolve(template, envFile, (m) => process.stderr.write(`${m}\n`)).then((result) => {
    process.stdout.write(result.stdout);
    process.stderr.write(result.stderr);
    process.exit(result.code ?? 1);
  });
}
