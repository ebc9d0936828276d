// Helm, built from its Go module by the small program in test/helm into .cache/bin/helm, once, and again only
// when that program or this recipe changes: what the tests render deploy/forwarder/chart with (README, "Tests").
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir, projectRoot } from './paths.ts';
import { buildOnce, fingerprint, goBuildEnv, run, type Log } from './process.ts';

const sourceDir = join(projectRoot, 'test', 'helm');
export const helmBinary = join(cacheDir, 'bin', 'helm');

export async function ensureHelmBinary(log: Log = () => {}): Promise<string> {
  const stamp = await fingerprint([...['go.mod', 'go.sum', 'main.go'].map((f) => join(sourceDir, f)), fileURLToPath(import.meta.url)]);
  await buildOnce(
    `${helmBinary}.stamp`,
    stamp,
    async () => {
      log('building helm from its Go module (first time: two to five minutes)');
      const started = Date.now();
      // Helm's own version variable, which a plain module build leaves at its minor ("v4.3").
      const version = /^\s*(?:require\s+)?helm\.sh\/helm\/v4 (v\d+\.\d+\.\d+)\s*$/m.exec(await readFile(join(sourceDir, 'go.mod'), 'utf8'));
      if (!version) throw new Error('test/helm/go.mod does not require helm.sh/helm/v4 at a release');
      const ldflags = `-s -w -X helm.sh/helm/v4/internal/version.version=${version[1]}`;
      await run('go', ['build', '-trimpath', `-ldflags=${ldflags}`, '-o', helmBinary, '.'], {
        cwd: sourceDir,
        env: goBuildEnv(),
      });
      log(`built ${helmBinary} in ${Math.round((Date.now() - started) / 1000)} s`);
    },
    log,
  );
  return helmBinary;
}
