// The local kube-apiserver (with etcd): the real one, built from the official Kubernetes Go modules by the Go
// program in test/cluster, started on loopback with RBAC and three static identities (admin, outrigger, migrator).
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cacheDir, projectRoot } from './paths.ts';
import { buildGoProgram, run, stopProcess, type Log } from './process.ts';

const sourceDir = join(projectRoot, 'test', 'cluster');
export const testClusterBinary = join(cacheDir, 'bin', 'testcluster');
/** kubectl from the same Kubernetes release: the binary answers to this name. */
export const kubectlBinary = join(cacheDir, 'bin', 'kubectl');

/**
 * Builds test/cluster once (and again only when its sources change). A cold build downloads the Kubernetes
 * modules through the Go module proxy and compiles for several minutes; later builds reuse Go's caches.
 */
export async function ensureTestClusterBinary(log: Log = () => {}): Promise<string> {
  return buildGoProgram({
    what: 'kube-apiserver, kube-controller-manager, kube-scheduler and kubectl',
    firstTime: 'several minutes',
    sourceDir,
    binary: testClusterBinary,
    recipe: import.meta.url,
    // Release builds stamp the version; without it /version says v0.0.0-master and kubectl warns of skew.
    ldflags: (goMod) => {
      const version = /^\s*k8s\.io\/kubernetes (v(\d+)\.(\d+)\.\d+)\s*$/m.exec(goMod);
      if (!version) throw new Error('test/cluster/go.mod does not require k8s.io/kubernetes at a release');
      const pkg = 'k8s.io/component-base/version';
      return [
        `-X ${pkg}.gitVersion=${version[1]}`,
        `-X ${pkg}.gitMajor=${version[2]}`,
        `-X ${pkg}.gitMinor=${version[3]}`,
        `-X ${pkg}.gitTreeState=clean`,
      ];
    },
    after: () => run('ln', ['-sf', 'testcluster', kubectlBinary]),
    log,
  });
}

type Identities = { admin: string; outrigger: string; migrator: string };

export interface TestCluster {
  /** The cluster's endpoint: the one apiserver, or a control plane's load balancer. */
  server: string;
  /**
   * kubeconfig paths by identity: `admin` (system:masters), `outrigger` (the controllers' role in
   * cluster/rbac) and `migrator` (the storage migrator's role there, which may rewrite any object).
   */
  kubeconfigs: Identities;
  tokens: Identities;
  caFile: string;
  /** The embedded etcd's client URL (plain HTTP on loopback; its JSON gateway serves `/v3/kv/*`). */
  etcdUrl: string;
  dir: string;
  pid: number;
  stop(): Promise<void>;
}

/** One apiserver of a control plane: its own endpoint (and kubeconfigs for it), and whether it serves now. */
export interface ApiserverInstance {
  name: string;
  server: string;
  kubeconfigs: Identities;
  serving: boolean;
  /** The flags this run of it was started with beyond the bed's own. */
  flags: string[];
}

/** A bed of several apiservers (and optionally kube-controller-manager): `server` is their load balancer. */
export interface ControlPlane extends TestCluster {
  apiservers: ApiserverInstance[];
  /** tls.crt and tls.key for 127.0.0.1, signed by `caFile`: a webhook a test serves on loopback (LWS's). */
  webhookCertDir: string;
  /** Stops one apiserver; the load balancer stops sending it connections first. */
  stopApiserver(name: string): Promise<ApiserverInstance[]>;
  /** Starts a stopped apiserver with the bed's flags plus `flags`; resolves once it is ready. */
  startApiserver(name: string, flags?: readonly string[]): Promise<ApiserverInstance[]>;
  /** Stops, then starts one apiserver: one step of a rolling upgrade (or of its rollback). */
  restartApiserver(name: string, flags?: readonly string[]): Promise<ApiserverInstance[]>;
  status(): Promise<ApiserverInstance[]>;
}

export interface TestClusterOptions {
  dir?: string;
  log?: Log;
  port?: number;
}

/**
 * kube-apiserver's flags that turn a release into an emulation of the previous minor (same binary):
 * what a rolling upgrade's not-yet-upgraded apiservers run. The runtime-config the bed serves needs the second.
 */
export const EMULATE_PREVIOUS_MINOR = ['--emulated-version=1.34', '--runtime-config-emulation-forward-compatible=true'];

export async function startTestCluster(opts: TestClusterOptions = {}): Promise<TestCluster> {
  return start([], opts);
}

/**
 * A control plane: `apiservers` kube-apiservers on one etcd, behind a loopback load balancer, and with
 * `controllers` kube-controller-manager running those controllers (its `--controllers` names, for example
 * `garbage-collector-controller`), each as its service account; `apiserverFlags` are added to every apiserver's
 * first start (`EMULATE_PREVIOUS_MINOR`: a control plane about to be upgraded). Heavier than the default bed:
 * start it only in the test files that need it.
 */
export async function startControlPlane(
  opts: TestClusterOptions & {
    apiservers?: number;
    controllers?: readonly string[];
    apiserverFlags?: readonly string[];
    /** kube-scheduler, from the same build. */
    scheduler?: boolean;
    /** kwok (local/kwok.ts), the kubelet of every node annotated `kwok.x-k8s.io/node: fake`. */
    kwok?: { binary: string; config: string };
  },
): Promise<ControlPlane> {
  const args = [
    '--apiservers',
    String(opts.apiservers ?? 1),
    ...(opts.controllers?.length ? ['--controllers', opts.controllers.join(',')] : []),
    ...(opts.scheduler ? ['--scheduler'] : []),
    ...(opts.kwok ? ['--kwok', opts.kwok.binary, '--kwok-config', opts.kwok.config] : []),
    ...(opts.apiserverFlags ?? []).flatMap((f) => ['--apiserver-flag', f]),
  ];
  const cluster = await start(args, opts);
  const control = cluster.control!;
  const call = async (path: string, body?: unknown): Promise<ApiserverInstance[]> => {
    const res = await fetch(`${control}${path}`, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) });
    const text = await res.text();
    if (!res.ok) throw new Error(`test control plane ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as ApiserverInstance[];
  };
  const stopApiserver = (name: string) => call(`/apiservers/${name}/stop`, {});
  const startApiserver = (name: string, flags: readonly string[] = []) => call(`/apiservers/${name}/start`, { flags });
  return {
    ...cluster,
    apiservers: cluster.apiservers ?? [],
    webhookCertDir: cluster.webhookCertDir ?? '',
    stopApiserver,
    startApiserver,
    restartApiserver: async (name, flags) => {
      await stopApiserver(name);
      return startApiserver(name, flags);
    },
    status: () => call('/'),
  };
}

type Ready = Omit<TestCluster, 'stop' | 'dir'> & { apiservers?: ApiserverInstance[]; control?: string; webhookCertDir?: string };

async function start(
  extraArgs: string[],
  opts: TestClusterOptions,
): Promise<TestCluster & { apiservers?: ApiserverInstance[]; control?: string; webhookCertDir?: string }> {
  const log = opts.log ?? (() => {});
  const binary = await ensureTestClusterBinary(log);
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'outrigger-cluster-')));
  const args = ['serve', '--dir', dir, ...(opts.port ? ['--port', String(opts.port)] : []), ...extraArgs];
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
  const ready = JSON.parse(await readFile(join(dir, 'ready.json'), 'utf8')) as Ready;
  const stop = async () => {
    await stopProcess(child);
    // etcd's data and the credentials are throwaway unless the caller chose where they live.
    if (!opts.dir) await rm(dir, { recursive: true, force: true });
  };
  return { ...ready, dir, pid: child.pid ?? 0, stop };
}
