// npm run build:plugin [-- --pack DIR]: the kubectl plugin's npm package, staged in .cache/plugin/kubectl-outrigger
// from deploy/npm/kubectl-outrigger (its package.json and README), the LICENSE and the CLI (bin/outrigger.ts)
// bundled into one ES module with no dependencies to install; with --pack, the package's tarball in DIR (what
// `npm publish` would upload, and what the krew manifest in deploy/krew points at), and its sha256.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, readFile, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { build } from 'esbuild';
import { projectRoot } from '../local/paths.ts';

export const pluginPackage = join(projectRoot, 'deploy', 'npm', 'kubectl-outrigger');
const staging = join(projectRoot, '.cache', 'plugin', 'kubectl-outrigger');

/** Stages the package's files; with `pack`, also its tarball there, answering its path and sha256. */
export async function buildPlugin(opts: { pack?: string } = {}): Promise<{ staged: string; tarball?: string; sha256?: string }> {
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { recursive: true });
  for (const file of ['package.json', 'README.md']) await copyFile(join(pluginPackage, file), join(staging, file));
  await copyFile(join(projectRoot, 'LICENSE'), join(staging, 'LICENSE'));
  await build({
    entryPoints: [join(projectRoot, 'bin', 'outrigger.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    minify: true,
    legalComments: 'none',
    mainFields: ['module', 'main'],
    outfile: join(staging, 'kubectl-outrigger.mjs'),
    // Some dependencies are CommonJS and call require() for built-ins; the banner gives the ES module one (esbuild
    // keeps the entry's own #! line first).
    banner: {
      js: "import { createRequire as __outriggerRequire } from 'node:module'; const require = __outriggerRequire(import.meta.url);",
    },
    plugins: [
      {
        // `outrigger run` (the local runtime), `doctor` (the checkout's manifests) and `hook-key` (the map
        // function's secret reading) need a checkout; their modules stay out, and each says so.
        name: 'checkout-only',
        setup(b) {
          b.onResolve({ filter: /^\.\.\/(local\/|runtime\/|cli\/doctor\/|cli\/hook-key\.ts$)/ }, (args) => ({
            path: args.path,
            external: true,
          }));
        },
      },
    ],
    logLevel: 'warning',
  });
  await chmod(join(staging, 'kubectl-outrigger.mjs'), 0o755);
  if (!opts.pack) return { staged: staging };
  const dir = resolve(opts.pack);
  await mkdir(dir, { recursive: true });
  const { stdout } = await promisify(execFile)('npm', ['pack', '--json', '--pack-destination', dir], { cwd: staging });
  const packed = (JSON.parse(stdout) as Array<{ filename: string }>)[0];
  if (!packed) throw new Error(`npm pack answered no file: ${stdout}`);
  const tarball = join(dir, packed.filename);
  return {
    staged: staging,
    tarball,
    sha256: createHash('sha256')
      .update(await readFile(tarball))
      .digest('hex'),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({ options: { pack: { type: 'string' } }, strict: true });
  const out = await buildPlugin({ pack: values.pack });
  process.stdout.write(`${JSON.stringify({ package: pluginPackage, ...out })}\n`);
}
