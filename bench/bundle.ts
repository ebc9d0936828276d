// bench/bundle: for every registered function, its Lambda bundle (built as the stack builds it) in bytes and
// gzipped, and its module initialisation time: a new Node 24 process imports the bundle, and the time from
// process start to the import's end is measured (median of --runs, taken round robin). Lambda bills and waits for this on every
// cold start. Prints its figures as the last line, in JSON; which modules make up an over-target bundle on stderr.
//   npm run bench:bundle [-- --runs 5]
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { functions } from '../functions/index.ts';
import { projectRoot } from '../local/paths.ts';
import { capture } from '../local/process.ts';
import { bundleFunction, largestInputs } from '../scripts/bundle.ts';

const TARGETS = { bytes: 1_572_864, initMs: 200 };

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' } } });
const runs = Number(values.runs);
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

// The project's Node 24 (Lambda's runtime), whatever `node` is on the PATH.
const node = existsSync(join(projectRoot, 'node_modules/node/bin/node'))
  ? join(projectRoot, 'node_modules/node/bin/node')
  : process.execPath;

// What a handler reads when it first runs; nothing is reached at import, so placeholders do.
const env: NodeJS.ProcessEnv = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  OUTRIGGER_CLUSTERS: JSON.stringify([{ id: 'bench', access: { kind: 'kubeconfig', path: '/nonexistent/kubeconfig' } }]),
  OUTRIGGER_TABLE: 'outrigger',
  OUTRIGGER_DEAD_LETTER_FILE: '/dev/null',
  OUTRIGGER_QUEUE_URL_PREFIX: 'https://sqs.us-east-1.amazonaws.com/000000000000/bench-',
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'bench',
  AWS_SECRET_ACCESS_KEY: 'bench',
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
};

/** ms from the process's start (performance's time origin) to the end of `import(file)`; `file` empty: Node's own start-up. */
async function initMs(file: string | undefined, name: string): Promise<number> {
  const code = `${file ? `await import(${JSON.stringify(pathToFileURL(file).href)});` : ''} process.stdout.write(String(performance.now()));`;
  // --enable-source-maps: the stack sets it in NODE_OPTIONS, and it makes Node read the source map at import.
  const {
    code: status,
    stdout,
    stderr,
  } = await capture(node, ['--enable-source-maps', '--input-type=module', '-e', code], {
    cwd: projectRoot,
    env: { ...env, AWS_LAMBDA_FUNCTION_NAME: `outrigger-${name}` },
  });
  if (status !== 0 || !stdout) throw new Error(`importing ${file ?? '(nothing)'} exited with ${status}:\n${stderr}`);
  return Number(stdout);
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const round1 = (x: number) => Math.round(x * 10) / 10;

const bundles = [];
for (const spec of functions) {
  const bundle = await bundleFunction(spec, join(projectRoot, '.cache', 'bench', 'bundle', spec.name));
  bundles.push({ spec, bundle, gzipBytes: gzipSync(await readFile(bundle.file)).length });
}

// Round robin (Node alone, then every function, --runs times over), so that a slow stretch of the machine
// falls on all of them alike rather than on whichever function was being measured then.
const samples = new Map<string, number[]>();
for (let run = 0; run < runs; run += 1) {
  for (const { spec, bundle } of [{ spec: { name: '' }, bundle: undefined }, ...bundles]) {
    const ms = await initMs(bundle?.file, spec.name || 'none');
    samples.set(spec.name, [...(samples.get(spec.name) ?? []), ms]);
  }
}

const nodeStart = median(samples.get('')!);
log(`${node} (${runs} runs each): Node's own start-up ${round1(nodeStart)} ms, counted in every figure below`);

const results: Array<{ name: string; bytes: number; gzipBytes: number; initMs: number }> = [];
const overTarget: Array<{ name: string; exceeds: string[] }> = [];
for (const { spec, bundle, gzipBytes } of bundles) {
  const ms = round1(median(samples.get(spec.name)!));
  results.push({ name: spec.name, bytes: bundle.bytes, gzipBytes, initMs: ms });
  const exceeds = [...(bundle.bytes > TARGETS.bytes ? ['bytes'] : []), ...(ms > TARGETS.initMs ? ['initMs'] : [])];
  log(
    `${spec.name.padEnd(13)} ${(bundle.bytes / 1024).toFixed(0).padStart(6)} KiB  gzip ${(gzipBytes / 1024).toFixed(0).padStart(5)} KiB  init ${ms.toFixed(1).padStart(6)} ms${exceeds.length ? `  over target: ${exceeds.join(', ')}` : ''}`,
  );
  if (exceeds.length) {
    overTarget.push({ name: spec.name, exceeds });
    log(
      `  largest: ${largestInputs(bundle.metafile, 6)
        .map((m) => `${m.module} ${(m.bytes / 1024).toFixed(0)} KiB`)
        .join(', ')}`,
    );
  }
}

process.stdout.write(`${JSON.stringify({ bench: 'bundle', functions: results, targets: TARGETS, overTarget })}\n`);
