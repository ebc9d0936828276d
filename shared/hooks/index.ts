// Calling a user's hook: an HTTP POST of JSON (webhook) or an AWS Lambda Invoke, each with a timeout and
// bounded retries for what a retry can fix (no answer, 429, 5xx, a throttled or failed invoke). Every failure
// is a HookError whose message names the hook and what went wrong; the caller decides what it means.
import type { LambdaClient } from '@aws-sdk/client-lambda';
import pRetry, { AbortError } from 'p-retry';
import type { Hook } from '../map/api.ts';

export type HookFailure = 'Timeout' | 'Unreachable' | 'HTTPError' | 'MalformedAnswer' | 'FunctionError';

export class HookError extends Error {
  readonly reason: HookFailure;
  /** The HTTP status of an HTTPError. */
  readonly status: number | undefined;
  constructor(reason: HookFailure, message: string, opts: { cause?: unknown; status?: number } = {}) {
    super(message, { cause: opts.cause });
    this.name = 'HookError';
    this.reason = reason;
    this.status = opts.status;
  }
}

export interface HookCaller {
  call(hook: Hook, request: unknown): Promise<unknown>;
}

export interface HookCallerOptions {
  /** Lambda's endpoint; the local runtime serves the Invoke API for hooks written as Lambda handlers. */
  lambdaEndpoint?: string | undefined;
  region?: string | undefined;
  /** First retry delay; doubles per retry. */
  minRetryDelayMs?: number;
}

export function hookName(hook: Hook): string {
  return hook.webhook ? `webhook ${hook.webhook.url}` : `lambda ${hook.lambda?.functionName ?? '?'}`;
}

export class Hooks implements HookCaller {
  readonly stats = { calls: 0, attempts: 0 };
  // Made on first use, as the SQS client is (shared/lambda/sqs.ts): a controller whose hooks are webhooks never
  // needs it, and loading the SDK's Lambda client at import costs every cold start about 80 ms.
  private lambda: LambdaClient | undefined;
  private readonly opts: HookCallerOptions;

  constructor(opts: HookCallerOptions = {}) {
    this.opts = opts;
  }

  async call(hook: Hook, request: unknown): Promise<unknown> {
    this.stats.calls += 1;
    const body = JSON.stringify(request);
    return pRetry(
      async () => {
        this.stats.attempts += 1;
        try {
          return hook.webhook ? await this.post(hook, hook.webhook.url, body) : await this.invoke(hook, body);
        } catch (err) {
          if (err instanceof HookError && (err.reason === 'MalformedAnswer' || err.reason === 'FunctionError' || (err.reason === 'HTTPError' && !retriable(err)))) throw new AbortError(err);
          throw err;
        }
      },
      { retries: hook.retries, minTimeout: this.opts.minRetryDelayMs ?? 200, factor: 2, randomize: true },
    );
  }

  private async post(hook: Hook, url: string, body: string): Promise<unknown> {
    let res;
    try {
      res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(hook.timeoutSeconds * 1000) });
    } catch (err) {
      throw failure(hook, err);
    }
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw failure(hook, err);
    }
    if (res.status < 200 || res.status > 299) throw new HookError('HTTPError', `${hookName(hook)} answered HTTP ${res.status}: ${text.slice(0, 200)}`, { status: res.status });
    return parseAnswer(hook, text);
  }

  private async invoke(hook: Hook, body: string): Promise<unknown> {
    // A local endpoint checks no signature; it gets placeholder credentials, as DynamoDB Local does.
    const local = this.opts.lambdaEndpoint ? { endpoint: this.opts.lambdaEndpoint, region: this.opts.region ?? 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } } : {};
    const { InvokeCommand, LambdaClient } = await import('@aws-sdk/client-lambda');
    this.lambda ??= new LambdaClient({ ...(this.opts.region ? { region: this.opts.region } : {}), ...local, maxAttempts: 1 });
    let out;
    try {
      out = await this.lambda.send(new InvokeCommand({ FunctionName: hook.lambda!.functionName, Qualifier: hook.lambda!.qualifier, Payload: Buffer.from(body) }), {
        abortSignal: AbortSignal.timeout(hook.timeoutSeconds * 1000),
      });
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status) throw new HookError('HTTPError', `${hookName(hook)}: Invoke failed with HTTP ${status}: ${(err as Error).message}`, { cause: err, status });
      throw failure(hook, err);
    }
    const text = Buffer.from(out.Payload ?? new Uint8Array()).toString('utf8');
    if (out.FunctionError) throw new HookError('FunctionError', `${hookName(hook)} failed (${out.FunctionError}): ${text.slice(0, 300)}`);
    return parseAnswer(hook, text);
  }
}

function retriable(err: HookError): boolean {
  return err.status === 429 || (err.status ?? 0) >= 500;
}

function failure(hook: Hook, err: unknown): HookError {
  const name = (err as { name?: string }).name;
  if (name === 'TimeoutError' || name === 'AbortError') return new HookError('Timeout', `${hookName(hook)} did not answer within ${hook.timeoutSeconds} s`, { cause: err });
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return new HookError('Unreachable', `${hookName(hook)} could not be reached: ${cause?.code ?? cause?.message ?? (err as Error).message}`, { cause: err });
}

function parseAnswer(hook: Hook, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HookError('MalformedAnswer', `${hookName(hook)} answered something that is not JSON (${(err as Error).message}): ${text.slice(0, 100)}`);
  }
}
