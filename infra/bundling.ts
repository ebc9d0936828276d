// How every function of the project is built and run: one esbuild bundle per entry, CommonJS, Node 24, arm64 unless
// the deployment says x86_64 (OutriggerProps.architecture)
// (see scripts/bundle.ts, which builds the same bundles for `npm run invoke` and bench/bundle).
import { AssetStaging } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { OutputFormat, type NodejsFunctionProps } from 'aws-cdk-lib/aws-lambda-nodejs';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { projectRoot } from '../local/paths.ts';

export const RUNTIME = lambda.Runtime.NODEJS_24_X;

/**
 * NodejsFunction wants a lock file to tell the package manager; esbuild bundles everything, so only its name
 * matters. Installed as a dependency, the package has no package-lock.json (npm never packs one): package.json
 * stands in, which NodejsFunction takes for npm.
 */
const lockFile = [join(projectRoot, 'package-lock.json'), join(projectRoot, 'package.json')].find((f) => existsSync(f))!;

/** The esbuild version package.json pins, and the one installed where this package's imports resolve (if any). */
function esbuildVersions(): { pinned: string; installed: string | undefined } {
  const manifest = join(projectRoot, 'package.json');
  const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { devDependencies?: Record<string, string> };
  let installed: string | undefined;
  try {
    installed = (createRequire(manifest)('esbuild/package.json') as { version: string }).version;
  } catch {
    installed = undefined;
  }
  return { pinned: pkg.devDependencies?.esbuild ?? 'unknown', installed };
}

/**
 * Refuses to build the functions with anything but the pinned esbuild, installed beside the package: without it the
 * CDK would bundle in Docker with whatever esbuild 0.x is current (docs/getting-started/deploy.md#in-a-cdk-app-of-your-own).
 */
export function checkEsbuild(versions: { pinned: string; installed: string | undefined } = esbuildVersions()): void {
  if (versions.installed === versions.pinned) return;
  throw new Error(
    `Outrigger bundles its functions with esbuild ${versions.pinned}, installed beside it (npm install --save-exact --save-dev esbuild@${versions.pinned}); ` +
      `found ${versions.installed ? `esbuild ${versions.installed}` : 'none'}. Without it the CDK would bundle in Docker with an unpinned esbuild.`,
  );
}

/** The functions' architecture unless the deployment says otherwise: Graviton, cheaper per GB-second. */
export const DEFAULT_ARCHITECTURE = lambda.Architecture.ARM_64;

export function bundled(entry: string, architecture: lambda.Architecture = DEFAULT_ARCHITECTURE): NodejsFunctionProps & { entry: string } {
  checkEsbuild();
  return {
    entry: join(projectRoot, entry),
    runtime: RUNTIME,
    architecture,
    projectRoot,
    depsLockFilePath: lockFile,
    bundling: {
      // CommonJS: it loads 20-50 ms faster than ESM (scripts/bundle.ts BUNDLE_FILE says why).
      format: OutputFormat.CJS,
      target: 'node24',
      minify: true,
      sourceMap: true,
      // NODE_OPTIONS=--enable-source-maps reads the map at every cold start, and stack traces need only its
      // mappings: without the sources' text it is a third of the size, and quicker to load.
      sourcesContent: false,
      mainFields: ['module', 'main'],
      // Replaces the default (['@aws-sdk/*']: Lambda's own SDK), so the SDK is bundled; client-node only reads
      // kubeconfigs, which deployed functions never use (see scripts/bundle.ts EXTERNALS).
      externalModules: ['@kubernetes/client-node'],
      // Credentials from the environment only, as Lambda provides them (scripts/bundle.ts ALIASES). esbuild
      // resolves the alias's path from its working directory: the project root when bundling locally, and this
      // (the project's mount) when bundling in Docker, where it would otherwise be `/`.
      esbuildArgs: { '--alias': '@aws-sdk/credential-provider-node=./shared/lambda/credentials.ts' },
      workingDirectory: AssetStaging.BUNDLING_INPUT_DIR,
    },
  };
}
