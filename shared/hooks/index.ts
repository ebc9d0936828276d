// Calling a user's hook: an HTTP POST of JSON (webhook) or an AWS Lambda Invoke, each with a timeout and
// bounded retries for what a retry can fix (no answer, 429, 5xx, a throttled or failed invoke). Every failure
// is a HookError whose message names the hook and what went wrong, and never carries what the hook answered
// (messages reach the parent's status; the answer goes to `detail`, for the log). A webhook is reached over
// https only (plain http to a loopback address only when the local runtime allows it), never through a
// redirect, only to hosts and addresses the deployment allows (shared/hooks/egress.ts, judged on the address
// connected to: node:http's lookup hook, which fetch does not offer; docs/reference/hooks.md#where-webhooks-may-go),
// its answer is read up to a size limit, and each request is signed with its MapController's own key
// (shared/hooks/signature.ts; docs/reference/hooks.md#signatures). A webhook inside the cluster (a Service) is
// reached through the apiserver's service proxy instead, as the controller's ServiceAccount, so that RBAC decides
// which Services a controller reaches (shared/hooks/target.ts; docs/reference/hooks.md#hooks-inside-the-cluster).
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import pRetry, { AbortError } from 'p-retry';
import { parseRetryAfter } from '../kube/errors.ts';
import type { Hook, Webhook } from '../map/api.ts';
import { bindingRefusal, type HookCallerIdentity, type LambdaBinding } from './bindings.ts';
import { addressRefusal, hostRefusal, parseWebhookAllowList, specialRange, type WebhookAllowList } from './egress.ts';
import { controllerKey, signedHeaders } from './signature.ts';
import { HookError, hookName, hookTimeoutSeconds, MAX_ANSWER_BYTES } from './errors.ts';
import { etagKeyOf, proxyRefusal, WebhookOptions, type HookCluster } from './options.ts';
import { duplicateKey } from './strict.ts';
import { serviceProxyPath, WebhookTargetError, webhookTarget, type WebhookTarget } from './target.ts';

export { HookError, hookName, hookTimeoutSeconds, MAX_ANSWER_BYTES, type HookFailure } from './errors.ts';
export type { HookCluster } from './options.ts';

export interface CallOptions {
  /**
   * When the call must be over (ms since the epoch): the pass's time budget. Each attempt's timeout and the
   * retries are clamped to it, so `timeoutSeconds × (retries + 1)` never outlasts the invocation.
   */
  deadline?: number | undefined;
  /**
   * The definition the call is for: a webhook request is signed with its key (controllerKey, by cluster and uid); a
   * Lambda hook is invoked only for a definition its binding names (kind, name, ServiceAccount namespace).
   */
  controller?: (HookCallerIdentity & { uid: string }) | undefined;
  /**
   * The cluster's API as the controller's ServiceAccount: a Service hook goes through its service proxy, and a
   * webhook's Secrets and ConfigMaps are read with it. Never Outrigger's own client: what the account may not reach,
   * no hook of its controller reaches (docs/operations/security.md#hooks-inside-the-cluster).
   */
  cluster?: HookCluster | undefined;
  /**
   * Refuse an answer that names a field twice in one object (MalformedAnswer), as a Metacontroller hook's strict
   * response parsing does (docs/controllers/compositecontroller.md#hook-versions); otherwise the last one is read.
   */
  strictAnswer?: boolean | undefined;
}

export interface HookCaller {
  call(hook: Hook, request: unknown, opts?: CallOptions): Promise<unknown>;
}

export interface HookCallerOptions {
  /** Lambda's endpoint; the local runtime serves the Invoke API for hooks written as Lambda handlers. */
  lambdaEndpoint?: string | undefined;
  region?: string | undefined;
  /** First retry delay; doubles per retry. */
  minRetryDelayMs?: number;
  /** Plain http to a loopback address (the local runtime's hooks); anything else must be https. */
  allowLoopbackHttp?: boolean | undefined;
  /**
   * The deployment's webhook allow-list (`webhookAllow`; shared/hooks/egress.ts): host names and address ranges.
   * Without one, any host whose addresses are all public; a special address only when a listed range holds it.
   */
  webhookAllow?: readonly string[] | undefined;
  /** Resolves webhook hosts (default node:dns's lookup, as the system resolves); tests stand in a name server. */
  dnsLookup?: typeof dnsLookup;
  /** The deployment's signing secret, each controller's key derived from it; without one, requests are unsigned. */
  signingSecret?: (() => Promise<string>) | undefined;
  /**
   * Which definitions may call each Lambda function (shared/hooks/bindings.ts): a function no binding names, or a
   * caller none of its rules matches, is refused (NotAllowed) and not invoked. Absent: no check (the local runtime).
   */
  lambdaBindings?: readonly LambdaBinding[] | undefined;
  maxAnswerBytes?: number;
  now?: () => number;
}

const HTTPS_ONLY = 'webhooks are called over https only (plain http only to a loopback address, in the local runtime)';

/** Why a webhook URL may not be called, or undefined (a plain http host name's addresses are judged at connect). */
export function webhookRefusal(url: string, allowLoopbackHttp: boolean): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'the URL does not parse';
  }
  if (parsed.username || parsed.password) return 'the URL carries credentials';
  if (parsed.protocol === 'https:') return undefined;
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (parsed.protocol === 'http:' && allowLoopbackHttp && (!isIP(host) || specialRange(host) === 'loopback')) return undefined;
  return HTTPS_ONLY;
}

export class Hooks implements HookCaller {
  readonly stats = { calls: 0, attempts: 0 };
  // Made on first use, as the SQS client is (shared/lambda/sqs.ts): a controller whose hooks are webhooks never
  // needs it, and loading the SDK's Lambda client at import costs every cold start about 80 ms.
  private lambda: LambdaClient | undefined;
  private readonly opts: HookCallerOptions;
  private readonly allow: WebhookAllowList;
  // Agents of this caller's own, whose every connection was made through its allow-list's lookup: a socket kept
  // alive by a caller with another list is never reused.
  private readonly agents: { http: HttpAgent; https: HttpsAgent };
  /** Secrets and ConfigMaps read for webhook options, and answers kept for If-None-Match (etag). */
  private readonly options: WebhookOptions;

  constructor(opts: HookCallerOptions = {}) {
    this.opts = opts;
    this.allow = parseWebhookAllowList(opts.webhookAllow);
    this.options = new WebhookOptions(opts.now);
    const resolve = opts.dnsLookup ?? dnsLookup;
    this.agents = {
      http: new HttpAgent({ keepAlive: true, lookup: guardedLookup(this.allow, resolve, true) }),
      https: new HttpsAgent({ keepAlive: true, lookup: guardedLookup(this.allow, resolve, false) }),
    };
  }

  async call(hook: Hook, request: unknown, opts: CallOptions = {}): Promise<unknown> {
    this.stats.calls += 1;
    const body = JSON.stringify(request);
    const now = this.opts.now ?? Date.now;
    const { deadline } = opts;
    return pRetry(
      async () => {
        // An attempt gets the hook's timeout, or what is left of the pass's budget if that is less.
        const left = deadline === undefined ? Infinity : deadline - now();
        if (left <= 0)
          throw new AbortError(new HookError('Timeout', `${hookName(hook)}: the pass's time budget ran out before it answered`));
        // Whole milliseconds: node's timers (AbortSignal.timeout) refuse a fraction, and a deadline may carry one.
        const timeoutMs = Math.max(1, Math.floor(Math.min(hookTimeoutSeconds(hook) * 1000, left)));
        this.stats.attempts += 1;
        try {
          return hook.webhook ? await this.post(hook, hook.webhook, body, timeoutMs, opts) : await this.invoke(hook, body, timeoutMs, opts);
        } catch (err) {
          // A hook that says when to come back is not called again before then: the parent's retry waits for it.
          if (err instanceof HookError && err.retryAfterSeconds !== undefined) throw new AbortError(err);
          if (
            err instanceof HookError &&
            err.reason !== 'Timeout' &&
            err.reason !== 'Unreachable' &&
            !(err.reason === 'HTTPError' && retriable(err))
          )
            throw new AbortError(err);
          throw err;
        }
      },
      {
        retries: hook.retries,
        minTimeout: this.opts.minRetryDelayMs ?? 200,
        factor: 2,
        randomize: true,
        ...(deadline === undefined ? {} : { maxRetryTime: Math.max(0, deadline - now()) }),
      },
    );
  }

  private async post(hook: Hook, webhook: Webhook, body: string, timeoutMs: number, opts: CallOptions): Promise<unknown> {
    let target: WebhookTarget;
    try {
      target = webhookTarget(webhook);
    } catch (err) {
      if (!(err instanceof WebhookTargetError)) throw err;
      throw new HookError('Refused', `${hookName(hook)}: ${err.message}`);
    }
    const { controller, cluster } = opts;
    if (target.kind === 'url') {
      const refusal = webhookRefusal(target.url, this.opts.allowLoopbackHttp ?? false);
      if (refusal) throw new HookError('Refused', `${hookName(hook)}: ${refusal}`);
      const notAllowed = hostRefusal(new URL(target.url).hostname, this.allow);
      if (notAllowed) throw new HookError('NotAllowed', `${hookName(hook)}: ${notAllowed}`);
    } else {
      // The apiserver authenticates the call and drops its Authorization header, and makes the connection to the
      // Service itself: a Service hook's own authorization and TLS options could not be honoured, so they are refused.
      const unusable = (['authorization', 'basicAuth', 'clientTLS', 'caBundle'] as const).filter((k) => webhook[k]);
      if (unusable.length)
        throw new HookError(
          'Refused',
          `${hookName(hook)}: ${unusable.join(', ')} cannot be carried through the apiserver's service proxy, which authenticates the call as the controller's ServiceAccount`,
        );
      // Only ever as the controller's account: a call without its client would be Outrigger's own.
      if (!cluster?.proxy)
        throw new AbortError(new Error(`${hookName(hook)}: a call to a Service must be made as the controller's ServiceAccount`));
    }
    let key: string | undefined;
    if (this.opts.signingSecret) {
      // Never a key shared between controllers: a call that names none is a caller's bug, not sent unsigned.
      if (!controller) throw new AbortError(new Error(`${hookName(hook)}: a signed webhook call must name its MapController`));
      key = controllerKey(await this.opts.signingSecret(), controller.cluster, controller.uid);
    }
    const creds = target.kind === 'url' ? await this.options.credentials(hook, webhook, controller, cluster) : { headers: {}, tls: {} };
    const etagKey = webhook.etag?.enabled ? etagKeyOf(controller, target.url, body) : undefined;
    const fresh = this.options.fresh(etagKey);
    const now = this.opts.now ?? Date.now;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      ...creds.headers,
      ...(fresh ? { 'if-none-match': fresh.etag } : {}),
      ...signedHeaders(key, { method: 'POST', url: target.url, body }, now()),
    };
    let res: IncomingMessage;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      if (target.kind === 'service') res = await cluster!.proxy!({ path: serviceProxyPath(target), headers, body, signal });
      else
        res = await new Promise<IncomingMessage>((resolve, reject) => {
          const url = new URL(target.url);
          const [send, agent] = url.protocol === 'https:' ? [httpsRequest, this.agents.https] : [httpRequest, this.agents.http];
          // No redirect is followed (node:http follows none): a 3xx is an answer, below. TLS options (a CA bundle,
          // a client certificate) are part of the agent's connection key: no socket is shared across them.
          const req = send(url, { method: 'POST', headers, agent, signal, ...creds.tls }, resolve);
          req.on('error', reject);
          req.end(body);
        });
    } catch (err) {
      throw failure(hook, err, timeoutMs);
    }
    const status = res.statusCode ?? 0;
    // Not modified (or its precondition failed): the answer kept for this request still holds.
    if (fresh && (status === 304 || status === 412)) {
      res.resume();
      return parseAnswer(hook, fresh.text, opts.strictAnswer);
    }
    if (status >= 300 && status < 400) {
      res.destroy();
      throw new HookError('Refused', `${hookName(hook)} answered a redirect (HTTP ${status}); redirects are not followed`, {
        status,
        detail: res.headers.location,
      });
    }
    const text = await this.readCapped(hook, res, timeoutMs);
    if (target.kind === 'service') {
      const refused = proxyRefusal(hook, target, status, res.headers['content-type'], text);
      if (refused) throw refused;
    }
    if (status < 200 || status > 299) {
      const retryAfterSeconds =
        status === 429 || status >= 500 ? parseRetryAfter(res.headers['retry-after'], new Date((this.opts.now ?? Date.now)())) : undefined;
      const after = retryAfterSeconds === undefined ? '' : `; it asked to be called again after ${retryAfterSeconds} s`;
      throw new HookError('HTTPError', `${hookName(hook)} answered HTTP ${status}${after}`, {
        status,
        detail: text.slice(0, 300),
        retryAfterSeconds,
      });
    }
    const answer = parseAnswer(hook, text, opts.strictAnswer);
    const etag = res.headers.etag;
    if (etagKey !== undefined && etag) this.options.keepEtag(etagKey, etag, text, webhook.etag?.cacheTimeoutSeconds);
    return answer;
  }

  private async readCapped(hook: Hook, res: IncomingMessage, timeoutMs: number): Promise<string> {
    const max = this.opts.maxAnswerBytes ?? MAX_ANSWER_BYTES;
    const tooLarge = () => new HookError('AnswerTooLarge', `${hookName(hook)} answered more than ${max} bytes`);
    if (Number(res.headers['content-length'] ?? 0) > max) {
      res.destroy();
      throw tooLarge();
    }
    const chunks: Buffer[] = [];
    let total = 0;
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        total += chunk.byteLength;
        if (total > max) {
          res.destroy();
          throw tooLarge();
        }
        chunks.push(chunk);
      }
    } catch (err) {
      if (err instanceof HookError) throw err;
      throw failure(hook, err, timeoutMs);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  private async invoke(hook: Hook, body: string, timeoutMs: number, opts: CallOptions): Promise<unknown> {
    // Bound to its owners (docs/reference/hooks.md#who-may-call-a-lambda-hook): another definition's function is not invoked.
    const unbound = this.opts.lambdaBindings && bindingRefusal(this.opts.lambdaBindings, hook.lambda!.functionName, opts.controller);
    if (unbound) throw new HookError('NotAllowed', `${hookName(hook)}: ${unbound}`);
    const strict = opts.strictAnswer;
    // A local endpoint checks no signature; it gets placeholder credentials, as DynamoDB Local does.
    const local = this.opts.lambdaEndpoint
      ? {
          endpoint: this.opts.lambdaEndpoint,
          region: this.opts.region ?? 'local',
          credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
        }
      : {};
    const { InvokeCommand, LambdaClient } = await import('@aws-sdk/client-lambda');
    this.lambda ??= new LambdaClient({ ...(this.opts.region ? { region: this.opts.region } : {}), ...local, maxAttempts: 1 });
    let out;
    try {
      out = await this.lambda.send(
        new InvokeCommand({ FunctionName: hook.lambda!.functionName, Qualifier: hook.lambda!.qualifier, Payload: Buffer.from(body) }),
        {
          abortSignal: AbortSignal.timeout(timeoutMs),
        },
      );
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status)
        // The error's name only: the SDK's message names the map function's role and account (for the log).
        throw new HookError('HTTPError', `${hookName(hook)}: Invoke failed with HTTP ${status} (${(err as Error).name})`, {
          cause: err,
          status,
          detail: (err as Error).message,
        });
      throw failure(hook, err, timeoutMs);
    }
    const payload = out.Payload ?? new Uint8Array();
    if (payload.byteLength > (this.opts.maxAnswerBytes ?? MAX_ANSWER_BYTES))
      throw new HookError('AnswerTooLarge', `${hookName(hook)} answered more than ${this.opts.maxAnswerBytes ?? MAX_ANSWER_BYTES} bytes`);
    const text = Buffer.from(payload).toString('utf8');
    if (out.FunctionError)
      throw new HookError('FunctionError', `${hookName(hook)} failed (${out.FunctionError === 'Unhandled' ? 'Unhandled' : 'Handled'})`, {
        detail: text.slice(0, 300),
      });
    const answer = parseAnswer(hook, text, strict);
    // A Lambda hook has no Retry-After header: it answers {retryAfterSeconds: N} (and no outputs) instead.
    const retryAfterSeconds = lambdaRetryAfter(answer);
    if (retryAfterSeconds !== undefined)
      throw new HookError('Unavailable', `${hookName(hook)} asked to be called again after ${retryAfterSeconds} s`, { retryAfterSeconds });
    return answer;
  }
}

/** A Lambda hook's "call me again after N s": `{retryAfterSeconds: N}` with no outputs, N a non-negative number. */
export function lambdaRetryAfter(answer: unknown): number | undefined {
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer) || 'outputs' in answer) return undefined;
  const n = (answer as { retryAfterSeconds?: unknown }).retryAfterSeconds;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.ceil(n) : undefined;
}

class PlainHttpNotLoopback extends Error {}

/** A resolved address the allow-list refuses: which one and its range are for the log only. */
class AddressNotAllowed extends Error {
  constructor(hostname: string, address: string, range: string) {
    super(`${hostname} resolves to ${address} (${range})`);
    this.name = 'AddressNotAllowed';
  }
}

/**
 * DNS resolution at connect time, refusing a name any of whose addresses the allow-list refuses: the address
 * checked is the one connected to, so a name that resolves again elsewhere (DNS rebinding) gains nothing.
 */
function guardedLookup(allow: WebhookAllowList, resolve: typeof dnsLookup, loopbackOnly: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      for (const a of addresses) {
        const range = addressRefusal(a.address, allow);
        if (range) return callback(new AddressNotAllowed(hostname, a.address, range), '', 0);
      }
      // Plain http (the local runtime's) goes to this machine only, whatever the name.
      if (loopbackOnly && addresses.some((a) => specialRange(a.address) !== 'loopback'))
        return callback(new PlainHttpNotLoopback(HTTPS_ONLY), '', 0);
      if (options.all) return (callback as unknown as (e: null, all: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      callback(null, first.address, first.family);
    });
  };
}

function retriable(err: HookError): boolean {
  return err.status === 429 || (err.status ?? 0) >= 500;
}

function failure(hook: Hook, err: unknown, timeoutMs: number): HookError {
  const name = (err as { name?: string }).name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    const clamped =
      timeoutMs < hookTimeoutSeconds(hook) * 1000
        ? ` (what was left of the pass's time budget; its timeout is ${hookTimeoutSeconds(hook)} s)`
        : '';
    return new HookError('Timeout', `${hookName(hook)} did not answer within ${Math.round(timeoutMs / 100) / 10} s${clamped}`, {
      cause: err,
    });
  }
  if (err instanceof PlainHttpNotLoopback) return new HookError('Refused', `${hookName(hook)}: ${err.message}`, { cause: err });
  if (err instanceof AddressNotAllowed)
    return new HookError(
      'NotAllowed',
      `${hookName(hook)}: the host's address is loopback, private, link-local, instance metadata or reserved, which webhooks reach only when the deployment's webhook allow-list (webhookAllow) lists it`,
      { cause: err, detail: err.message },
    );
  // The code alone (ECONNREFUSED, CERT_HAS_EXPIRED): a message may name a certificate's names, and reaches the status.
  const code = (err as { code?: string }).code;
  return new HookError('Unreachable', `${hookName(hook)} could not be reached: ${code ?? 'the connection failed'}`, {
    cause: err,
    detail: (err as Error).message,
  });
}

function parseAnswer(hook: Hook, text: string, strict: boolean | undefined): unknown {
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch (err) {
    // The parser's message quotes the answer: it goes to the log only.
    throw new HookError('MalformedAnswer', `${hookName(hook)} answered something that is not JSON`, {
      detail: `${(err as Error).message}: ${text.slice(0, 100)}`,
    });
  }
  const twice = strict ? duplicateKey(text) : undefined;
  // The field's path is the hook's text: the log only.
  if (twice !== undefined)
    throw new HookError('MalformedAnswer', `${hookName(hook)} answered a field twice in one object (strict response parsing)`, {
      detail: twice.slice(0, 300),
    });
  return answer;
}
