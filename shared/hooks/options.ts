// A webhook's options (docs/reference/hooks.md#webhook-options): authorization and TLS settings read from Secrets and
// ConfigMaps as the controller's ServiceAccount (never as Outrigger: what the account may not read, its hooks do not
// get), answers kept for If-None-Match (etag), and the apiserver's own refusals of a call through its service proxy.
import { createHash } from 'node:crypto';
import { AbortError } from 'p-retry';
import type { KubeApi } from '../kube/api.ts';
import { isKubeError } from '../kube/errors.ts';
import { gvr, type KubeObject } from '../kube/resource.ts';
import type { Hook, Webhook } from '../map/api.ts';
import { HookError, hookName } from './errors.ts';
import type { WebhookTarget } from './target.ts';

/** What a hook call needs of the cluster, as the controller's ServiceAccount. */
export type HookCluster = Pick<KubeApi, 'get' | 'proxy'>;

const secrets = gvr('', 'v1', 'secrets');
const configMaps = gvr('', 'v1', 'configmaps');
/** How long a Secret or ConfigMap a webhook's options name is kept before it is read again. */
const CREDENTIALS_TTL_MS = 60_000;
/** ETag cache: at most this many answers, and each kept this long by default (etag.cacheTimeoutSeconds). */
const ETAG_MAX_ENTRIES = 10_000;
const ETAG_DEFAULT_TIMEOUT_SECONDS = 60;

/** What the webhook options add to a request: headers (authorization) and TLS settings (caBundle, clientTLS). */
export interface Credentials {
  headers: Record<string, string>;
  tls: { ca?: string; cert?: string; key?: string };
}

/** The caches of one hook caller: Secrets and ConfigMaps per controller (never shared between two), and ETag answers. */
export class WebhookOptions {
  private readonly data = new Map<string, { at: number; value: Promise<Record<string, string>> }>();
  readonly etags = new Map<string, { etag: string; text: string; until: number }>();
  private readonly now: () => number;

  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  /** The kept answer for a request, while it is fresh. */
  fresh(key: string | undefined): { etag: string; text: string } | undefined {
    const kept = key === undefined ? undefined : this.etags.get(key);
    return kept && kept.until > this.now() ? kept : undefined;
  }

  keepEtag(key: string, etag: string, text: string, timeoutSeconds: number | undefined): void {
    const now = this.now();
    // Expired answers go first; past the bound, the oldest kept (a Map iterates in insertion order).
    if (this.etags.size >= ETAG_MAX_ENTRIES) for (const [k, v] of this.etags) if (v.until <= now) this.etags.delete(k);
    while (this.etags.size >= ETAG_MAX_ENTRIES) this.etags.delete(this.etags.keys().next().value!);
    this.etags.delete(key);
    this.etags.set(key, { etag, text, until: now + (timeoutSeconds ?? ETAG_DEFAULT_TIMEOUT_SECONDS) * 1000 });
  }

  /** A webhook's authorization and TLS options, their Secrets and ConfigMaps read as the controller's ServiceAccount. */
  async credentials(
    hook: Hook,
    webhook: Webhook,
    controller: { cluster: string; uid: string } | undefined,
    cluster: HookCluster | undefined,
  ): Promise<Credentials> {
    const out: Credentials = { headers: {}, tls: {} };
    const { authorization, basicAuth, clientTLS, caBundle } = webhook;
    if (!authorization && !basicAuth && !clientTLS && !caBundle?.secretRef && !caBundle?.configMapRef) {
      if (caBundle?.inline) out.tls.ca = caBundle.inline;
      return out;
    }
    if (!cluster || !controller)
      throw new AbortError(
        new Error(`${hookName(hook)}: a webhook's Secrets are read as the controller's ServiceAccount, and none was given`),
      );
    const read = (kind: 'Secret' | 'ConfigMap', ref: { namespace: string; name: string }) =>
      this.readData(hook, cluster, controller.uid, kind, ref);
    const pick = async (kind: 'Secret' | 'ConfigMap', ref: { namespace: string; name: string }, key: string) => {
      const value = (await read(kind, ref))[key];
      if (value === undefined) throw new HookError('Refused', `${hookName(hook)}: ${kind} ${ref.namespace}/${ref.name} has no key ${key}`);
      return value;
    };
    if (authorization) {
      const credential = (await pick('Secret', authorization.secretRef, authorization.secretRef.key ?? 'token')).trim();
      out.headers.authorization = `${authorization.type ?? 'Bearer'} ${credential}`;
    }
    if (basicAuth) {
      const user = await pick('Secret', basicAuth.secretRef, basicAuth.usernameKey ?? 'username');
      const password = await pick('Secret', basicAuth.secretRef, basicAuth.passwordKey ?? 'password');
      out.headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    }
    if (clientTLS) {
      out.tls.cert = await pick('Secret', clientTLS.secretRef, clientTLS.certKey ?? 'tls.crt');
      out.tls.key = await pick('Secret', clientTLS.secretRef, clientTLS.privateKeyKey ?? 'tls.key');
    }
    if (caBundle?.inline) out.tls.ca = caBundle.inline;
    if (caBundle?.secretRef) out.tls.ca = await pick('Secret', caBundle.secretRef, caBundle.secretRef.key ?? 'ca.crt');
    if (caBundle?.configMapRef) out.tls.ca = await pick('ConfigMap', caBundle.configMapRef, caBundle.configMapRef.key ?? 'ca.crt');
    return out;
  }

  /** A Secret's (decoded) or ConfigMap's data, kept a minute per controller. */
  private readData(
    hook: Hook,
    cluster: HookCluster,
    uid: string,
    kind: 'Secret' | 'ConfigMap',
    ref: { namespace: string; name: string },
  ): Promise<Record<string, string>> {
    const cacheKey = `${uid}\u0000${kind}\u0000${ref.namespace}/${ref.name}`;
    const now = this.now();
    const kept = this.data.get(cacheKey);
    if (kept && now - kept.at < CREDENTIALS_TTL_MS) return kept.value;
    const value = (async () => {
      try {
        const obj = await cluster.get<KubeObject & { data?: Record<string, string> }>(kind === 'Secret' ? secrets : configMaps, ref);
        const data = obj.data ?? {};
        return kind === 'Secret'
          ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]))
          : data;
      } catch (err) {
        this.data.delete(cacheKey);
        const what = `${kind} ${ref.namespace}/${ref.name}`;
        if (isKubeError(err, 'Forbidden'))
          throw new HookError('NotAllowed', `${hookName(hook)}: the controller's ServiceAccount may not read ${what}`, { cause: err });
        if (isKubeError(err, 'NotFound')) throw new HookError('Refused', `${hookName(hook)}: ${what} is not there`, { cause: err });
        throw err;
      }
    })();
    this.data.set(cacheKey, { at: now, value });
    return value;
  }
}

/** The ETag cache's key: the controller, the URL and the request (a different request is a different answer). */
export function etagKeyOf(controller: { cluster: string; uid: string } | undefined, url: string, body: string): string {
  return `${controller?.cluster ?? ''}\u0000${controller?.uid ?? ''}\u0000${url}\u0000${createHash('sha256').update(body).digest('hex')}`;
}

/**
 * The apiserver's own refusal of a proxied call (a Status object, not the Service's answer): the account may not
 * proxy to the Service (NotAllowed), or the Service or a ready endpoint of it is not there (Unreachable, retried).
 */
export function proxyRefusal(
  hook: Hook,
  target: Extract<WebhookTarget, { kind: 'service' }>,
  status: number,
  contentType: string | undefined,
  text: string,
): HookError | undefined {
  if ((status >= 200 && status < 300) || !contentType?.startsWith('application/json')) return undefined;
  let parsed: { kind?: unknown; apiVersion?: unknown; reason?: unknown; message?: unknown };
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    return undefined;
  }
  if (parsed.kind !== 'Status' || parsed.apiVersion !== 'v1') return undefined;
  const where = `service ${target.namespace}/${target.name} port ${target.port}`;
  const detail = typeof parsed.message === 'string' ? parsed.message.slice(0, 300) : undefined;
  if (status === 401 || status === 403)
    return new HookError(
      'NotAllowed',
      `${hookName(hook)}: the controller's ServiceAccount may not reach ${where} through the apiserver (services/proxy)`,
      { status, detail },
    );
  if (status === 404 || status === 503 || status === 502)
    return new HookError(
      'Unreachable',
      `${hookName(hook)} could not be reached through the apiserver: ${where} ${status === 404 ? 'is not there' : 'has no ready endpoint or did not answer'}`,
      {
        status,
        detail,
      },
    );
  return undefined;
}
