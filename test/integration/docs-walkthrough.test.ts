// The pages' runnable blocks (docs/contributing/conventions.md#runnable-blocks) run as written, against the local
// runtime started as `npm start` starts it (its own kube-apiserver and DynamoDB Local, every function): each
// sequence in a namespace of its own, with bash, KUBECONFIG and PATH set as the page's own blocks set them. A block
// must exit 0 and, where the page shows its output, print it. Between blocks the pipeline settles, as it does while
// a reader types the next command.
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { kubectlBinary } from '../../local/apiserver.ts';
import { projectRoot } from '../../local/paths.ts';
import { startRuntime, type Runtime } from '../../runtime/local.ts';
import { outputMatches, runnableBlocks, type RunnableBlock } from '../docs/blocks.ts';
import { uniqueName } from '../testbed/index.ts';

const run = promisify(execFile);

/** The pages whose blocks run, and the kubeconfig path they tell the reader to export (what `npm start` prints). */
const PAGES = ['README.md', 'docs/getting-started/local.md', 'docs/reference/cli.md', 'docs/getting-started/examples.md'];
const PRINTED_KUBECONFIG = '/tmp/outrigger-cluster-XXXX/admin.kubeconfig';

let runtime: Runtime;
let stateDir: string;

const logLevel = process.env.POWERTOOLS_LOG_LEVEL;

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'outrigger-docs-'));
  // The functions' own log lines (read when the runtime loads them) would bury the test's; warnings still show.
  process.env.POWERTOOLS_LOG_LEVEL = 'WARN';
  runtime = await startRuntime({ stateDir });
}, 180_000);

afterAll(async () => {
  await runtime?.stop();
  if (logLevel === undefined) delete process.env.POWERTOOLS_LOG_LEVEL;
  else process.env.POWERTOOLS_LOG_LEVEL = logLevel;
  await rm(stateDir, { recursive: true, force: true });
});

/** A reader's pause: what was just written reaches the forwarder, and every queue drains. */
async function settle(): Promise<void> {
  await new Promise((r) => setTimeout(r, 300));
  await runtime.settled();
}

/** The runtime's admin kubeconfig, copied, with a namespace of the sequence's own as its context's default. */
async function kubeconfigFor(sequence: string): Promise<string> {
  const file = join(stateDir, `${uniqueName(sequence)}.kubeconfig`);
  await copyFile(runtime.kubeconfig, file);
  const namespace = uniqueName('docs');
  await run(kubectlBinary, ['--kubeconfig', file, 'create', 'namespace', namespace]);
  await run(kubectlBinary, ['--kubeconfig', file, 'config', 'set-context', '--current', `--namespace=${namespace}`]);
  return file;
}

async function runBlock(
  block: RunnableBlock,
  kubeconfig: string,
  envFile: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  // Each block in a fresh bash, with what the earlier blocks exported (export -p writes it back as bash reads it).
  const script = [
    'set -eo pipefail',
    `if [ -f ${envFile} ]; then source ${envFile}; fi`,
    block.script.replaceAll(PRINTED_KUBECONFIG, kubeconfig),
    `export -p > ${envFile}`,
  ].join('\n');
  const env = { ...process.env };
  delete env.KUBECONFIG;
  try {
    const { stdout, stderr } = await run('bash', ['-c', script], { cwd: projectRoot, env, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe.each(PAGES)('%s', (page) => {
  const text = () => readFile(join(projectRoot, page), 'utf8');
  test('its runnable blocks run as written, and print what the page shows', async () => {
    const blocks = runnableBlocks(await text(), page);
    expect(blocks.length).toBeGreaterThan(0);
    for (const sequence of new Set(blocks.map((b) => b.sequence))) {
      const kubeconfig = await kubeconfigFor(sequence);
      const envFile = join(stateDir, `${uniqueName(sequence)}.env`);
      for (const block of blocks.filter((b) => b.sequence === sequence)) {
        const result = await runBlock(block, kubeconfig, envFile);
        const where = `${page}:${block.line} (${sequence})`;
        expect({ where, code: result.code, stderr: result.code ? result.stderr : '' }).toEqual({ where, code: 0, stderr: '' });
        if (block.output !== undefined && !outputMatches(block.output, result.stdout))
          expect({ where, stdout: result.stdout }).toEqual({ where, stdout: block.output });
        await settle();
      }
    }
  }, 180_000);
});
