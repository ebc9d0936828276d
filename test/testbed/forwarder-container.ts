// The forwarder's image as shipped (local/forwarder-image.ts), run as a container in the bed's container engine
// the way its Deployment runs it (deploy/forwarder/base/deployment.yaml): the image's own user and entrypoint, a
// read-only root filesystem with nothing writable mounted, no capabilities, no privilege escalation, the chart's
// resource limits, the ServiceAccount's token, CA and namespace where a pod has them with
// KUBERNETES_SERVICE_HOST/PORT naming the bed's apiserver, and the forwarder key's Secret mounted where the
// Deployment mounts it. The engine has no bridge, so it shares the host's network (its health port is chosen
// free, as PORT=0 does for the forwarder as a process).
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { docker } from '../../local/container-engine.ts';
import { capture } from '../../local/process.ts';
import { FORWARDER_IMAGE } from '../../local/forwarder-image.ts';
import { connect } from '../../shared/kube/index.ts';
import { FORWARDER_ACCOUNT, FORWARDER_NAMESPACE } from './forwarder.ts';
import { containerEngineHost, testbed, uniqueName } from './index.ts';

/** The Deployment's container limits (deploy/forwarder/base/deployment.yaml): `limits: { cpu: "1", memory: 512Mi }`. */
export const FORWARDER_LIMITS = ['--memory', '512m', '--cpus', '1'];

/** A directory as a pod's /var/run/secrets/kubernetes.io/serviceaccount: a TokenRequest token, the CA, the namespace. */
export async function serviceAccountVolume(): Promise<string> {
  const bed = testbed();
  const admin = connect({ kind: 'kubeconfig', path: bed.kubeconfigs.admin });
  const { status } = await admin.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${FORWARDER_NAMESPACE}/serviceaccounts/${FORWARDER_ACCOUNT}/token`,
    {
      verb: 'create',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    },
  );
  const dir = await mkdtemp(join(tmpdir(), 'outrigger-sa-'));
  await writeFile(join(dir, 'token'), status.token);
  await writeFile(join(dir, 'ca.crt'), await readFile(bed.caFile));
  await writeFile(join(dir, 'namespace'), FORWARDER_NAMESPACE);
  // Readable by the image's user, as the kubelet's projected volume is (mkdtemp makes it 0700).
  await chmod(dir, 0o755);
  for (const f of ['token', 'ca.crt', 'namespace']) await chmod(join(dir, f), 0o644);
  return dir;
}

export interface ForwarderContainer {
  name: string;
  /** Everything it wrote (stdout and stderr). */
  log(): Promise<string>;
  /** Resolves when its log has a line with this message. */
  logged(message: string, timeoutMs?: number): Promise<void>;
  /** Its health port, once it listens. */
  port(): Promise<number>;
  /** `docker kill` (SIGKILL): no clean stop, no Lease handed back. */
  kill(): Promise<void>;
  /** `docker stop` (SIGTERM, then SIGKILL after 10 s), as a pod's deletion; answers its exit code. */
  stop(): Promise<number>;
  remove(): Promise<void>;
}

/** Starts the image with the Deployment's environment `env` (deploymentEnv) and the ServiceAccount volume `sa`. */
export async function startForwarderContainer(opts: {
  env: Record<string, string>;
  sa: string;
  /** A directory holding the forwarder key (`key`), mounted as the Deployment mounts its Secret. */
  keyDir?: string;
  name?: string;
}): Promise<ForwarderContainer> {
  containerEngineHost();
  const server = new URL(testbed().server);
  const name = opts.name ?? uniqueName('forwarder');
  const env: Record<string, string> = {
    ...opts.env,
    KUBERNETES_SERVICE_HOST: server.hostname,
    KUBERNETES_SERVICE_PORT: server.port,
    PORT: '0',
  };
  await docker(
    'run',
    '--detach',
    '--name',
    name,
    '--network',
    'host',
    '--read-only',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    ...FORWARDER_LIMITS,
    '--volume',
    `${opts.sa}:/var/run/secrets/kubernetes.io/serviceaccount:ro`,
    ...(opts.keyDir ? ['--volume', `${opts.keyDir}:/etc/outrigger/forwarder-key:ro`] : []),
    ...Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
    FORWARDER_IMAGE,
  );
  // `docker logs` prints the container's stdout, then its stderr: the forwarder logs JSON lines on stderr.
  const allLog = async () => {
    const out = await capture('docker', ['logs', name], { env: { ...process.env, DOCKER_HOST: containerEngineHost() } });
    return out.stdout + out.stderr;
  };
  const logged = async (message: string, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = await allLog();
      if (text.split('\n').some((line) => line.includes(`"message":"${message}"`))) return;
      if (Date.now() > deadline) throw new Error(`the forwarder container did not log "${message}" in ${timeoutMs} ms:\n${text}`);
      await sleep(250);
    }
  };
  return {
    name,
    log: allLog,
    logged,
    port: async () => {
      await logged('forwarder listening');
      const line = (await allLog()).split('\n').find((l) => l.includes('"message":"forwarder listening"'))!;
      return (JSON.parse(line) as { port: number }).port;
    },
    kill: async () => {
      await docker('kill', name);
    },
    stop: async () => {
      await docker('stop', name);
      return Number((await docker('inspect', '--format', '{{.State.ExitCode}}', name)).trim());
    },
    remove: async () => {
      await docker('rm', '--force', name).catch(() => undefined);
    },
  };
}
