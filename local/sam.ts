// AWS SAM CLI (Apache-2.0), from PyPI, in a virtualenv under the cache: `sam local invoke` of the synthesized
// template's functions in their Lambda containers (docs/contributing/invoking-locally.md#with-docker-sam), and
// test/sam/resolve.py, which resolves with SAM's own code what it hands each function's container.
//   node local/sam.ts local invoke [sam's options]      SAM CLI's command (installing SAM on first use), with
//   (npm run sam -- local invoke ...)                    `--docker-network host` honoured (test/sam/host-network.py)
//   node local/sam.ts <template.json> <env.json>   resolves every function, prints one JSON line per function and a
//                                                  summary, and exits 1 on any problem
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from './paths.ts';
import { capture, type Captured, type Log } from './process.ts';
import { pythonTool } from './python.ts';

const requirements = join(projectRoot, 'test', 'sam', 'requirements.txt');
const resolveScript = join(projectRoot, 'test', 'sam', 'resolve.py');
const hostNetwork = join(projectRoot, 'test', 'sam', 'host-network.py');

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
  const out = await capture(bin, [resolveScript, template, envFile, projectRoot], { name: 'test/sam/resolve.py', env: samEnv() });
  const lines = out.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as SamFunction & { failures?: string[] });
  const summary = lines.at(-1)?.failures ? lines.pop() : undefined;
  // A crash (a traceback, no summary) is a failure too, with its output.
  const failures = summary?.failures ?? [`resolve.py exited with ${out.code} and no summary:\n${out.stderr.slice(-4000)}`];
  return { code: out.code, functions: lines, failures, stdout: out.stdout, stderr: out.stderr };
}

/** The environment SAM CLI runs in: no OUTRIGGER_* or POWERTOOLS_* (SAM would take a declared variable's value from there), telemetry off. */
function samEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...Object.fromEntries(Object.entries(env).filter(([name]) => !/^(OUTRIGGER|POWERTOOLS)_/.test(name))), SAM_CLI_TELEMETRY: '0' };
}

/**
 * Runs SAM CLI's command line (`sam <args>`) with `--docker-network host` honoured, and hands back its output: for
 * `local invoke`, the function's answer on stdout and SAM's and the function's logs on stderr. `env` is the
 * environment SAM runs in (DOCKER_HOST names the engine; AWS credentials and region are passed on to the function).
 */
export async function samCli(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; log?: Log } = {}): Promise<Captured> {
  const bin = await ensureSam(opts.log);
  return capture(bin, [hostNetwork, ...args], {
    name: `sam ${args.slice(0, 2).join(' ')}`,
    env: samEnv(opts.env),
    cwd: opts.cwd ?? projectRoot,
  });
}

// No top-level await: jest's global setup loads this module with require(), which refuses one.
if (import.meta.main && process.argv[2] === 'local') {
  void ensureSam((m) => process.stderr.write(`${m}\n`)).then((bin) => {
    const child = spawn(bin, [hostNetwork, ...process.argv.slice(2)], { stdio: 'inherit', env: samEnv() });
    child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
  });
} else if (import.meta.main) {
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
