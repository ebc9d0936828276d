// The local runtime's functions in their Lambda containers (RuntimeOptions.lambdaContainers): each function's bundle,
// built as the stack builds it (scripts/bundle.ts), in a container of the Lambda Node.js base image
// (local/base-images.ts) on the host's network, invoked through its runtime interface emulator's
// `POST /2015-03-31/functions/function/invocations` as Lambda's own invoke reaches the runtime API. One container per
// function, each emulator and runtime API on ports of its own (the emulator's
// `--runtime-interface-emulator-address` and `--runtime-api-address`), its environment only what the stack would
// set (docs/getting-started/local.md#functions-in-their-lambda-containers).
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FunctionSpec } from '../functions/spec.ts';
import { ensureBaseImages, LAMBDA_NODEJS_IMAGE } from '../local/base-images.ts';
import { engineEnv, startContainerEngine, type ContainerEngine } from '../local/container-engine.ts';
import { freePort } from '../local/process.ts';
import { bundleFunction } from '../scripts/bundle.ts';

/** Where the base image has the emulator (local/base-images.ts). */
const RIE = '/usr/local/bin/aws-lambda-rie';
const INVOKE_PATH = '/2015-03-31/functions/function/invocations';

export interface LambdaContainers {
  /** Invokes a function in its container and hands back its answer; rejects with its error when it throws. */
  invoke(name: string, event: unknown): Promise<unknown>;
  /** Each function's container name. */
  names: ReadonlyMap<string, string>;
  stop(): Promise<void>;
}

/** An error a function answered with, as Lambda's invoke returns it. */
export class FunctionError extends Error {
  readonly errorType: string;
  constructor(fn: string, errorType: string, errorMessage: string) {
    super(`${fn} failed in its Lambda container: ${errorType}: ${errorMessage}`);
    this.errorType = errorType;
  }
}

function post(port: number, body: string, timeoutMs: number): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: INVOKE_PATH, method: 'POST', headers: { 'content-type': 'application/json' }, timeout: timeoutMs },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer on 127.0.0.1:${port} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

async function listening(port: number, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${deadlineMs} ms`);
    await sleep(100);
  }
}

/** The emulator's own lines about each invocation, which say nothing the function's log does not. */
const EMULATOR_LINE = /^(START|END|REPORT) RequestId: /;

/** Passes what a container's function writes to the runtime's log, as `<function>: <line>`. */
function follow(container: string, fn: string, log: (message: string) => void): ChildProcess {
  const child = spawn('docker', ['logs', '--follow', container], { env: engineEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [child.stdout, child.stderr])
    createInterface({ input: stream }).on('line', (line) => {
      if (line.trim() && !EMULATOR_LINE.test(line)) log(`${fn}: ${line}`);
    });
  return child;
}

/**
 * Starts a container per function of `specs`, with `env` (the variables the stack would set, pointed at the local
 * runtime) and the function's own, in the project's container engine (local/container-engine.ts).
 */
export async function startLambdaContainers(opts: {
  specs: readonly FunctionSpec[];
  env: Readonly<Record<string, string>>;
  /** Where the bundles are built (one directory per function, mounted read-only as /var/task). */
  dir: string;
  /** A name that keeps this runtime's containers apart from another's. */
  tag: string;
  log?: (message: string) => void;
}): Promise<LambdaContainers> {
  const log = opts.log ?? (() => {});
  const engine: ContainerEngine = await startContainerEngine({ log });
  const started: string[] = [];
  const followers: ChildProcess[] = [];
  const ports = new Map<string, number>();
  const names = new Map<string, string>();
  const timeouts = new Map<string, number>();
  // The emulator serves one invocation at a time, as a Lambda execution environment does.
  const queues = new Map<string, Promise<unknown>>();
  try {
    await ensureBaseImages(log);
    for (const spec of opts.specs) {
      const code = join(opts.dir, spec.name);
      await bundleFunction(spec, code);
      const [port, api] = [await freePort(), await freePort()];
      const name = `outrigger-${opts.tag}-${spec.name}`;
      const env = {
        ...opts.env,
        AWS_LAMBDA_FUNCTION_NAME: `outrigger-${spec.name}`,
        AWS_LAMBDA_FUNCTION_HANDLER: 'index.handler',
        AWS_LAMBDA_FUNCTION_TIMEOUT: String(spec.timeoutSeconds),
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
        AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/outrigger-${spec.name}`,
        NODE_OPTIONS: '--enable-source-maps',
      };
      await engine.docker(
        'run',
        '--detach',
        '--name',
        name,
        '--network',
        'host',
        '--read-only',
        '--tmpfs',
        '/tmp',
        '--memory',
        '512m',
        '--volume',
        `${code}:/var/task:ro`,
        ...Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
        '--entrypoint',
        RIE,
        LAMBDA_NODEJS_IMAGE,
        '--log-level',
        'error',
        '--runtime-interface-emulator-address',
        `127.0.0.1:${port}`,
        '--runtime-api-address',
        `127.0.0.1:${api}`,
      );
      started.push(name);
      followers.push(follow(name, spec.name, log));
      ports.set(spec.name, port);
      names.set(spec.name, name);
      timeouts.set(spec.name, spec.timeoutSeconds);
    }
    await Promise.all([...ports.values()].map((p) => listening(p, 30_000)));
    log(`${started.length} function(s) in their Lambda containers: ${started.join(', ')}`);
  } catch (err) {
    for (const f of followers) f.kill();
    await Promise.allSettled(started.map((n) => engine.docker('rm', '--force', n)));
    await engine.release();
    throw err;
  }

  const invokeNow = async (fn: string, event: unknown): Promise<unknown> => {
    const port = ports.get(fn);
    if (port === undefined) throw new Error(`${fn} has no Lambda container here`);
    // The emulator ends an invocation at the function's timeout; a little more for its answer to arrive.
    const res = await post(port, JSON.stringify(event ?? {}), timeouts.get(fn)! * 1000 + 10_000);
    let answer: unknown;
    try {
      answer = res.body ? JSON.parse(res.body) : null;
    } catch {
      answer = res.body;
    }
    const error = answer as { errorType?: unknown; errorMessage?: unknown } | null;
    if (res.status !== 200 || res.headers['x-amz-function-error'] || (error && typeof error === 'object' && 'errorType' in error))
      throw new FunctionError(fn, String(error?.errorType ?? `HTTP ${res.status}`), String(error?.errorMessage ?? res.body));
    return answer;
  };

  return {
    names,
    invoke: (fn, event) => {
      const next = (queues.get(fn) ?? Promise.resolve()).catch(() => undefined).then(() => invokeNow(fn, event));
      queues.set(fn, next);
      return next;
    },
    stop: async () => {
      for (const f of followers) f.kill();
      await Promise.allSettled(started.map((n) => engine.docker('rm', '--force', n)));
      await engine.release();
    },
  };
}
