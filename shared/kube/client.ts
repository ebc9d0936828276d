// The one place where Outrigger talks HTTP to an apiserver. Everything is addressed by GVR; undici is the
// transport. Where the apiserver is and which credentials it takes come from a KubeEndpoint (config.ts makes
// one for each kind of cluster access), so this module needs no kubeconfig support: Lambda bundles leave it out.
import type { ConnectionOptions } from 'node:tls';
import pRetry, { AbortError } from 'p-retry';
import { Agent, ProxyAgent, type Dispatcher } from 'undici';
import { KubeError, kubeErrorFromFailure, kubeErrorFromResponse } from './errors.ts';
import { resourcePath, type GVR, type KubeList, type KubeObject } from './resource.ts';

/** What the client's TLS connections present and verify. */
export type TlsSettings = Pick<ConnectionOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized' | 'servername'>;

/** An apiserver and how to talk to it. */
export interface KubeEndpoint {
  server: string;
  /** The kubeconfig context's namespace, for commands that take an optional one (as kubectl does). */
  defaultNamespace?: string | undefined;
  tls: TlsSettings;
  /** An http(s) proxy to reach the apiserver through (a kubeconfig's proxy-url). */
  proxy?: string | undefined;
  /**
   * The credential headers (authorization, impersonation) for one request. Called before every request, so that
   * credentials that expire (EKS IAM tokens, a token rotated in Secrets Manager, exec plugins) keep working; it
   * should cache.
   */
  headers: () => Promise<Record<string, string>>;
}

/**
 * Made on the first request (and again after a failure), not at connect(): reading a kubeconfig may run an exec
 * plugin, and needs a module Lambda bundles leave out.
 */
export type EndpointSource = () => Promise<KubeEndpoint>;

export interface RetryOptions {
  /** Attempts after the first, for transient failures only (429, 5xx, no answer). */
  retries: number;
  minDelayMs: number;
  maxDelayMs: number;
}

export interface KubeClientOptions {
  retry?: Partial<RetryOptions>;
  /** Per-request timeout; watches are exempt. */
  timeoutMs?: number;
  /** Field manager for server-side apply and for every write's managedFields. */
  fieldManager?: string;
  /** Another endpoint of the same cluster (one apiserver of several), with the same credentials and CA. */
  server?: string;
}

export interface ListOptions {
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  limit?: number | undefined;
  continue?: string | undefined;
  resourceVersion?: string | undefined;
  /** With `resourceVersion`: NotOlderThan is served from the watch cache as soon as it has seen that version. */
  resourceVersionMatch?: 'NotOlderThan' | 'Exact' | undefined;
}

export type PatchType = 'merge' | 'json' | 'strategic' | 'apply';

const patchContentType: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
};

export interface DeleteOptions {
  /** Refuse to delete unless the object still has this uid (and resourceVersion, when given). */
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
}

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/** Counts requests by verb, so benchmarks and tests can state what an operation cost. */
export class RequestStats {
  total = 0;
  readonly byVerb: Record<string, number> = {};
  count(verb: string): void {
    this.total += 1;
    this.byVerb[verb] = (this.byVerb[verb] ?? 0) + 1;
  }
  reset(): void {
    this.total = 0;
    for (const k of Object.keys(this.byVerb)) delete this.byVerb[k];
  }
}

export const DEFAULT_FIELD_MANAGER = 'outrigger';

/** A client's transport, once its endpoint is known. */
interface Connection {
  server: string;
  defaultNamespace: string | undefined;
  headers: KubeEndpoint['headers'];
  /** One per client: its connections stay alive from one request (and one warm Lambda invocation) to the next. */
  dispatcher: Dispatcher;
}

export class KubeClient {
  readonly stats = new RequestStats();
  readonly fieldManager: string;
  private readonly retry: RetryOptions;
  private readonly timeoutMs: number;
  private readonly source: EndpointSource;
  private readonly serverOverride: string | undefined;
  private connection: Promise<Connection> | undefined;

  constructor(source: EndpointSource, opts: KubeClientOptions = {}) {
    this.source = source;
    this.serverOverride = opts.server;
    this.retry = { retries: 4, minDelayMs: 100, maxDelayMs: 2_000, ...opts.retry };
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.fieldManager = opts.fieldManager ?? DEFAULT_FIELD_MANAGER;
  }

  /** The apiserver this client talks to (without a trailing slash), and the kubeconfig context's namespace. */
  async endpoint(): Promise<{ server: string; defaultNamespace: string | undefined }> {
    const { server, defaultNamespace } = await this.open();
    return { server, defaultNamespace };
  }

  private open(): Promise<Connection> {
    this.connection ??= this.source().then(
      (endpoint) => ({
        server: (this.serverOverride ?? endpoint.server).replace(/\/+$/, ''),
        defaultNamespace: endpoint.defaultNamespace,
        headers: endpoint.headers,
        dispatcher: dispatcherFor(endpoint),
      }),
      (err: unknown) => {
        // A kubeconfig being written, an exec plugin that failed once: the next request tries again.
        this.connection = undefined;
        throw err;
      },
    );
    return this.connection;
  }

  async get<T extends KubeObject = KubeObject>(r: GVR, name: string, namespace?: string): Promise<T> {
    return this.request<T>('GET', resourcePath(r, { namespace, name }), { verb: 'get' });
  }

  /** `get`, with "not there" as undefined rather than an error. */
  async find<T extends KubeObject = KubeObject>(r: GVR, name: string, namespace?: string): Promise<T | undefined> {
    try {
      return await this.get<T>(r, name, namespace);
    } catch (err) {
      if (err instanceof KubeError && err.kind === 'NotFound') return undefined;
      throw err;
    }
  }

  async list<T extends KubeObject = KubeObject>(r: GVR, opts: ListOptions = {}): Promise<KubeList<T>> {
    const { namespace, ...query } = opts;
    return this.request<KubeList<T>>('GET', resourcePath(r, { namespace }), { verb: 'list', query });
  }

  /** Every page of a list, `limit` objects per request. */
  async listAll<T extends KubeObject = KubeObject>(r: GVR, opts: ListOptions = {}): Promise<T[]> {
    const items: T[] = [];
    let cont: string | undefined;
    do {
      const page = await this.list<T>(r, { limit: 500, ...opts, continue: cont });
      items.push(...page.items);
      cont = page.metadata.continue || undefined;
    } while (cont);
    return items;
  }

  async create<T extends KubeObject = KubeObject>(r: GVR, obj: T, namespace?: string): Promise<T> {
    return this.request<T>('POST', resourcePath(r, { namespace: namespace ?? obj.metadata.namespace }), {
      verb: 'create',
      body: obj,
      query: { fieldManager: this.fieldManager },
    });
  }

  /** PUT: fails with Conflict when `obj.metadata.resourceVersion` is stale, which is the point. */
  async replace<T extends KubeObject = KubeObject>(r: GVR, obj: T, opts: { subresource?: string } = {}): Promise<T> {
    const name = obj.metadata.name;
    if (!name) throw new KubeError('Invalid', `replace ${r.resource}: the object has no metadata.name`);
    return this.request<T>('PUT', resourcePath(r, { namespace: obj.metadata.namespace, name, subresource: opts.subresource }), {
      verb: opts.subresource ? `update/${opts.subresource}` : 'update',
      body: obj,
      query: { fieldManager: this.fieldManager },
    });
  }

  async patch<T extends KubeObject = KubeObject>(
    r: GVR,
    name: string,
    namespace: string | undefined,
    patch: unknown,
    type: PatchType,
    opts: { subresource?: string; force?: boolean } = {},
  ): Promise<T> {
    const query: Record<string, string | boolean> = { fieldManager: this.fieldManager };
    if (type === 'apply' && opts.force) query.force = true;
    return this.request<T>('PATCH', resourcePath(r, { namespace, name, subresource: opts.subresource }), {
      verb: `patch/${type}`,
      body: patch,
      contentType: patchContentType[type],
      query,
    });
  }

  async delete(r: GVR, name: string, namespace?: string, opts: DeleteOptions = {}): Promise<void> {
    const body: Record<string, unknown> = { apiVersion: 'v1', kind: 'DeleteOptions' };
    if (opts.preconditions) body.preconditions = opts.preconditions;
    if (opts.propagationPolicy) body.propagationPolicy = opts.propagationPolicy;
    await this.request('DELETE', resourcePath(r, { namespace, name }), { verb: 'delete', body });
  }

  /** GET of an arbitrary path, for discovery (`/apis/apps/v1`, `/version`). */
  async getPath<T>(path: string): Promise<T> {
    return this.request<T>('GET', path, { verb: 'discovery' });
  }

  /**
   * Streams watch events until the server closes the watch, `signal` aborts, or an error event arrives. A
   * `410 Gone` (as HTTP status or as an ERROR event) is thrown as a KubeError of kind Gone: relist and retry.
   */
  async watch<T extends KubeObject = KubeObject>(
    r: GVR,
    opts: ListOptions & { allowWatchBookmarks?: boolean; timeoutSeconds?: number },
    onEvent: (event: WatchEvent<T>) => void | Promise<void>,
    signal?: AbortSignal,
  ): Promise<void> {
    const { namespace, ...rest } = opts;
    const path = resourcePath(r, { namespace });
    const what = `watch ${path}`;
    this.stats.count('watch');
    const query = { ...rest, watch: true };
    const prepared = await this.prepare('GET', path, { query, ...(signal ? { signal } : {}) });
    let res;
    try {
      res = await prepared.dispatcher.request(prepared.options);
    } catch (err) {
      throw kubeErrorFromFailure(err, what);
    }
    if (res.statusCode < 200 || res.statusCode > 299) throw kubeErrorFromResponse(res.statusCode, await res.body.text(), what);
    const decoder = new TextDecoder();
    let buffered = '';
    try {
      for await (const chunk of res.body) {
        buffered += decoder.decode(chunk as Buffer, { stream: true });
        let nl;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (!line) continue;
          const event = JSON.parse(line) as WatchEvent<T>;
          if (event.type === 'ERROR') {
            const status = event.object as unknown as { code?: number };
            throw kubeErrorFromResponse(status.code ?? 500, line.length ? JSON.stringify(event.object) : '', what);
          }
          await onEvent(event);
        }
      }
    } catch (err) {
      if (signal?.aborted) return;
      throw err instanceof KubeError ? err : kubeErrorFromFailure(err, what);
    }
  }

  /**
   * One API call with bounded retries for transient failures only. NotFound, Conflict, Invalid and the other
   * definite answers are returned to the caller at once: they are facts about the cluster, not faults.
   */
  async request<T>(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    opts: { verb: string; query?: Record<string, string | number | boolean | undefined>; body?: unknown; contentType?: string },
  ): Promise<T> {
    const what = `${method} ${path}`;
    return pRetry(
      async () => {
        this.stats.count(opts.verb);
        // Credentials and TLS settings are prepared first: a failure there is a configuration problem,
        // reported at once, not a missing answer worth retrying.
        let prepared;
        try {
          prepared = await this.prepare(method, path, { ...opts, signal: AbortSignal.timeout(this.timeoutMs) });
        } catch (err) {
          throw new AbortError(err instanceof Error ? err : String(err));
        }
        let status: number;
        let text: string;
        try {
          // undici's request(), not fetch(): the same connection pool, a fraction of fetch's per-call CPU,
          // which is most of a poll's client time (1,000 writes per poll).
          const res = await prepared.dispatcher.request(prepared.options);
          status = res.statusCode;
          text = await res.body.text();
        } catch (err) {
          throw kubeErrorFromFailure(err, what);
        }
        if (status < 200 || status > 299) {
          const e = kubeErrorFromResponse(status, text, what);
          throw e.transient ? e : new AbortError(e);
        }
        return (text ? JSON.parse(text) : undefined) as T;
      },
      {
        retries: this.retry.retries,
        minTimeout: this.retry.minDelayMs,
        maxTimeout: this.retry.maxDelayMs,
        factor: 2,
        randomize: true,
        shouldRetry: ({ error }) => error instanceof KubeError && error.transient,
      },
    );
  }

  private async prepare(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    opts: { query?: Record<string, string | number | boolean | undefined>; body?: unknown; contentType?: string; signal?: AbortSignal },
  ): Promise<{ dispatcher: Dispatcher; options: Dispatcher.RequestOptions }> {
    const { server, headers: credentials, dispatcher } = await this.open();
    const url = new URL(server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(await credentials())) headers[k.toLowerCase()] = v;
    headers.accept = 'application/json';
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json';
      body = JSON.stringify(opts.body);
    }
    return {
      dispatcher,
      options: {
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      },
    };
  }
}

function dispatcherFor(endpoint: KubeEndpoint): Dispatcher {
  // TCP keep-alive probes after 30 s, not undici's 60: a cloud load balancer's idle timeout (60 s on AWS) must
  // not be the first to notice an idle connection.
  const keepAlive = { keepAlive: true, keepAliveInitialDelay: 30_000 };
  if (!endpoint.proxy) return new Agent({ connect: { ...endpoint.tls, ...keepAlive } });
  if (!/^https?:/.test(endpoint.proxy)) throw new Error(`proxy ${endpoint.proxy}: only http and https proxies are supported`);
  // Through a proxy, the apiserver's TLS settings are for the tunnelled connection, not the one to the proxy.
  return new ProxyAgent({ uri: endpoint.proxy, requestTls: endpoint.tls, connect: keepAlive });
}
