// A function's Lambda bundle, built outside CDK for the tools that run or measure the deployed code itself
// (`npm run invoke`, `npm run bench:bundle`). What Lambda runs is what CDK's NodejsFunction makes of
// infra/bundling.ts's `bundled()`; these options restate that esbuild command and MUST be kept equal to it: a
// change to `bundled()` (or to the CDK defaults it relies on) is a change here too. test/unit/invoke.test.ts
// builds every function both ways and compares the bytes.
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { build, type BuildOptions, type Metafile } from 'esbuild';
import type { FunctionSpec } from '../functions/spec.ts';
import { projectRoot } from '../local/paths.ts';

/**
 * infra/bundling.ts `bundled().bundling.externalModules`, which replaces NodejsFunction's default (`@aws-sdk/*`: use the
 * SDK Lambda provides). The AWS SDK is bundled: the functions run the SDK version the tests ran, and one
 * tree-shaken CommonJS file loads in a fresh process faster than the runtime's copy (hundreds of files, each
 * resolved and compiled on its own). `@kubernetes/client-node` reads kubeconfigs, which deployed functions never
 * use (they have `eks` or `secret` access); it is neither bundled nor deployed, and shared/kube/kubeconfig.ts says
 * so if one is configured.
 */
export const EXTERNALS = ['@kubernetes/client-node'];

/**
 * infra/bundling.ts `bundled().bundling.esbuildArgs['--alias']`: a Lambda function's AWS credentials are only ever in
 * its environment, so the SDK's default provider chain is replaced by the environment provider (shared/lambda/credentials.ts).
 */
export const ALIASES = { '@aws-sdk/credential-provider-node': './shared/lambda/credentials.ts' };

/**
 * The file NodejsFunction names a CommonJS bundle; Lambda loads `index.handler` from it. CommonJS rather than ESM:
 * an ES module's `import ... from 'node:http'` makes Node build the module's ESM facade, which reads every export,
 * lazy ones included (node:http's WebSocket loads Node's whole undici, about 50 ms); `require` does not.
 */
export const BUNDLE_FILE = 'index.js';

/** The esbuild options CDK's command line amounts to, for one entry (relative to the project root). */
export function lambdaBuildOptions(entry: string, outDir: string): BuildOptions {
  return {
    absWorkingDir: projectRoot,
    entryPoints: [join(projectRoot, entry)],
    outfile: join(outDir, BUNDLE_FILE),
    bundle: true,
    platform: 'node',
    // bundling: { format: CJS, target: 'node24', minify: true, sourceMap: true, sourcesContent: false, mainFields: ['module', 'main'], externalModules, esbuildArgs }
    format: 'cjs',
    target: 'node24',
    minify: true,
    sourcemap: true,
    sourcesContent: false,
    mainFields: ['module', 'main'],
    external: EXTERNALS,
    alias: ALIASES,
    logLevel: 'warning',
  };
}

export interface Bundle {
  /** The bundle's absolute path (its source map is next to it). */
  file: string;
  bytes: number;
  /** Which inputs make up the output, for saying what dominates a large bundle. */
  metafile: Metafile;
}

/**
 * Where `npm run invoke` keeps a function's bundle (and what it leaves behind: dead letters, would-be sends).
 * Always inside the project, whatever OUTRIGGER_CACHE_DIR says: the bundle imports the AWS SDK (external, as
 * Lambda provides it) and finds it in the project's node_modules only from there.
 */
export function invokeDir(name: string): string {
  return join(projectRoot, '.cache', 'invoke', name);
}

/** Bundles one registered function as the stack does, into outDir/index.js. */
export async function bundleFunction(spec: Pick<FunctionSpec, 'name' | 'entry'>, outDir: string = invokeDir(spec.name)): Promise<Bundle> {
  const result = await build({ ...lambdaBuildOptions(spec.entry, outDir), metafile: true });
  await markCommonJs(outDir);
  const file = join(outDir, BUNDLE_FILE);
  return { file, bytes: (await stat(file)).size, metafile: result.metafile };
}

/**
 * In Lambda, index.js has no package.json above it and is CommonJS. A bundle built inside this project would be
 * taken for an ES module (the project's package.json says `"type": "module"`) unless its directory says otherwise.
 */
export async function markCommonJs(outDir: string): Promise<void> {
  await writeFile(join(outDir, 'package.json'), '{ "type": "commonjs" }\n');
}

/** The inputs that contribute most to a bundle, grouped by package (or by top-level project directory). */
export function largestInputs(metafile: Metafile, top = 5): Array<{ module: string; bytes: number }> {
  const byModule = new Map<string, number>();
  for (const output of Object.values(metafile.outputs)) {
    for (const [path, { bytesInOutput }] of Object.entries(output.inputs)) {
      const module = moduleOf(path);
      byModule.set(module, (byModule.get(module) ?? 0) + bytesInOutput);
    }
  }
  return [...byModule]
    .map(([module, bytes]) => ({ module, bytes }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, top);
}

function moduleOf(path: string): string {
  const parts = path.split('/');
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return parts.length > 1 ? `${parts[0]}/` : path;
  const name = parts[at + 1] ?? path;
  return name.startsWith('@') ? `${name}/${parts[at + 2] ?? ''}` : name;
}
