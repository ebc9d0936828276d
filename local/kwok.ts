// kwok (sigs.k8s.io/kwok), built from its Go module by test/kwok into .cache/bin/kwok once, and again only when
// that module or this recipe changes: it plays the kubelet of a test bed's nodes (docs/contributing/test-beds.md#test-bed).
// Its stages (what a node and a pod go through: initialized, Ready, heartbeats; Running and Ready, completed,
// deleted) are the fast ones its module ships, read from the module once built, never copied here.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheDir, projectRoot } from './paths.ts';
import { buildGoProgram, capture, goBuildEnv, type Log } from './process.ts';

const sourceDir = join(projectRoot, 'test', 'kwok');
export const kwokBinary = join(cacheDir, 'bin', 'kwok');
/** kwok's --config: the module's own fast node and pod stages, node leases renewed as kubelets renew them. */
export const kwokStages = join(cacheDir, 'bin', 'kwok-stages.yaml');

const STAGES = [
  'kustomize/stage/node/fast/node-initialize.yaml',
  'kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml',
  'kustomize/stage/pod/fast/pod-ready.yaml',
  'kustomize/stage/pod/fast/pod-complete.yaml',
  'kustomize/stage/pod/fast/pod-delete.yaml',
];

export async function ensureKwok(log: Log = () => {}): Promise<{ binary: string; config: string }> {
  await buildGoProgram({
    what: 'kwok',
    firstTime: 'two to four minutes',
    sourceDir,
    pkg: 'sigs.k8s.io/kwok/cmd/kwok',
    binary: kwokBinary,
    recipe: import.meta.url,
    after: async () => {
      const got = await capture('go', ['list', '-m', '-f', '{{.Dir}}', 'sigs.k8s.io/kwok'], { cwd: sourceDir, env: goBuildEnv() });
      if (got.code !== 0) throw new Error(`go list -m sigs.k8s.io/kwok failed: ${got.stderr.trim()}`);
      const dir = got.stdout.trim();
      const stages = await Promise.all(STAGES.map((f) => readFile(join(dir, f), 'utf8')));
      await writeFile(kwokStages, stages.map((s) => s.trim()).join('\n---\n') + '\n');
    },
    log,
  });
  return { binary: kwokBinary, config: kwokStages };
}
