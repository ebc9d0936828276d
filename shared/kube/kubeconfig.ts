// Kubeconfig access, for local use: the local runtime, the CLI, tests, benches and the forwarder. client-node reads
// the file and does whatever its user asks (exec plugins, token files, client certificates, auth providers); it is
// imported only when a kubeconfig is used, and Lambda bundles leave it out (scripts/bundle.ts, EXTERNALS).
import type { RequestOptions } from 'node:https';
import type * as ClientNode from '@kubernetes/client-node';
import type { KubeEndpoint, TlsSettings } from './client.ts';

const CLIENT_NODE = '@kubernetes/client-node';

/**
 * The endpoint a kubeconfig's current context (or `context`) names. TLS settings are read once, as the client's
 * connections are made with them; credentials are asked of client-node before every request, so tokens that
 * expire are renewed by whatever the kubeconfig says renews them.
 */
export async function kubeconfigEndpoint(path?: string, context?: string): Promise<KubeEndpoint> {
  const { kc, server, proxy } = await loadKubeConfig(path, context);
  return {
    server,
    defaultNamespace: kc.getContextObject(kc.getCurrentContext())?.namespace,
    tls: tlsSettings(await httpsOptions(kc)),
    proxy,
    headers: async () => credentialHeaders(await httpsOptions(kc)),
  };
}

async function loadKubeConfig(
  path: string | undefined,
  context: string | undefined,
): Promise<{ kc: ClientNode.KubeConfig; server: string; proxy: string | undefined }> {
  const { KubeConfig } = await importClientNode();
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  if (context) kc.setCurrentContext(context);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error(`no cluster in ${path ?? 'the default kubeconfig'}${context ? ` for context ${context}` : ''}`);
  return { kc, server: cluster.server, proxy: cluster.proxyUrl };
}

async function importClientNode(): Promise<typeof ClientNode> {
  try {
    return await import('@kubernetes/client-node');
  } catch (err) {
    // In Lambda the package is not there (it is external to the bundle and not deployed): say why, not just what.
    if ((err as { code?: unknown } | null)?.code === 'ERR_MODULE_NOT_FOUND' && String(err).includes(CLIENT_NODE)) {
      throw new Error(
        `kubeconfig access is for local use (the local runtime, the CLI, tests), and ${CLIENT_NODE}, which reads kubeconfigs, is not part of a Lambda bundle: a deployed function reaches its clusters with \`eks\` or \`secret\` access`,
        { cause: err },
      );
    }
    throw err;
  }
}

/** client-node's reading of the current cluster and user: TLS material, credential headers, basic auth. */
async function httpsOptions(kc: ClientNode.KubeConfig): Promise<RequestOptions> {
  const opts: RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return opts;
}

function tlsSettings(opts: RequestOptions): TlsSettings {
  const tls: TlsSettings = {};
  if (opts.ca !== undefined) tls.ca = opts.ca;
  if (opts.cert !== undefined) tls.cert = opts.cert;
  if (opts.key !== undefined) tls.key = opts.key;
  if (opts.rejectUnauthorized !== undefined) tls.rejectUnauthorized = opts.rejectUnauthorized;
  if (opts.servername !== undefined) tls.servername = opts.servername;
  return tls;
}

function credentialHeaders(opts: RequestOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  // As client-node itself does: basic auth first, so that a token (in `opts.headers`) wins over it.
  if (opts.auth) headers.authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
  if (opts.headers && !Array.isArray(opts.headers)) {
    for (const [k, v] of Object.entries(opts.headers))
      if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return headers;
}
