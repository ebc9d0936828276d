// npm run invoke -- <function> [event-file]: runs one function's Lambda bundle, built as the stack builds it,
// in a process of its own, with an event from a file (events/<function>.json by default) and a Lambda-like
// context; no Docker. The result goes to stdout as JSON, logs to stderr; a thrown error prints Lambda's error
// shape and exits 1, a usage or setup problem exits 2.
//
// The handler's environment: variables already set win; what is missing comes from the local runtime
// (`npm start`) when one is running, from its runtime.json. Sync requests the function sends are captured and
// printed, not sent, unless OUTRIGGER_QUEUE_URL_PREFIX names real queues: in AWS they would go to the
// controllers' queues (each cluster's), which exist only in a deployment. Each target's captured requests are
// also saved as an SQS event, to invoke that target with next.
//
// The same file is the child process (`__child`), which imports nothing of the project but the Lambda context,
// so that the function's code comes from its bundle only.
import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { projectRoot } from '../local/paths.ts';
import { invokeAsLambda, type Handler } from '../runtime/lambda-context.ts';
import { DEFAULT_TABLE, RUNTIME_CLUSTER, runningRuntime, type RuntimeFile } from './runtime-file.ts';

const usage = `usage: npm run invoke -- <function> [event-file] [options]

Bundles <function> as the stack does, imports the bundle in a new Node process and calls its handler with the
event (default: events/<function>.json; - reads stdin) and a Lambda-like context. Result on stdout (JSON),
logs on stderr; exit 1 when the handler throws, 2 on a usage or setup error.

options:
  --state-dir DIR   where a running local runtime left runtime.json (default: .outrigger/)
  --no-runtime      ignore the local runtime; take everything from the environment
  --now             stamp the event's SQS records as sent now (the map function skips requests sent before its
                    last pass)

environment (set variables win over the local runtime's):
  OUTRIGGER_CLUSTERS, OUTRIGGER_TABLE     required without a local runtime (OUTRIGGER_CLUSTERS_FILE, a file
                                          holding the cluster configuration, may stand in for OUTRIGGER_CLUSTERS)
  OUTRIGGER_DYNAMODB_ENDPOINT             DynamoDB Local (unset: DynamoDB in AWS_REGION)
  OUTRIGGER_DEAD_LETTER_FILE / _QUEUE_URL default: the runtime's dead-letter file, or .cache/invoke/<function>/
  OUTRIGGER_QUEUE_URL_PREFIX              unset: sync requests are printed and saved, not sent
  OUTRIGGER_LAMBDA_ENDPOINT               where the map function calls Lambda hooks (unset: AWS Lambda)
`;

/** Sent by the child: the handler's result, or the error it threw (in Lambda's error shape). */
type ChildReply = { ok: true; result?: unknown } | { ok: false; phase: 'init' | 'invoke'; error: LambdaError };

interface LambdaError {
  errorType: string;
  errorMessage: string;
  trace: string[];
}

class UsageError extends Error {}

function lambdaError(err: unknown): LambdaError {
  if (err instanceof Error) return { errorType: err.name, errorMessage: err.message, trace: (err.stack ?? '').split('\n') };
  return { errorType: 'Error', errorMessage: String(err), trace: [] };
}

/** The child: import the bundle (Lambda's init), call the handler once, report, exit. */
async function child(bundle: string, name: string, timeoutSeconds: number, eventFile: string): Promise<void> {
  const reply = (message: ChildReply, code: number) => {
    // Exits without waiting for the handler's sockets and timers: Lambda freezes the process at this point.
    process.send!(message, () => process.exit(code));
  };
  let handler: Handler;
  try {
    const module = (await import(pathToFileURL(bundle).href)) as { handler?: unknown };
    if (typeof module.handler !== 'function') throw new Error(`${bundle} exports no function named handler`);
    handler = module.handler as Handler;
  } catch (err) {
    reply({ ok: false, phase: 'init', error: lambdaError(err) }, 1);
    return;
  }
  const event: unknown = JSON.parse(await readFile(eventFile, 'utf8'));
  try {
    reply({ ok: true, result: await invokeAsLambda({ name, timeoutSeconds }, handler, event) }, 0);
  } catch (err) {
    reply({ ok: false, phase: 'invoke', error: lambdaError(err) }, 1);
  }
}

const log = (message: string) => process.stderr.write(`[invoke] ${message}\n`);

/** A path as the user would type it: relative when under the working directory. */
function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

// ---- the handler's environment ---------------------------------------------------------------------------

/** What the stack's queue names start with (its name, `Outrigger`, and a dash); the sample events' queues have it too. */
const CAPTURE_QUEUE_PREFIX = 'Outrigger-';

/**
 * The cluster configuration the runtime gives its handlers. On its own kube-apiserver they act as the
 * `outrigger` identity, whose kubeconfig the apiserver wrote next to the admin one that runtime.json names
 * (with ready.json listing both); on a real cluster, as runtime.json's kubeconfig.
 */
async function runtimeClusters(info: RuntimeFile): Promise<string> {
  let access = info.kubeconfig;
  let migrator: string | undefined;
  try {
    const ready = JSON.parse(await readFile(join(dirname(info.kubeconfig), 'ready.json'), 'utf8')) as {
      server?: string;
      kubeconfigs?: Record<string, string>;
    };
    if (ready.server === info.server && ready.kubeconfigs?.outrigger) {
      access = ready.kubeconfigs.outrigger;
      migrator = ready.kubeconfigs.migrator;
    }
  } catch {
    // A real cluster's kubeconfig: no ready.json beside it.
  }
  return JSON.stringify([
    {
      id: RUNTIME_CLUSTER,
      access: { kind: 'kubeconfig', path: access },
      storage: { enabled: true, migrations: 'outrigger', ...(migrator ? { migratorAccess: { kind: 'kubeconfig', path: migrator } } : {}) },
    },
  ]);
}

interface Setup {
  env: NodeJS.ProcessEnv;
  /** The dead-letter file the function writes to, when it writes to one. */
  deadLetterFile: string | undefined;
  capture: SyncCapture | undefined;
}

async function environmentFor(
  spec: { name: string },
  syncTargets: string[],
  opts: { stateDir: string; useRuntime: boolean; dir: string },
): Promise<Setup> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  const fromRuntime: string[] = [];
  const runtime = opts.useRuntime
    ? await runningRuntime(opts.stateDir, (message) => log(message.replace(opts.stateDir, shown(opts.stateDir))))
    : undefined;
  if (runtime) {
    const supplied: Record<string, () => Promise<string> | string> = {
      OUTRIGGER_CLUSTERS: () => runtimeClusters(runtime.info),
      OUTRIGGER_TABLE: () => DEFAULT_TABLE,
      OUTRIGGER_DYNAMODB_ENDPOINT: () => runtime.info.dynamodb,
    };
    for (const [name, value] of Object.entries(supplied)) {
      // A configuration file the user names is theirs too: the runtime's clusters beside it would be refused.
      if (env[name] || (name === 'OUTRIGGER_CLUSTERS' && env.OUTRIGGER_CLUSTERS_FILE)) continue;
      env[name] = await value();
      fromRuntime.push(name);
    }
  }
  if (!env.OUTRIGGER_DEAD_LETTER_QUEUE_URL && !env.OUTRIGGER_DEAD_LETTER_FILE) {
    // The runtime's own dead-letter file (runtime/local.ts), so its letters are all in one place.
    env.OUTRIGGER_DEAD_LETTER_FILE = runtime ? join(dirname(runtime.file), 'dead-letter.jsonl') : join(opts.dir, 'dead-letter.jsonl');
  }

  const missing = [
    ...(env.OUTRIGGER_CLUSTERS || env.OUTRIGGER_CLUSTERS_FILE ? [] : ['OUTRIGGER_CLUSTERS (or OUTRIGGER_CLUSTERS_FILE)']),
    ...(env.OUTRIGGER_TABLE ? [] : ['OUTRIGGER_TABLE']),
  ];
  if (missing.length) {
    throw new UsageError(
      `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not set, and no local runtime is running ` +
        `(${opts.useRuntime ? `no live ${shown(join(opts.stateDir, 'runtime.json'))}` : '--no-runtime'}). ` +
        'Start one with `npm start` in another terminal, or set them (and OUTRIGGER_DYNAMODB_ENDPOINT for DynamoDB Local); see `npm run invoke -- --help`.',
    );
  }
  let clusters: Array<{ id: string; access: { kind: string; path?: string | undefined } }>;
  try {
    const { clustersFromEnv } = await import('../shared/clusters.ts');
    clusters = clustersFromEnv(env);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }

  let capture: SyncCapture | undefined;
  if (!env.OUTRIGGER_QUEUE_URL_PREFIX) {
    capture = await SyncCapture.start(
      syncTargets,
      clusters.map((c) => c.id),
    );
    env.OUTRIGGER_QUEUE_URL_PREFIX = capture.prefix;
    // The SQS client would reach the capture anyway (it sends to the queue URL's host) but warns on every send
    // that the URL is not AWS's; naming the endpoint says it is meant. Not when SQS is also the dead-letter
    // queue: those letters must reach it.
    if (!env.OUTRIGGER_DEAD_LETTER_QUEUE_URL && !env.AWS_ENDPOINT_URL_SQS) env.AWS_ENDPOINT_URL_SQS = capture.endpoint;
  }
  // A Lambda bundle reads AWS credentials from its environment only (scripts/bundle.ts ALIASES), as Lambda and
  // `sam local invoke` hand them over. With everything local, the SDK still wants a region and credentials to
  // sign with, which neither DynamoDB Local nor the capture checks; otherwise (an EKS cluster, AWS DynamoDB) they
  // are the user's, resolved here by the SDK's whole chain (profile, SSO, ...) and passed on as variables.
  if (env.OUTRIGGER_DYNAMODB_ENDPOINT && clusters.every((c) => c.access.kind !== 'eks')) {
    env.AWS_REGION ??= 'us-east-1';
    if (!env.AWS_ACCESS_KEY_ID) Object.assign(env, { AWS_ACCESS_KEY_ID: 'local', AWS_SECRET_ACCESS_KEY: 'local' });
  } else if (!env.AWS_ACCESS_KEY_ID) {
    const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
    try {
      const credentials = await defaultProvider({ profile: env.AWS_PROFILE })();
      Object.assign(env, {
        AWS_ACCESS_KEY_ID: credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
        ...(credentials.sessionToken ? { AWS_SESSION_TOKEN: credentials.sessionToken } : {}),
      });
      log('AWS credentials resolved here (the bundle reads them from its environment, as in Lambda)');
    } catch (err) {
      log(`no AWS credentials found (${(err as Error).message}): the function's AWS calls will fail`);
    }
  }
  // What Lambda sets for every function (the logger and the SDK read some of them).
  env.AWS_LAMBDA_FUNCTION_NAME ??= `outrigger-${spec.name}`;
  env.AWS_LAMBDA_FUNCTION_VERSION ??= '$LATEST';
  env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ??= '512';
  env.AWS_LAMBDA_LOG_GROUP_NAME ??= `/aws/lambda/outrigger-${spec.name}`;
  env.AWS_LAMBDA_LOG_STREAM_NAME ??= 'local';

  if (runtime)
    log(
      `local runtime (pid ${runtime.info.pid}, ${runtime.info.server}) supplies ${fromRuntime.join(', ') || 'nothing: every variable is set'}`,
    );
  log(
    `cluster(s) ${clusters.map((c) => `${c.id} (${c.access.kind}${c.access.path ? ` ${c.access.path}` : ''})`).join(', ')}; table ${env.OUTRIGGER_TABLE}${env.OUTRIGGER_DYNAMODB_ENDPOINT ? ` at ${env.OUTRIGGER_DYNAMODB_ENDPOINT}` : ' (DynamoDB)'}`,
  );
  if (capture) log('OUTRIGGER_QUEUE_URL_PREFIX is unset: sync requests are captured and printed, not sent');
  const deadLetterFile = env.OUTRIGGER_DEAD_LETTER_QUEUE_URL ? undefined : env.OUTRIGGER_DEAD_LETTER_FILE;
  return { env, deadLetterFile, capture };
}

// ---- sync requests, captured -------------------------------------------------------------------------------

interface Captured {
  target: string;
  /** The queue it was sent to (its cluster's queue for the target). */
  queue: string;
  body: string;
  groupId: string | undefined;
  deduplicationId: string | undefined;
}

/**
 * An SQS endpoint on loopback that accepts SendMessage(Batch) and keeps the messages. The function's SQS client
 * sends to it because it sends to the host of the queue URL it is given (the SDK's default for SQS).
 */
class SyncCapture {
  /** OUTRIGGER_QUEUE_URL_PREFIX: the capture's queues are named as a stack named `Outrigger` names its own. */
  prefix = '';
  endpoint = '';
  /** Queue URL -> the sync target and queue name it stands for (each cluster's queue for each target). */
  private queues = new Map<string, { target: string; queue: string }>();
  readonly messages: Captured[] = [];
  private readonly server: Server = createServer((req, res) => void this.handle(req, res));

  static async start(targets: string[], clusters: string[]): Promise<SyncCapture> {
    // Loaded here, not at the top: the child process this file also runs as imports nothing of the project.
    const { queueName } = await import('../shared/lambda/queues.ts');
    const capture = new SyncCapture();
    await new Promise<void>((ok) => capture.server.listen(0, '127.0.0.1', ok));
    const { port } = capture.server.address() as AddressInfo;
    capture.endpoint = `http://127.0.0.1:${port}`;
    capture.prefix = `${capture.endpoint}/000000000000/${CAPTURE_QUEUE_PREFIX}`;
    for (const t of targets)
      for (const c of clusters)
        capture.queues.set(`${capture.prefix}${queueName(c, t)}`, { target: t, queue: `${CAPTURE_QUEUE_PREFIX}${queueName(c, t)}` });
    return capture;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const action = String(req.headers['x-amz-target'] ?? '').replace(/^AmazonSQS\./, '');
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(body));
    };
    let input: { QueueUrl?: string; Entries?: SqsEntry[] } & SqsEntry;
    try {
      input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof input;
    } catch {
      reply(400, { __type: 'com.amazonaws.sqs#InvalidParameterValue', message: 'not JSON' });
      return;
    }
    const queue = this.queues.get(input.QueueUrl ?? '');
    if (!queue || (action !== 'SendMessage' && action !== 'SendMessageBatch')) {
      reply(400, {
        __type: 'com.amazonaws.sqs#InvalidAction',
        message: `the invoke capture takes SendMessage(Batch) to ${[...this.queues.keys()].join(', ')}; got ${action} to ${input.QueueUrl}`,
      });
      return;
    }
    const keep = (e: SqsEntry) => {
      this.messages.push({ ...queue, body: e.MessageBody, groupId: e.MessageGroupId, deduplicationId: e.MessageDeduplicationId });
      // The SDK checks the body's MD5 against the one returned.
      return {
        MessageId: randomUUID(),
        MD5OfMessageBody: md5(e.MessageBody),
        SequenceNumber: String(Date.now() * 1000 + this.messages.length),
      };
    };
    if (action === 'SendMessage') reply(200, keep(input));
    else reply(200, { Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, ...keep(e) })), Failed: [] });
  }

  stop(): Promise<void> {
    return new Promise((ok) => this.server.close(() => ok()));
  }
}

interface SqsEntry {
  Id?: string;
  MessageBody: string;
  MessageGroupId?: string;
  MessageDeduplicationId?: string;
}

const md5 = (s: string) => createHash('md5').update(s).digest('hex');

/** An SQS event of messages as Lambda's event source mappings deliver them (each from its own cluster's queue). */
function sqsEvent(messages: Captured[]): { Records: unknown[] } {
  const now = Date.now();
  return {
    Records: messages.map((m, i) => {
      const messageId = randomUUID();
      return {
        messageId,
        receiptHandle: `local-${messageId}`,
        body: m.body,
        attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: String(now),
          SequenceNumber: String(now * 1000 + i),
          MessageGroupId: m.groupId ?? messageId,
          SenderId: 'outrigger-invoke',
          MessageDeduplicationId: m.deduplicationId ?? md5(m.body),
          ApproximateFirstReceiveTimestamp: String(now),
        },
        messageAttributes: {},
        md5OfBody: md5(m.body),
        eventSource: 'aws:sqs',
        eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${m.queue}`,
        awsRegion: 'us-east-1',
      };
    }),
  };
}

// ---- the parent ----------------------------------------------------------------------------------------------

async function readEvent(path: string): Promise<unknown> {
  let text: string;
  if (path === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read the event file ${path}: ${(err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`the event in ${path === '-' ? 'stdin' : path} is not JSON: ${(err as Error).message}`);
  }
}

/** Marks SQS records as just sent, as a fresh delivery would be. */
function stampNow(event: unknown): unknown {
  const records = (event as { Records?: Array<{ eventSource?: string; attributes?: Record<string, string> }> }).Records;
  if (!Array.isArray(records)) return event;
  const now = String(Date.now());
  for (const r of records) {
    if (r.eventSource === 'aws:sqs' && r.attributes)
      Object.assign(r.attributes, { SentTimestamp: now, ApproximateFirstReceiveTimestamp: now });
  }
  return event;
}

async function fileSize(path: string | undefined): Promise<number> {
  if (!path) return 0;
  return stat(path).then(
    (s) => s.size,
    () => 0,
  );
}

function runChild(
  bundle: string,
  spec: { name: string; timeoutSeconds: number },
  eventFile: string,
  env: NodeJS.ProcessEnv,
): Promise<{ reply: ChildReply | undefined; code: number | null; signal: NodeJS.Signals | null }> {
  // As in Lambda, where the stack sets NODE_OPTIONS=--enable-source-maps: stack traces point into the sources.
  // The function's stdout (its logs) joins our stderr, so that our stdout is the result alone.
  const proc = spawn(
    process.execPath,
    ['--enable-source-maps', fileURLToPath(import.meta.url), '__child', bundle, spec.name, String(spec.timeoutSeconds), eventFile],
    {
      cwd: dirname(bundle),
      env,
      stdio: ['ignore', 2, 2, 'ipc'],
    },
  );
  let reply: ChildReply | undefined;
  proc.on('message', (m) => (reply = m as ChildReply));
  return new Promise((ok, fail) => {
    proc.on('error', fail);
    proc.on('exit', (code, signal) => ok({ reply, code, signal }));
  });
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      'state-dir': { type: 'string', default: join(projectRoot, '.outrigger') },
      'no-runtime': { type: 'boolean', default: false },
      now: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  const { functions } = await import('../functions/index.ts');
  const samples = (await readdir(join(projectRoot, 'events')).catch(() => [])).filter((f) => f.endsWith('.json')).sort();
  const listing = `\nfunctions: ${functions.map((f) => f.name).join(', ')}\nsample events: ${samples.map((f) => `events/${f}`).join(', ')}\n`;
  if (values.help || positionals.length === 0) {
    process.stderr.write(usage + listing);
    return values.help ? 0 : 2;
  }
  if (positionals.length > 2) throw new UsageError(`too many arguments: ${positionals.slice(2).join(' ')}\n${usage}`);
  const [name, eventPath = join(projectRoot, 'events', `${positionals[0]}.json`)] = positionals as [string, string?];
  const spec = functions.find((f) => f.name === name);
  if (!spec) throw new UsageError(`no function named ${JSON.stringify(name)}${listing}`);

  let event = await readEvent(eventPath);
  if (values.now) event = stampNow(event);
  const syncTargets = functions.flatMap((f) => (f.sync ? [f.sync.target] : []));
  const { bundleFunction, invokeDir } = await import('./bundle.ts');
  const dir = invokeDir(spec.name);
  const setup = await environmentFor(spec, syncTargets, { stateDir: resolve(values['state-dir']), useRuntime: !values['no-runtime'], dir });

  try {
    // Last run's would-be sends must not pass for this run's.
    for (const f of await readdir(dir).catch(() => [])) if (/^sent-.*\.json$/.test(f)) await rm(join(dir, f));
    const started = Date.now();
    const bundle = await bundleFunction(spec, dir);
    log(`bundled ${spec.entry} (${(bundle.bytes / 1024 / 1024).toFixed(2)} MB) in ${Date.now() - started} ms: ${shown(bundle.file)}`);
    const eventFile = join(dir, 'event.json');
    await writeFile(eventFile, `${JSON.stringify(event, null, 2)}\n`);
    if (setup.deadLetterFile) await mkdir(dirname(setup.deadLetterFile), { recursive: true });
    const deadLettersBefore = await fileSize(setup.deadLetterFile);

    log(`invoking ${spec.name} with ${eventPath === '-' ? 'stdin' : shown(eventPath)} (timeout ${spec.timeoutSeconds} s)`);
    const invoked = Date.now();
    const { reply, code, signal } = await runChild(bundle.file, spec, eventFile, setup.env);
    log(`${spec.name} finished in ${Date.now() - invoked} ms`);

    if (setup.deadLetterFile && (await fileSize(setup.deadLetterFile)) > deadLettersBefore) {
      const added = (await readFile(setup.deadLetterFile)).subarray(deadLettersBefore).toString('utf8').split('\n').filter(Boolean);
      log(`${added.length} message(s) dead-lettered to ${shown(setup.deadLetterFile)}:`);
      for (const line of added) log(`  ${(JSON.parse(line) as { reason: string }).reason}`);
    }
    if (setup.capture) {
      const byTarget = Map.groupBy(setup.capture.messages, (m) => m.target);
      for (const [target, messages] of byTarget) {
        const file = join(dir, `sent-${target}.json`);
        await writeFile(file, `${JSON.stringify(sqsEvent(messages), null, 2)}\n`);
        log(`would send ${messages.length} sync request(s) to ${target}; to run them: npm run invoke -- ${target} ${shown(file)}`);
        for (const m of messages) log(`  ${m.body}`);
      }
      if (!byTarget.size && (spec.events || spec.sync)) log('no sync requests sent');
    }

    if (!reply) {
      log(`the function's process ${signal ? `was killed by ${signal}` : `exited with code ${code}`} before returning`);
      return 1;
    }
    if (!reply.ok) {
      log(`${spec.name} ${reply.phase === 'init' ? 'failed to load' : 'threw'}: ${reply.error.errorType}: ${reply.error.errorMessage}`);
      process.stdout.write(`${JSON.stringify(reply.error, null, 2)}\n`);
      return 1;
    }
    process.stdout.write(`${JSON.stringify(reply.result ?? null, null, 2)}\n`);
    return 0;
  } finally {
    await setup.capture?.stop();
  }
}

const [mode, ...args] = process.argv.slice(2);
if (mode === '__child') {
  const [bundle, name, timeout, eventFile] = args as [string, string, string, string];
  await child(bundle, name, Number(timeout), eventFile);
} else {
  const code = await main(process.argv.slice(2)).catch((err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`invoke: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`invoke: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 2;
  });
  process.exitCode = code;
}
