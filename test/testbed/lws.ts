// The LeaderWorkerSet CRD as its project ships it (config/crd/bases in the sigs.k8s.io/lws Go module), fetched
// once through the Go module proxy into .cache, never copied into this repository; and LWS's own manager, built
// from the same module version, run against a control plane with nodes (docs/contributing/test-beds.md#test-bed).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dump, loadAll } from 'js-yaml';
import { cacheDir, projectRoot } from '../../local/paths.ts';
import { buildGoProgram, buildOnce, capture, freePort, goBuildEnv, startLocalServer, type LocalServer } from '../../local/process.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import type { TestControlPlane } from './control-plane.ts';

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

const lwsSource = join(projectRoot, 'test', 'lws');
export const lwsManagerBinary = join(cacheDir, 'bin', 'lws-manager');
/** The webhook configurations LWS_VERSION ships (config/webhook/manifests.yaml), read from the module once built. */
const lwsWebhooks = join(cacheDir, 'bin', 'lws-webhooks.yaml');

/** LWS's own manager (controllers and webhooks), built from its module by test/lws into .cache/bin once. */
export async function ensureLwsManager(log: (message: string) => void = () => {}): Promise<string> {
  return buildGoProgram({
    what: `LWS's manager (${LWS_MODULE}@${LWS_VERSION})`,
    firstTime: 'one to three minutes',
    sourceDir: lwsSource,
    pkg: `${LWS_MODULE}/cmd`,
    binary: lwsManagerBinary,
    recipe: import.meta.url,
    after: async () => {
      const got = await capture('go', ['list', '-m', '-f', '{{.Dir}}', LWS_MODULE], { cwd: lwsSource, env: goBuildEnv() });
      if (got.code !== 0) throw new Error(`go list -m ${LWS_MODULE} failed: ${got.stderr.trim()}`);
      await writeFile(lwsWebhooks, await readFile(join(got.stdout.trim(), 'config/webhook/manifests.yaml'), 'utf8'));
    },
    log,
  });
}

type Webhook = { name: string; clientConfig: { service?: { path?: string }; url?: string; caBundle?: string }; objectSelector?: unknown };

/**
 * LWS's manager against a control plane (startTestControlPlane), its webhooks served on loopback with the bed's
 * webhook certificate and registered by URL, as its chart registers them by Service; leader election off. Resolves
 * once its readiness probe answers; `stop` also removes the webhook configurations, which would otherwise fail
 * every later LeaderWorkerSet write.
 */
export async function startLwsController(cp: TestControlPlane): Promise<LocalServer & { log: string }> {
  const binary = await ensureLwsManager((m) => process.stderr.write(`[lws] ${m}\n`));
  const admin = cp.client('admin');
  const [webhookPort, probePort] = [await freePort(), await freePort()];
  const configFile = join(cp.dir, 'lws-config.yaml');
  await writeFile(
    configFile,
    dump({
      apiVersion: 'config.lws.x-k8s.io/v1alpha1',
      kind: 'Configuration',
      leaderElection: { leaderElect: false },
      internalCertManagement: { enable: false },
      webhook: { host: '127.0.0.1', port: webhookPort, certDir: cp.webhookCertDir },
      metrics: { bindAddress: '0' },
      health: { healthProbeBindAddress: `127.0.0.1:${probePort}` },
    }),
  );
  const caBundle = Buffer.from(await readFile(cp.caFile)).toString('base64');
  const configurations = (loadAll(await readFile(lwsWebhooks, 'utf8')) as (KubeObject & { webhooks: Webhook[] })[]).filter(Boolean);
  for (const configuration of configurations) {
    for (const webhook of configuration.webhooks) {
      webhook.clientConfig = { url: `https://127.0.0.1:${webhookPort}${webhook.clientConfig.service?.path ?? '/'}`, caBundle };
      // As the project's own deployment narrows them: only the pods of a LeaderWorkerSet.
      if (webhook.name.endsWith('pod.kb.io'))
        webhook.objectSelector = { matchExpressions: [{ key: 'leaderworkerset.sigs.k8s.io/name', operator: 'Exists' }] };
    }
  }
  const log = join(cp.dir, 'lws-manager.log');
  const server = await startLocalServer(
    'LWS manager',
    binary,
    ['--config', configFile, '--kubeconfig', cp.kubeconfigs.admin, '--zap-log-level=info'],
    probePort,
    async (endpoint) => (await fetch(`${endpoint}/readyz`).catch(() => undefined))?.ok ?? false,
    log,
  );
  await applyManifests(admin, configurations.map((c) => dump(c)).join('---\n'));
  return {
    ...server,
    log,
    stop: async () => {
      for (const c of configurations)
        await admin
          .delete(
            gvr(
              'admissionregistration.k8s.io',
              'v1',
              c.kind === 'MutatingWebhookConfiguration' ? 'mutatingwebhookconfigurations' : 'validatingwebhookconfigurations',
            ),
            { name: c.metadata.name! },
          )
          .catch(() => undefined);
      await server.stop();
    },
  };
}
