// Where a webhook is sent (docs/reference/hooks.md#hooks-inside-the-cluster): a URL outside the cluster, reached from
// the function over the network, or a Service inside it (`webhook.service`, or a URL naming a Service by its
// cluster DNS name), reached through the apiserver's service proxy as the controller's ServiceAccount. Pure: the
// spec's fields in, the target out, or why it cannot be called.

/** The webhook fields a target is made from (shared/map/api.ts's webhook schema; the CompositeController's reuses it). */
export interface WebhookSpec {
  url?: string | undefined;
  service?: { name: string; namespace: string; port?: number | undefined; protocol?: string | undefined } | undefined;
  path?: string | undefined;
}

export type WebhookTarget =
  | { kind: 'url'; url: string }
  | {
      kind: 'service';
      namespace: string;
      name: string;
      port: number;
      protocol: 'http' | 'https';
      /** The path (and query) sent to the Service, `/` at least. */
      path: string;
      /** The URL the request is signed over: `<protocol>://<name>.<namespace>.svc:<port><path>`, or the URL as named. */
      url: string;
    };

export class WebhookTargetError extends Error {}

const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * A URL's host names a Service when it is `<name>.<namespace>.svc` or `<name>.<namespace>.svc.cluster.local`, or
 * `<name>.<namespace>` over plain http (outside the cluster plain http is refused anyway, and an https name of two
 * labels is an Internet name). The Service and namespace, or undefined for a URL outside the cluster.
 */
export function serviceOfHost(host: string, protocol: string): { name: string; namespace: string } | undefined {
  const labels = host.toLowerCase().replace(/\.$/, '').split('.');
  const [name, namespace, ...rest] = labels;
  if (!name || !namespace || !LABEL.test(name) || !LABEL.test(namespace)) return undefined;
  const suffix = rest.join('.');
  if (suffix === 'svc' || suffix === 'svc.cluster.local') return { name, namespace };
  if (suffix === '' && protocol === 'http:') return { name, namespace };
  return undefined;
}

/**
 * The path sent through the proxy: it must start with `/`, and no segment may be `.` or `..` (plain or
 * percent-encoded), nor may it hold an encoded `/` or `\`: the apiserver would resolve such a path against its own
 * API rather than the Service's.
 */
function checkedPath(path: string): string {
  if (!path.startsWith('/')) throw new WebhookTargetError(`path ${JSON.stringify(path.slice(0, 100))} must start with /`);
  const [pathname = ''] = path.split(/[?#]/, 1);
  if (/%2f|%5c|\\/i.test(pathname)) throw new WebhookTargetError('the path may not hold an encoded / or a \\');
  const segments = pathname.split('/').map((s) => s.replace(/%2e/gi, '.'));
  if (segments.some((s) => s === '.' || s === '..')) throw new WebhookTargetError('the path may not hold . or .. segments');
  if (path.includes('#')) throw new WebhookTargetError('the path may not hold a fragment');
  return path;
}

/** The webhook's target; a WebhookTargetError names what is wrong (the message may reach the parent's status). */
export function webhookTarget(spec: WebhookSpec): WebhookTarget {
  if (spec.service) {
    if (spec.url !== undefined) throw new WebhookTargetError('names both url and service');
    const { name, namespace } = spec.service;
    if (!LABEL.test(name) || !LABEL.test(namespace)) throw new WebhookTargetError('service.name and service.namespace must be DNS labels');
    const protocol = spec.service.protocol ?? 'http';
    if (protocol !== 'http' && protocol !== 'https') throw new WebhookTargetError('service.protocol must be http or https');
    const port = spec.service.port ?? 80;
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new WebhookTargetError('service.port must be 1 to 65535');
    const path = checkedPath(spec.path ?? '/');
    return { kind: 'service', namespace, name, port, protocol, path, url: `${protocol}://${name}.${namespace}.svc:${port}${path}` };
  }
  if (spec.url === undefined) throw new WebhookTargetError('names neither url nor service');
  let parsed: URL;
  try {
    parsed = new URL(spec.url);
  } catch {
    throw new WebhookTargetError('the URL does not parse');
  }
  const service = serviceOfHost(parsed.hostname, parsed.protocol);
  if (!service) return { kind: 'url', url: spec.url };
  if (parsed.username || parsed.password) throw new WebhookTargetError('the URL carries credentials');
  const protocol = parsed.protocol === 'https:' ? 'https' : 'http';
  const port = parsed.port ? Number(parsed.port) : protocol === 'https' ? 443 : 80;
  // The path as WHATWG URL writes it (dot segments already resolved), checked again for encoded ones.
  const path = checkedPath(`${parsed.pathname}${parsed.search}`);
  return { kind: 'service', ...service, port, protocol, path, url: spec.url };
}

/** The apiserver path that proxies a POST to the target's Service: `/api/v1/namespaces/NS/services/[https:]NAME:PORT/proxy/PATH`. */
export function serviceProxyPath(target: Extract<WebhookTarget, { kind: 'service' }>): string {
  const scheme = target.protocol === 'https' ? 'https:' : '';
  return `/api/v1/namespaces/${target.namespace}/services/${scheme}${target.name}:${target.port}/proxy${target.path}`;
}
