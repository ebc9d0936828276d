// Helm, built from its Go module by the small program in test/helm into .cache/bin/helm, once, and again only
// when that program or this recipe changes: what the tests render deploy/forwarder/chart with (docs/contributing/test-beds.md#tests).
import { join } from 'node:path';
import { cacheDir, projectRoot } from './paths.ts';
import { buildGoProgram, type Log } from './process.ts';

const sourceDir = join(projectRoot, 'test', 'helm');
export const helmBinary = join(cacheDir, 'bin', 'helm');

export async function ensureHelmBinary(log: Log = () => {}): Promise<string> {
  return buildGoProgram({
    what: 'helm',
    firstTime: 'two to five minutes',
    sourceDir,
    binary: helmBinary,
    recipe: import.meta.url,
    // Helm's own version variable, which a plain module build leaves at its minor ("v4.3").
    ldflags: (goMod) => {
      const version = /^\s*(?:require\s+)?helm\.sh\/helm\/v4 (v\d+\.\d+\.\d+)\s*$/m.exec(goMod);
      if (!version) throw new Error('test/helm/go.mod does not require helm.sh/helm/v4 at a release');
      return [`-X helm.sh/helm/v4/internal/version.version=${version[1]}`];
    },
    log,
  });
}
