// kube-storage-version-migrator's trigger, a peer of Outrigger's storage poll in bench/peer: built from its Go
// module (v0.0.5, through the Go module proxy) by the small program in bench/storage-trigger, once, and again only
// when that program or this recipe changes; its CRDs are read from the same module, as it ships them.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheDir, projectRoot } from '../local/paths.ts';
import { buildGoProgram, capture, goBuildEnv, type Log } from '../local/process.ts';

const sourceDir = join(projectRoot, 'bench', 'storage-trigger');
export const triggerBinary = join(cacheDir, 'bin', 'storage-version-migration-trigger');
const MODULE = 'sigs.k8s.io/kube-storage-version-migrator';

export async function ensureTriggerBinary(log: Log): Promise<string> {
  return buildGoProgram({
    what: `${MODULE}'s trigger`,
    firstTime: 'about a minute',
    sourceDir,
    binary: triggerBinary,
    recipe: import.meta.url,
    log,
  });
}

/** The module's own CRDs for StorageState and StorageVersionMigration (its `manifests/`), as YAML. */
export async function triggerCrds(): Promise<string> {
  const out = await capture('go', ['mod', 'download', '-json', MODULE], { cwd: sourceDir, env: goBuildEnv() });
  if (out.code !== 0) throw new Error(`go mod download ${MODULE}: ${out.stderr}`);
  const { Dir } = JSON.parse(out.stdout) as { Dir: string };
  const docs = await Promise.all(
    ['storage_state_crd.yaml', 'storage_migration_crd.yaml'].map((f) => readFile(join(Dir, 'manifests', f), 'utf8')),
  );
  return docs.join('\n---\n');
}
