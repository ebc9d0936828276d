// kube-storage-version-migrator's trigger, a peer of Outrigger's storage poll in bench/peer: built from its Go
// module (v0.0.5, through the Go module proxy) by the small program in bench/storage-trigger, once, and again only
// when that program or this recipe changes; its CRDs are read from the same module, as it ships them.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir, projectRoot } from '../local/paths.ts';
import { buildOnce, capture, fingerprint, run, type Log } from '../local/process.ts';

const sourceDir = join(projectRoot, 'bench', 'storage-trigger');
export const triggerBinary = join(cacheDir, 'bin', 'storage-version-migration-trigger');
const MODULE = 'sigs.k8s.io/kube-storage-version-migrator';

// As the test bed's build: go.sum is committed and -mod=readonly verifies every download against it.
const goEnv = () => ({
  ...process.env,
  GOFLAGS: '-mod=readonly',
  GOSUMDB: 'off',
  GOTOOLCHAIN: 'local',
  GOPROXY: process.env.GOPROXY ?? 'https://proxy.golang.org',
});

export async function ensureTriggerBinary(log: Log): Promise<string> {
  const stamp = await fingerprint([...['go.mod', 'go.sum', 'main.go'].map((f) => join(sourceDir, f)), fileURLToPath(import.meta.url)]);
  await buildOnce(
    `${triggerBinary}.stamp`,
    stamp,
    async () => {
      log(`building ${MODULE}'s trigger (first time: about a minute)`);
      const started = Date.now();
      await run('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', triggerBinary, '.'], { cwd: sourceDir, env: goEnv() });
      log(`built ${triggerBinary} in ${Math.round((Date.now() - started) / 1000)} s`);
    },
    log,
  );
  return triggerBinary;
}

/** The module's own CRDs for StorageState and StorageVersionMigration (its `manifests/`), as YAML. */
export async function triggerCrds(): Promise<string> {
  const out = await capture('go', ['mod', 'download', '-json', MODULE], { cwd: sourceDir, env: goEnv() });
  if (out.code !== 0) throw new Error(`go mod download ${MODULE}: ${out.stderr}`);
  const { Dir } = JSON.parse(out.stdout) as { Dir: string };
  const docs = await Promise.all(
    ['storage_state_crd.yaml', 'storage_migration_crd.yaml'].map((f) => readFile(join(Dir, 'manifests', f), 'utf8')),
  );
  return docs.join('\n---\n');
}
