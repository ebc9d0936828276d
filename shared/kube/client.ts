// The one place where Outrigger talks HTTP to an apiserver. Everything is addressed by GVR; Node's own http(s)
// client is the transport (it costs a Lambda bundle nothing at start-up; undici was most of it). Where the
// apiserver is and which credentials it takes come from a KubeEndpoint (config.ts makes one for each kind of
// cluster access), so this module needs no kubeconfig support: Lambda bundles leave it out.
/* eslint-disable max-lines -- KubeClient alone is some 310 lines, one method per apiserver verb over one connection; its transport helpers below (about 55) would leave it over 400, and a second module would split the one place that speaks HTTP to an apiserver */
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ConnectionOptions } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import pRetry, { AbortError } from 'p-retry';
import type {
  CreateOptions,
  DeleteOptions,
  Impersonation,
  KubeApi,
  ListOptions,
  ObjectRef,
  PatchOptions,
  PatchType,
  ProxyRequest,
  Stored,
  WatchEvent,
  WatchOptions,
} from './api.ts';

export type { Impersonation } from './api.ts';
import { KubeError, kubeErrorFromFailure, kubeErrorFromResponse, unlessNotFound } from './errors.ts';
import { isNamespaced } from './discovery.ts';
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
  /**
   * The longest wait the apiserver may ask for (Retry-After, or a Status's retryAfterSeconds) that is honoured
   * before a retry; a longer request is cut to this.
   */
  maxRetryAfterMs: number;
}

export interface KubeClientOptions {
  retry?: Partial<RetryOptions>;
  /** Per-request timeout; watches are exempt. */
  timeoutMs?: number;
  /** Field manager for server-side apply and for every write's managedFields. */
  fieldManager?: string;
  /** Another endpoint of the same cluster (one apiserver of several), with the same credentials and CA. */
  server?: string;
  /**
   * Keep the client to one namespace (the local runtime's `--namespace`): a list of a namespaced resource across
   * namespaces reads this one only, and a write to another namespace, or to a cluster-scoped object other than a
   * definition's status or an access review, is refused before it is sent
   * (docs/getting-started/local.md#one-namespace).
   */
  namespace?: string | undefined;
}

/**
 * The writes a client kept to one namespace may make elsewhere: access reviews, which store nothing, and Outrigger's
 * and Metacontroller's definitions (cluster-scoped): their status, which says whether the definition can run, and a
 * patch of the definition itself (Outrigger's finalizer on it, the kinds its hooks read), the same from any namespace.
 * Without the finalizer a definition with a finalize hook could not be served from one namespace at all.
 */
function writableOutsideScope(verb: string, r: GVR, namespace: string | undefined, subresource: string | undefined): boolean {
  if (r.group === 'authorization.k8s.io' || r.group === 'authentication.k8s.io') return true;
  const definition = namespace === undefined && (r.group === 'outrigger.dev' || r.group === 'metacontroller.k8s.io');
  return definition && (subresource === 'status' || verb === 'patch');
}

const patchContentType: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
};

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

// Server-side transformations of an answer to its metadata (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables
// describes the mechanism; PartialObjectMetadata is its metadata form).
const METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/** A client's transport, once its endpoint is known. */
interface Connection {
  server: string;
  defaultNamespace: string | undefined;
  headers: KubeEndpoint['headers'];
  transport: Transport;
}

/** Where requests go and through which pool. */
interface Transport {
  /** http.request or https.request, to match `agent`. */
  send: (options: {
    agent: HttpAgent;
    hostname: string;
    port: string;
    path: string;
    method: string;
    headers: OutgoingHttpHeaders;
    signal?: AbortSignal;
  }) => ClientRequest;
  /** One per client: its connections stay alive from one request (and one warm Lambda invocation) to the next. */
  agent: HttpAgent;
  hostname: string;
  port: string;
}

/** A request ready to send. */
interface Prepared {
  transport: Transport;
  method: string;
  path: string;
  headers: OutgoingHttpHeaders;
  body: string | undefined;
  signal: AbortSignal | undefined;
}

/** A service account's user name, as the apiserver authenticates it. */
export function serviceAccountUser(namespace: string, name: string): Impersonation {
  return { user: `system:serviceaccount:${namespace}:${name}` };
}

export class KubeClient implements KubeApi {
  readonly stats = new RequestStats();
  readonly fieldManager: string;
  private readonly retry: RetryOptions;
  private readonly timeoutMs: number;
  private readonly source: EndpointSource;
  private readonly serverOverride: string | undefined;
  private connection: Promise<Connection> | undefined;
  private impersonation: Impersonation | undefined;
  /** The client this one acts for another identity through: one endpoint and connection pool for both. */
  private base: KubeClient | undefined;
  /** Ends every request and its retries (within): one cluster's share of an invocation. */
  private deadline: AbortSignal | undefined;
  /** The one namespace this client reads across namespaces and writes in (KubeClientOptions.namespace). */
  private readonly scope: string | undefined;

  constructor(source: EndpointSource, opts: KubeClientOptions = {}) {
    this.source = source;
    this.serverOverride = opts.server;
    this.retry = { retries: 4, minDelayMs: 100, maxDelayMs: 2_000, maxRetryAfterMs: 30_000, ...opts.retry };
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.fieldManager = opts.fieldManager ?? DEFAULT_FIELD_MANAGER;
    this.scope = opts.namespace;
  }

  /** The apiserver this client talks to (without a trailing slash), and the kubeconfig context's namespace. */
  async endpoint(): Promise<{ server: string; defaultNamespace: string | undefined }> {
    const { server, defaultNamespace } = await this.open();
    return { server, defaultNamespace };
  }

  /** This client, acting as another identity (Impersonation); the same endpoint, connections and stats. */
  as(impersonation: Impersonation): KubeClient {
    return this.view({ impersonation });
  }

  /**
   * This client, with every request, and every retry, ended when `deadline` aborts: a request then fails with the
   * signal's reason as a transient KubeError (docs/operations/operating.md#one-cluster-cannot-stall-another). The
   * same endpoint, identity, connections and stats.
   */
  within(deadline: AbortSignal): KubeClient {
    return this.view({ deadline });
  }

  private view(change: { impersonation?: Impersonation; deadline?: AbortSignal }): KubeClient {
    const client = new KubeClient(this.source, {
      retry: this.retry,
      timeoutMs: this.timeoutMs,
      fieldManager: this.fieldManager,
      server: this.serverOverride,
      namespace: this.scope,
    });
    Object.assign(client, { stats: this.stats });
    client.base = this.base ?? this;
    client.impersonation = change.impersonation ?? this.impersonation;
    client.deadline = change.deadline ?? this.deadline;
    return client;
  }

  private open(): Promise<Connection> {
    if (this.base) return this.base.open();
    this.connection ??= this.source().then(
      (endpoint) => {
        const server = (this.serverOverride ?? endpoint.server).replace(/\/+$/, '');
        return {
          server,
          defaultNamespace: endpoint.defaultNamespace,
          headers: endpoint.headers,
          transport: transportFor(server, endpoint),
        };
      },
      (err: unknown) => {
        // A kubeconfig being written, an exec plugin that failed once: the next request tries again.
        this.connection = undefined;
        throw err;
      },
    );
    return this.connection;
  }

  async get<T extends KubeObject = KubeObject>(r: GVR, ref: ObjectRef): Promise<Stored<T>> {
    return this.request<Stored<T>>('GET', resourcePath(r, ref), { verb: 'get' });
  }

  /** `get`, with "not there" as undefined rather than an error. */
  async find<T extends KubeObject = KubeObject>(r: GVR, ref: ObjectRef): Promise<Stored<T> | undefined> {
    return unlessNotFound(this.get<T>(r, ref));
  }

  async list<T extends KubeObject = KubeObject>(r: GVR, opts: ListOptions = {}): Promise<KubeList<Stored<T>>> {
    const { namespace: asked, ...query } = opts;
    const namespace = await this.scoped(r, asked);
    return this.request<KubeList<Stored<T>>>('GET', resourcePath(r, { namespace }), { verb: 'list', query });
  }

  /** `list`, answered with each object's metadata only (a PartialObjectMetadataList): no object body is read. */
  async listMetadata(r: GVR, opts: ListOptions = {}): Promise<KubeList<Stored>> {
    const { namespace: asked, ...query } = opts;
    const namespace = await this.scoped(r, asked);
    const list = await this.request<KubeList<Stored>>('GET', resourcePath(r, { namespace }), {
      verb: 'list/metadata',
      query,
      accept: METADATA_LIST,
    });
    // An empty PartialObjectMetadataList comes as `"items": null` (Go's nil slice), unlike a full list.
    return { ...list, items: list.items ?? [] };
  }

  /** Every page of a list, `limit` objects per request. */
  async listAll<T extends KubeObject = KubeObject>(r: GVR, opts: ListOptions = {}): Promise<Array<Stored<T>>> {
    const items: Array<Stored<T>> = [];
    let cont: string | undefined;
    do {
      const page = await this.list<T>(r, { limit: 500, ...opts, continue: cont });
      items.push(...page.items);
      cont = page.metadata.continue || undefined;
    } while (cont);
    return items;
  }

  /** POST, into `opts.namespace` or else the object's own. */
  async create<T extends KubeObject = KubeObject>(r: GVR, obj: T, opts: CreateOptions = {}): Promise<Stored<T>> {
    this.mayWrite('create', r, opts.namespace ?? obj.metadata.namespace, obj.metadata.name ?? obj.metadata.generateName);
    return this.request<Stored<T>>('POST', resourcePath(r, { namespace: opts.namespace ?? obj.metadata.namespace }), {
      verb: 'create',
      body: obj,
      encode: opts.encode,
      query: { fieldManager: opts.fieldManager ?? this.fieldManager },
    });
  }

  /** PUT: fails with Conflict when `obj.metadata.resourceVersion` is stale, which is the point. */
  async replace<T extends KubeObject = KubeObject>(r: GVR, obj: T, opts: { subresource?: string } = {}): Promise<Stored<T>> {
    const name = obj.metadata.name;
    if (!name) throw new KubeError('Invalid', `replace ${r.resource}: the object has no metadata.name`);
    this.mayWrite('update', r, obj.metadata.namespace, name, opts.subresource);
    return this.request<Stored<T>>('PUT', resourcePath(r, { namespace: obj.metadata.namespace, name, subresource: opts.subresource }), {
      verb: opts.subresource ? `update/${opts.subresource}` : 'update',
      body: obj,
      query: { fieldManager: this.fieldManager },
    });
  }

  async patch<T extends KubeObject = KubeObject>(
    r: GVR,
    ref: ObjectRef,
    patch: unknown,
    type: PatchType,
    opts: PatchOptions = {},
  ): Promise<Stored<T>> {
    this.mayWrite('patch', r, ref.namespace, ref.name, ref.subresource);
    const query: Record<string, string | boolean> = { fieldManager: opts.fieldManager ?? this.fieldManager };
    if (type === 'apply' && opts.force) query.force = true;
    return this.request<Stored<T>>('PATCH', resourcePath(r, ref), {
      verb: `patch/${type}`,
      body: patch,
      contentType: patchContentType[type],
      query,
      // The answer as a PartialObjectMetadata: the patched object's body is neither sent nor parsed.
      ...(opts.metadataOnly ? { accept: METADATA } : {}),
    });
  }

  async delete(r: GVR, ref: ObjectRef, opts: DeleteOptions = {}): Promise<void> {
    this.mayWrite('delete', r, ref.namespace, ref.name);
    const body: Record<string, unknown> = { apiVersion: 'v1', kind: 'DeleteOptions' };
    if (opts.preconditions) body.preconditions = opts.preconditions;
    if (opts.propagationPolicy) body.propagationPolicy = opts.propagationPolicy;
    await this.request('DELETE', resourcePath(r, { namespace: ref.namespace, name: ref.name }), { verb: 'delete', body });
  }

  /** The namespace a list or watch reads: the scope's, for a namespaced resource asked across namespaces. */
  private async scoped(r: GVR, namespace: string | undefined): Promise<string | undefined> {
    if (!this.scope || namespace) return namespace;
    // Discovery as the client's root, whose cache lives as long as it does.
    return (await isNamespaced(this.base ?? this, r)) ? this.scope : undefined;
  }

  /** Refuses, before sending, a write outside the client's namespace (KubeClientOptions.namespace). */
  private mayWrite(verb: string, r: GVR, namespace: string | undefined, name: string | undefined, subresource?: string): void {
    if (!this.scope || namespace === this.scope || writableOutsideScope(verb, r, namespace, subresource)) return;
    const what = `${r.resource}${subresource ? `/${subresource}` : ''} ${namespace ? `${namespace}/` : ''}${name ?? ''}`;
    throw new KubeError(
      'Forbidden',
      `${verb} ${what}: refused, this runtime is limited to namespace ${this.scope} (--namespace), and ${namespace ? 'that is another namespace' : 'that object is cluster-scoped'}`,
    );
  }

  /** GET of an arbitrary path, for discovery (`/apis/apps/v1`, `/version`). */
  async getPath<T>(path: string): Promise<T> {
    return this.request<T>('GET', path, { verb: 'discovery' });
  }

  /**
   * Streams watch events until the server closes the watch, `signal` aborts, or an error event arrives. A
   * `410 Gone` (as HTTP status or as an ERROR event) is thrown as a KubeError of kind Gone: relist and retry.
   * With `metadataOnly`, each event's object is a PartialObjectMetadata: the server sends no spec, status or data.
   */
  async watch<T extends KubeObject = KubeObject>(
    r: GVR,
    opts: WatchOptions,
    onEvent: (event: WatchEvent<T>) => void | Promise<void>,
    signal?: AbortSignal,
  ): Promise<void> {
    const { namespace: asked, metadataOnly, ...rest } = opts;
    const namespace = await this.scoped(r, asked);
    const path = resourcePath(r, { namespace });
    const what = `watch ${path}`;
    this.stats.count(metadataOnly ? 'watch/metadata' : 'watch');
    const query = { ...rest, watch: true };
    const prepared = await this.prepare('GET', path, {
      query,
      ...(signal ? { signal } : {}),
      ...(metadataOnly ? { accept: METADATA } : {}),
    });
    let res: IncomingMessage;
    try {
      res = await respond(prepared);
    } catch (err) {
      throw kubeErrorFromFailure(err, what);
    }
    const status = res.statusCode ?? 0;
    if (status < 200 || status > 299) {
      let text: string;
      try {
        text = await readBody(res, signal);
      } catch (err) {
        throw kubeErrorFromFailure(err, what);
      }
      throw kubeErrorFromResponse(status, text, what);
    }
    const decoder = new TextDecoder();
    let buffered = '';
    try {
      for await (const chunk of res) {
        buffered += decoder.decode(chunk as Buffer, { stream: true });
        let nl;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (!line) continue;
          const event = JSON.parse(line) as WatchEvent<T>;
          if (event.type === 'ERROR') {
            const status = event.object as unknown as { code?: number };
            throw kubeErrorFromResponse(status.code ?? 500, JSON.stringify(event.object), what);
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
   * A POST to a path as this client's identity (a Service's proxy), once: the hook caller retries as the hook's
   * own settings say, and reads the answer with its own size limit. The answer is returned whatever its status.
   */
  async proxy(request: ProxyRequest): Promise<IncomingMessage> {
    this.stats.count('proxy');
    const prepared = await this.prepare('POST', request.path, {
      signal: this.deadline ? AbortSignal.any([request.signal, this.deadline]) : request.signal,
      accept: request.headers.accept ?? 'application/json',
    });
    // The caller's headers, but never its say over whom the call is made as (the credentials and impersonation).
    const own = new Set(['authorization', 'impersonate-user', 'impersonate-group', 'impersonate-uid', 'host']);
    for (const [k, v] of Object.entries(request.headers))
      if (!own.has(k.toLowerCase()) && !k.toLowerCase().startsWith('impersonate-extra-')) prepared.headers[k.toLowerCase()] = v;
    return respond({ ...prepared, body: request.body });
  }

  /**
   * One API call with bounded retries for transient failures only. NotFound, Conflict, Invalid and the other
   * definite answers are returned to the caller at once: they are facts about the cluster, not faults.
   */
  async request<T>(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    opts: {
      verb: string;
      query?: Record<string, string | number | boolean | undefined>;
      body?: unknown;
      encode?: ((body: unknown) => string) | undefined;
      contentType?: string;
      accept?: string;
    },
  ): Promise<T> {
    const what = `${method} ${path}`;
    const deadline = this.deadline;
    if (deadline?.aborted) throw kubeErrorFromFailure(deadline.reason, what);
    /** The last attempt's answer: what a request cut off by its deadline reports, rather than the abort. */
    let last: KubeError | undefined;
    return pRetry(
      async () => {
        this.stats.count(opts.verb);
        const timeout = AbortSignal.timeout(this.timeoutMs);
        // Credentials and TLS settings are prepared first: a failure there is a configuration problem,
        // reported at once, not a missing answer worth retrying.
        let prepared;
        try {
          prepared = await this.prepare(method, path, { ...opts, signal: deadline ? AbortSignal.any([timeout, deadline]) : timeout });
        } catch (err) {
          throw new AbortError(err instanceof Error ? err : String(err));
        }
        let status: number;
        let text: string;
        let retryAfter: string | undefined;
        try {
          // http.request(), not fetch(): the same connection pool, a fraction of fetch's per-call CPU, which is
          // most of a poll's client time (1,000 writes per poll).
          const res = await respond(prepared);
          status = res.statusCode ?? 0;
          retryAfter = res.headers['retry-after'];
          text = await readBody(res, prepared.signal);
        } catch (err) {
          throw (last = kubeErrorFromFailure(err, what));
        }
        if (status < 200 || status > 299) {
          const e = (last = kubeErrorFromResponse(status, text, what, retryAfter));
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
        shouldRetry: async ({ error, retryDelay }) => {
          if (!(error instanceof KubeError && error.transient) || deadline?.aborted) return false;
          // The apiserver's own estimate (429 from priority and fairness, 503 while shutting down) outranks the
          // backoff when it is longer: retrying sooner only meets the same answer.
          const asked = Math.min((error.retryAfterSeconds ?? 0) * 1000, this.retry.maxRetryAfterMs);
          if (asked > retryDelay) await sleep(asked - retryDelay, undefined, deadline ? { signal: deadline } : {}).catch(() => {});
          return !deadline?.aborted;
        },
        // The wait between attempts ends with the deadline too; the rejection is then the deadline's reason.
        ...(deadline ? { signal: deadline } : {}),
      },
    ).catch((err: unknown) => {
      throw deadline?.aborted ? (last ?? kubeErrorFromFailure(err, what)) : err;
    });
  }

  private async prepare(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    opts: {
      query?: Record<string, string | number | boolean | undefined>;
      body?: unknown;
      encode?: ((body: unknown) => string) | undefined;
      contentType?: string;
      accept?: string;
      signal?: AbortSignal;
    },
  ): Promise<Prepared> {
    const { server, headers: credentials, transport } = await this.open();
    const url = new URL(server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const headers: OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(await credentials())) headers[k.toLowerCase()] = v;
    if (this.impersonation) {
      headers['impersonate-user'] = this.impersonation.user;
      if (this.impersonation.groups?.length) headers['impersonate-group'] = [...this.impersonation.groups];
      else delete headers['impersonate-group'];
    }
    headers.accept = opts.accept ?? 'application/json';
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json';
      body = (opts.encode ?? JSON.stringify)(opts.body);
      headers['content-length'] = Buffer.byteLength(body);
    }
    return { transport, method, path: `${url.pathname}${url.search}`, headers, body, signal: opts.signal };
  }
}

/** Sends a request; resolves with the response once its status and headers are in. */
function respond(p: Prepared): Promise<IncomingMessage> {
  const { transport, signal } = p;
  return new Promise((resolve, reject) => {
    const req = transport.send({
      agent: transport.agent,
      hostname: transport.hostname,
      port: transport.port,
      path: p.path,
      method: p.method,
      headers: p.headers,
      ...(signal ? { signal } : {}),
    });
    // Aborted, a request fails with the signal's reason (a TimeoutError for a timeout), as fetch and undici do;
    // Node would wrap it in an AbortError. The listener stays for the response's lifetime: an abort while the body
    // is read errors the request as well.
    req.on('error', (err) => reject(signal?.aborted ? signal.reason : err));
    req.on('response', resolve);
    req.end(p.body);
  });
}

/** A response's whole body as text. */
function readBody(res: IncomingMessage, signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    let first: Buffer | undefined;
    let rest: Buffer[] | undefined;
    res.on('data', (chunk: Buffer) => {
      if (first === undefined) first = chunk;
      else (rest ??= [first]).push(chunk);
    });
    res.on('end', () => resolve(rest ? Buffer.concat(rest).toString('utf8') : (first?.toString('utf8') ?? '')));
    res.on('error', (err) => reject(signal?.aborted ? signal.reason : err));
    // After 'end' this settles nothing; before it, the connection went without an error being reported.
    res.on('close', () =>
      reject(signal?.aborted ? signal.reason : Object.assign(new Error('the response ended early'), { code: 'ECONNRESET' })),
    );
  });
}

function transportFor(server: string, endpoint: KubeEndpoint): Transport {
  const url = new URL(server);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`server ${server}: only http and https are supported`);
  const https = url.protocol === 'https:';
  if (endpoint.proxy && !/^https?:/.test(endpoint.proxy))
    throw new Error(`proxy ${endpoint.proxy}: only http and https proxies are supported`);
  const options = {
    keepAlive: true,
    // TCP keep-alive probes after 30 s (from the connection's start, and again once it is idle in the pool): a
    // cloud load balancer's idle timeout (60 s on AWS) must not be the first to notice an idle connection.
    keepAliveMsecs: 30_000,
    keepAliveInitialDelay: 30_000,
    // Bounded, so that a burst of writes queues on the client rather than opening connections without limit.
    maxSockets: 64,
    // Node's own proxy support: a CONNECT tunnel for https (the apiserver's TLS settings apply to the tunnelled
    // connection, not to the one to the proxy), absolute-form requests for http.
    ...(endpoint.proxy ? { proxyEnv: https ? { HTTPS_PROXY: endpoint.proxy } : { HTTP_PROXY: endpoint.proxy } } : {}),
  };
  // Settings left undefined are left out: an explicit undefined would hide the agent's default (servername
  // from the host).
  const tls: TlsSettings = {};
  for (const [k, v] of Object.entries(endpoint.tls) as Array<[keyof TlsSettings, unknown]>)
    if (v !== undefined) Object.assign(tls, { [k]: v });
  return {
    send: https ? httpsRequest : httpRequest,
    agent: https ? new HttpsAgent({ ...options, ...tls }) : new HttpAgent(options),
    // A literal IPv6 address comes bracketed in a URL, not in a socket's address.
    hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port || (https ? '443' : '80'),
  };
}
