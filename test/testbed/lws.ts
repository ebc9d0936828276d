// The LeaderWorkerSet CRD as its project ships it (config/crd/bases in the sigs.k8s.io/lws Go module), fetched
// once through the Go module proxy into .cache, never copied into this repository.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheDir } from '../../local/paths.ts';
import { buildOnce, capture, goBuildEnv } from '../../local/process.ts';

export const LWS_MODULE = 'sigs.k8s.io/lws';
export const LWS_VERSION = 'v0.8.0';
// The module's go.sum hash, as the checksum database (through the Go module proxy) records it: the download is checked
// against both (docs/contributing/test-beds.md#what-the-project-installs).
const LWS_SUM = 'h1:DdhJ8QabwTfWgbgaHH2gdf8twliioHaoSfmDXRYEVU0=';
const CRD_PATH = 'config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml';

const dir = join(cacheDir, 'lws');
const crdFile = join(dir, `${LWS_VERSION}.yaml`);

/** The LeaderWorkerSet CRD manifest of LWS_VERSION. */
export async function lwsCrd(log: (message: string) => void = () => {}): Promise<string> {
  await buildOnce(
    `${crdFile}.stamp`,
    `${LWS_MODULE}@${LWS_VERSION} ${LWS_SUM}`,
    async () => {
      await mkdir(dir, { recursive: true });
      const env = {
        ...goBuildEnv(),
        // -modcacherw: Go otherwise leaves the module cache read-only, and .cache could not simply be removed.
        GOFLAGS: '-mod=mod -modcacherw',
        GOMODCACHE: join(dir, 'mod'),
      };
      const got = await capture('go', ['mod', 'download', '-json', `${LWS_MODULE}@${LWS_VERSION}`], { cwd: dir, env });
      const info = JSON.parse(got.stdout || '{}') as { Dir?: string; Sum?: string; Error?: string };
      if (got.code !== 0 || !info.Dir)
        throw new Error(`go mod download ${LWS_MODULE}@${LWS_VERSION} failed: ${info.Error ?? got.stderr.trim()}`);
      if (info.Sum !== LWS_SUM) throw new Error(`${LWS_MODULE}@${LWS_VERSION} downloaded with hash ${info.Sum}, expected ${LWS_SUM}`);
      await writeFile(crdFile, await readFile(join(info.Dir, CRD_PATH), 'utf8'));
      log(`fetched the LeaderWorkerSet CRD of ${LWS_MODULE}@${LWS_VERSION}`);
    },
    log,
  );
  return readFile(crdFile, 'utf8');
}
