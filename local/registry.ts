// An OCI registry on loopback for the tests of the forwarder image's index (docs/contributing/test-beds.md#tests): crane, from
// go-containerregistry's Go module, built by the small program in test/registry into .cache/bin/crane once,
// and again only when that program or this recipe changes. `crane registry serve` keeps what is pushed in
// memory; the same binary makes and reads images in it.
import { join } from 'node:path';
import { cacheDir, projectRoot } from './paths.ts';
import { buildGoProgram, capture, freePort, startLocalServer, type LocalServer, type Log } from './process.ts';

const sourceDir = join(projectRoot, 'test', 'registry');
export const craneBinary = join(cacheDir, 'bin', 'crane');

export async function ensureCrane(log: Log = () => {}): Promise<string> {
  return buildGoProgram({ what: 'crane', sourceDir, binary: craneBinary, recipe: import.meta.url, log });
}

export interface LocalRegistry extends LocalServer {
  /** host:port, as an image reference names the registry. */
  host: string;
  /** Runs crane against this registry (plain HTTP), and returns what it printed. */
  crane(...args: string[]): Promise<string>;
}

export async function startRegistry(log: Log = () => {}): Promise<LocalRegistry> {
  const crane = await ensureCrane(log);
  const port = await freePort();
  const server = await startLocalServer(
    'crane registry',
    crane,
    ['registry', 'serve', '--address', `127.0.0.1:${port}`],
    port,
    (endpoint) =>
      fetch(`${endpoint}/v2/`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => r.status === 200,
        () => false,
      ),
  );
  return {
    ...server,
    host: `127.0.0.1:${port}`,
    async crane(...args: string[]) {
      const out = await capture(crane, ['--insecure', ...args]);
      if (out.code !== 0) throw new Error(`crane ${args.join(' ')} exited with ${out.code}: ${out.stderr}`);
      return out.stdout;
    },
  };
}
