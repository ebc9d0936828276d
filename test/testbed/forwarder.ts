// The forwarder as the test bed installs and runs it: its manifests rendered from the kustomize base
// (deploy/forwarder/base) with the project's kubectl, its RBAC applied, a kubeconfig for its ServiceAccount (a
// TokenRequest token), and forwarder/main.ts started as a process of its own with the manifests' environment.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { kubectlBinary } from '../../local/apiserver.ts';
import { projectRoot } from '../../local/paths.ts';
import { connect, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { testbed, type TestbedInfo } from './index.ts';

const run = promisify(execFile);

export const FORWARDER_NAMESPACE = 'outrigger-system';
export const FORWARDER_ACCOUNT = 'outrigger-forwarder';

/** `kubectl kustomize DIR`, parsed. */
export async function renderKustomize(dir: string): Promise<KubeObject[]> {
  const { stdout } = await run(kubectlBinary, ['kustomize', dir], { maxBuffer: 16 * 1024 * 1024 });
  return (loadAll(stdout) as Array<KubeObject | null>).filter((o): o is KubeObject => o !== null);
}

const RBAC_KINDS = new Set(['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);

/**
 * Applies the forwarder's namespace, ServiceAccount and RBAC from `objects` (the Deployment and its ConfigMap are
 * left out: tests run the forwarder as a process, and files applying different overlays' Deployments would
 * conflict), and answers a kubeconfig acting as its ServiceAccount; on the shared bed unless given another.
 */
export async function forwarderKubeconfig(
  objects?: KubeObject[],
  bed: Pick<TestbedInfo, 'server' | 'caFile' | 'kubeconfigs'> = testbed(),
): Promise<string> {
  const docs = (objects ?? (await renderKustomize(join(projectRoot, 'deploy', 'forwarder', 'base')))).filter((o) =>
    RBAC_KINDS.has(o.kind ?? ''),
  );
  const admin = connect({ kind: 'kubeconfig', path: bed.kubeconfigs.admin });
  await applyManifests(admin, docs.map((d) => JSON.stringify(d)).join('\n---\n'));
  const { status } = await admin.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${FORWARDER_NAMESPACE}/serviceaccounts/${FORWARDER_ACCOUNT}/token`,
    {
      verb: 'create',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    },
  );
  const file = join(await mkdtemp(join(tmpdir(), 'outrigger-fwd-sa-')), 'kubeconfig');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'bed', cluster: { server: bed.server, 'certificate-authority-data': (await readFile(bed.caFile)).toString('base64') } },
    ],
    users: [{ name: 'forwarder', user: { token: status.token } }],
    contexts: [{ name: 'forwarder', context: { cluster: 'bed', user: 'forwarder', namespace: FORWARDER_NAMESPACE } }],
    'current-context': 'forwarder',
  };
  await writeFile(file, JSON.stringify(config));
  return file;
}

/** The Deployment's container environment: its ConfigMap's data, then its own variables (downward API filled in as a pod's). */
export function deploymentEnv(objects: KubeObject[], pod: { name: string; namespace: string }): Record<string, string> {
  type Container = {
    envFrom?: Array<{ configMapRef?: { name: string } }>;
    env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  };
  const deployment = objects.find((o) => o.kind === 'Deployment') as
    (KubeObject & { spec: { template: { spec: { containers: Container[] } } } }) | undefined;
  if (!deployment) throw new Error('no Deployment in the rendered manifests');
  const container = deployment.spec.template.spec.containers[0]!;
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    const map = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === from.configMapRef?.name) as
      (KubeObject & { data?: Record<string, string> }) | undefined;
    if (!map) throw new Error(`the Deployment's ConfigMap ${from.configMapRef?.name} is not in the rendered manifests`);
    Object.assign(env, map.data);
  }
  const fields: Record<string, string> = { 'metadata.name': pod.name, 'metadata.namespace': pod.namespace };
  for (const e of container.env ?? []) env[e.name] = e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '';
  return env;
}

export interface ForwarderProcess {
  child: ChildProcess;
  log: () => string;
  /** Its health port, once it listens. */
  port: () => Promise<number>;
  /** Resolves when its log has a line with this message. */
  logged: (message: string, timeoutMs?: number) => Promise<void>;
  exited: Promise<number | null>;
}

/** forwarder/main.ts as a process of its own. */
export function startForwarder(env: Record<string, string>): ForwarderProcess {
  const child = spawn(process.execPath, ['forwarder/main.ts'], {
    cwd: projectRoot,
    env: { PATH: process.env.PATH ?? '', ...env, PORT: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let text = '';
  const listeners = new Set<() => void>();
  child.stderr?.on('data', (b: Buffer) => {
    text = (text + b.toString()).slice(-200_000);
    for (const l of listeners) l();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const logged = (message: string, timeoutMs = 60_000) =>
    new Promise<void>((resolve, reject) => {
      const has = () => text.split('\n').some((line) => line.includes(`"message":"${message}"`));
      if (has()) return resolve();
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`the forwarder did not log "${message}" in ${timeoutMs} ms:\n${text}`));
      }, timeoutMs);
      const check = () => {
        if (!has()) return;
        clearTimeout(timer);
        listeners.delete(check);
        resolve();
      };
      listeners.add(check);
    });
  const port = async () => {
    await logged('forwarder listening');
    const line = text.split('\n').find((l) => l.includes('"message":"forwarder listening"'))!;
    return (JSON.parse(line) as { port: number }).port;
  };
  return { child, log: () => text, port, logged, exited };
}
