// The local kube-apiserver (with etcd): the real one, built from the official Kubernetes Go modules by the Go
// program in test/cluster, started on loopback with RBAC and three static identities (admin, outrigger, migrator).
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir, projectRoot } from './paths.ts';
import { buildOnce, fingerprint, run, stopProcess, type Log } from './process.ts';

const sourceDir = join(projectRoot, 'test', 'cluster');
export const testClusterBinary = join(cacheDir, 'bin', 'testcluster');
/** kubectl from the same Kubernetes release: the binary answers to this name. */
export const kubectlBinary = join(cacheDir, 'bin', 'kubectl');

/**
 * Builds test/cluster once (and again only when its sources change). A cold build downloads the Kubernetes
 * modules through the Go module proxy and compiles for several minutes; later builds reuse Go's caches.
 */
export async function ensureTestClusterBinary(log: Log = () => {}): Promise<string> {
  // This file holds the build recipe (flags, version stamp), so a change here rebuilds too.
  const stamp = await fingerprint([...['go.mod', 'go.sum', 'main.go'].map((f) => join(sourceDir, f)), fileURLToPath(import.meta.url)]);
  await buildOnce(
    `${testClusterBinary}.stamp`,
    stamp,
    async () => {
      log('building kube-apiserver and kubectl from the Kubernetes Go modules (first time: several minutes)');
      const started = Date.now();
      // Release builds stamp the version; without it /version says v0.0.0-master and kubectl warns of skew.
      const version = /^\s*k8s\.io\/kubernetes (v(\d+)\.(\d+)\.\d+)\s*$/m.exec(await readFile(join(sourceDir, 'go.mod'), 'utf8'));
      if (!version) throw new Error('test/cluster/go.mod does not require k8s.io/kubernetes at a release');
      const pkg = 'k8s.io/component-base/version';
      const ldflags = ['-s', '-w', `-X ${pkg}.gitVersion=${version[1]}`, `-X ${pkg}.gitMajor=${version[2]}`, `-X ${pkg}.gitMinor=${version[3]}`, `-X ${pkg}.gitTreeState=clean`];
      await run('go', ['build', '-trimpath', `-ldflags=${ldflags.join(' ')}`, '-o', testClusterBinary, '.'], {
        cwd: sourceDir,
        env: {
          ...process.env,
          // The checksum database is out of reach here: go.sum is committed and -mod=readonly verifies every
          // downloaded module against it.
          GOFLAGS: '-mod=readonly',
          GOSUMDB: 'off',
          GOTOOLCHAIN: 'local',
          GOPROXY: process.env.GOPROXY ?? 'https://proxy.golang.org',
        },
      });
      await run('ln', ['-sf', 'testcluster', kubectlBinary]);
      log(`built ${testClusterBinary} in ${Math.round((Date.now() - started) / 1000)} s`);
    },
    log,
  );
  return testClusterBinary;
}

export interface TestCluster {
  server: string;
  /**
   * kubeconfig paths by identity: `admin` (system:masters), `outrigger` (the controllers' role in
   * cluster/rbac) and `migrator` (the storage migrator's role there, which may rewrite any object).
   */
  kubeconfigs: { admin: string; outrigger: string; migrator: string };
  tokens: { admin: string; outrigger: string; migrator: string };
  caFile: string;
  dir: string;
  pid: number;
  stop(): Promise<void>;
}

export async function startTestCluster(opts: { dir?: string; log?: Log; port?: number } = {}): Promise<TestCluster> {
  const log = opts.log ?? (() => {});
  const binary = await ensureTestClusterBinary(log);
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'outrigger-cluster-')));
  const args = ['serve', '--dir', dir, ...(opts.port ? ['--port', String(opts.port)] : [])];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const stderrTail: string[] = [];
  child.stderr.on('data', (b: Buffer) => {
    stderrTail.push(...b.toString().split('\n').filter(Boolean));
    stderrTail.splice(0, Math.max(0, stderrTail.length - 30));
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`kube-apiserver not ready in 180 s:\n${stderrTail.join('\n')}`)), 180_000);
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('"ready":true')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`kube-apiserver exited with ${code} before it was ready:\n${stderrTail.join('\n')}`));
    });
  });
  const ready = JSON.parse(await readFile(join(dir, 'ready.json'), 'utf8')) as Omit<TestCluster, 'stop' | 'dir'>;
  const stop = async () => {
    await stopProcess(child);
    // etcd's data and the credentials are throwaway unless the caller chose where they live.
    if (!opts.dir) await rm(dir, { recursive: true, force: true });
  };
  return { ...ready, dir, pid: child.pid ?? 0, stop };
}
