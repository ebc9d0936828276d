// `sam local invoke` of every function of the synthesized template, in Lambda's own Node.js runtime (the Lambda base
// image local/base-images.ts builds, SAM's runtime interface emulator and its image over the clusters layer), as
// docs/contributing/invoking-locally.md#with-docker-sam shows it: the x86_64 synth, env.json, `--docker-network
// host`, `--skip-pull-image`, each function's sample event. Each answer is compared with what `npm run invoke`
// answers for the same event, on the same cluster and an empty table of its own. The functions reach the test bed as
// a deployed function reaches a cluster outside EKS: `secret` access, the token read from a Secrets Manager endpoint
// on loopback (local/secrets-endpoint.ts).
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { functions } from '../../functions/index.ts';
import { outriggerApp } from '../../infra/app.ts';
import { pascal } from '../../infra/names.ts';
import { ensureBaseImages } from '../../local/base-images.ts';
import { localSqsClient } from '../../local/elasticmq.ts';
import { projectRoot } from '../../local/paths.ts';
import { capture } from '../../local/process.ts';
import { samCli } from '../../local/sam.ts';
import { startSecretsEndpoint, type SecretsEndpoint } from '../../local/secrets-endpoint.ts';
import { samEnvironment } from '../../scripts/sam-env.ts';
import { EVENTS_QUEUE, INGEST_DEAD_LETTER_QUEUE, QueueUrls } from '../../shared/lambda/queues.ts';
import { ensureTable, openState } from '../../shared/state/index.ts';
import { containerEngineHost, testbed, uniqueName } from '../testbed/index.ts';

/** Each function's sample event: events/<function>.json, or the variant that stands for it. */
const EVENT: Record<string, string> = { ingest: 'ingest-envelopes.json' };
const eventOf = (name: string) => `events/${EVENT[name] ?? `${name}.json`}`;

const SECRET = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:outrigger-sam-local-AbCdEf';
const MIGRATOR_SECRET = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:outrigger-sam-local-migrator-AbCdEf';
/** How many functions are invoked at once, both ways: SAM's start and each container's are mostly waiting. */
const AT_ONCE = 3;

let dir: string;
let template: string;
let secrets: SecretsEndpoint;
let prefix: string;
let clustersFile: string;
const tables = { sam: uniqueName('sam'), invoke: uniqueName('invoke') };
const runs = new Map<string, Promise<[Answer, Answer]>>();
const aws = { AWS_ACCESS_KEY_ID: 'local', AWS_SECRET_ACCESS_KEY: 'local', AWS_REGION: 'us-east-1', AWS_DEFAULT_REGION: 'us-east-1' };

// 10 minutes: a cold machine builds the base image (minutes) while the other files run, and this waits for it.
beforeAll(async () => {
  const bed = testbed();
  containerEngineHost();
  // Built ahead of need by the global setup (test/testbed/prebuild.ts): found at once, or waited for.
  const images = ensureBaseImages((m) => process.stderr.write(`[sam-invoke] ${m}\n`));
  images.catch(() => undefined);
  dir = await mkdtemp(join(tmpdir(), 'outrigger-sam-invoke-'));
  secrets = await startSecretsEndpoint({ [SECRET]: bed.tokens.outrigger, [MIGRATOR_SECRET]: bed.tokens.migrator });
  // Cluster `local`, as the sample events name it, reached as a deployed function reaches a cluster outside EKS.
  const clusters = [
    {
      id: 'local',
      access: {
        kind: 'secret',
        server: bed.server,
        caData: (await readFile(bed.caFile)).toString('base64'),
        secretArn: SECRET,
        migratorTokenSecretArn: MIGRATOR_SECRET,
      },
      storage: { enabled: true, migrations: 'outrigger' },
    },
  ];
  clustersFile = join(dir, 'clusters.json');
  await writeFile(clustersFile, JSON.stringify(clusters));
  // `npm run synth -- -c outrigger:clustersFile=clusters.json -c outrigger:architecture=x86_64`: the bundles and the
  // clusters layer beside the template, with each resource's aws:cdk:path (which the CDK CLI turns on).
  const { app, stack } = outriggerApp({
    outdir: join(dir, 'cdk.out'),
    context: { 'aws:cdk:enable-path-metadata': true, 'outrigger:clustersFile': clustersFile, 'outrigger:architecture': 'x86_64' },
  });
  app.synth();
  template = join(dir, 'cdk.out', `${stack.stackName}.template.json`);
  // The stack's queues for cluster local on ElasticMQ, named as a stack named Outrigger names them (the sample
  // events' eventSourceARN names those), and an empty table for each of the two runs.
  const sqs = localSqsClient(bed.sqsEndpoint);
  const made = await sqs.send(new CreateQueueCommand({ QueueName: 'Outrigger-local-events.fifo', Attributes: { FifoQueue: 'true' } }));
  prefix = `${made.QueueUrl!.slice(0, made.QueueUrl!.lastIndexOf('/') + 1)}Outrigger-`;
  const queues = new QueueUrls(prefix);
  const names = [EVENTS_QUEUE, 'history', 'storage', 'migrator', 'map'].flatMap((q) =>
    [false, true].map((dlq) => queues.name('local', q, dlq)),
  );
  for (const name of [...names, `Outrigger-${INGEST_DEAD_LETTER_QUEUE}`])
    await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true' } }));
  for (const table of Object.values(tables)) await ensureTable(openState({ tableName: table, endpoint: bed.dynamodbEndpoint }));
  // `npm run sam-env -- --queue-url-prefix <prefix>`'s file for a runtime on 127.0.0.1, on this test's table, with the
  // Secrets Manager endpoint the cluster's token is read from.
  const env = samEnvironment({ kubeconfig: '', server: bed.server, dynamodb: bed.dynamodbEndpoint, pid: process.pid }, '127.0.0.1', prefix);
  Object.assign(env.Parameters, { OUTRIGGER_TABLE: tables.sam, AWS_ENDPOINT_URL_SECRETS_MANAGER: secrets.endpoint });
  await writeFile(join(dir, 'env.json'), JSON.stringify(env));
  await images;
  // Every function's two runs, a few at a time: each test awaits its function's.
  for (const { name } of functions) {
    // One after the other: some functions' answers count what they find in the cluster, which the first run may leave.
    const run = limit(async (): Promise<[Answer, Answer]> => [await samInvoke(name), await npmInvoke(name)]);
    // Awaited by the function's test; until then a failure is not an unhandled rejection.
    run.catch(() => undefined);
    runs.set(name, run);
  }
}, 300_000);

afterAll(async () => {
  await secrets?.close();
  await rm(dir, { recursive: true, force: true });
});

interface Answer {
  code: number | null;
  answer: unknown;
  seconds: number;
  log: string;
}

/** Runs `work` when fewer than AT_ONCE others run. */
let running = 0;
const waiting: Array<() => void> = [];
async function limit<T>(work: () => Promise<T>): Promise<T> {
  if (running >= AT_ONCE) await new Promise<void>((go) => waiting.push(go));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** The function's answer: SAM prints it on the last line of stdout, npm run invoke prints it alone (indented). */
function parsed(code: number | null, json: string, log: string, started: number): Answer {
  let answer: unknown;
  try {
    answer = JSON.parse(json);
  } catch {
    answer = json;
  }
  return { code, answer, log, seconds: (Date.now() - started) / 1000 };
}

/**
 * What two runs must agree on: a result, or an error's type and message (its trace names where each run's code is).
 * A result's timings (`...Ms`) are left out, and the storage poll's StorageStates created and renewed are counted
 * together: the second run finds those the first created in the cluster.
 */
/**
 * What the storage poll counts is every resource and StorageState of the shared bed, which other files change while
 * this one runs: its counts and lists are compared by kind (a number, a list), its failures exactly.
 */
const RACY = new Set([
  'resources',
  'created',
  'changed',
  'heartbeats',
  'reset',
  'states',
  'epochReads',
  'term',
  'cancelled',
  'narrowed',
  'resumed',
  'undiscovered',
  'missedPolls',
  'overdue',
]);

function outcome(a: Answer): unknown {
  const error = a.answer as { errorType?: string; errorMessage?: string } | undefined;
  if (error?.errorType) return { errorType: error.errorType, errorMessage: error.errorMessage };
  // Its answer: one object per (cluster, reporter), each with the leader's step and the groups that failed.
  const storagePoll = [a.answer].flat().some((x) => typeof x === 'object' && x !== null && 'failedGroups' in x && 'leader' in x);
  return JSON.parse(JSON.stringify(a.answer), function (this: Record<string, unknown>, key: string, value: unknown) {
    if (key.endsWith('Ms')) return undefined;
    if (storagePoll && RACY.has(key)) return Array.isArray(value) ? 'a list' : typeof value;
    if (key === 'created' && typeof value === 'number' && typeof this.heartbeats === 'number') return value + this.heartbeats;
    if (key === 'heartbeats' && typeof value === 'number' && typeof this.created === 'number') return undefined;
    return value;
  }) as unknown;
}

/** `sam local invoke -t <template> --env-vars env.json --docker-network host --skip-pull-image <Function> -e <event>`. */
async function samInvoke(name: string): Promise<Answer> {
  const started = Date.now();
  const out = await samCli(
    [
      'local',
      'invoke',
      '-t',
      template,
      '--env-vars',
      join(dir, 'env.json'),
      '--docker-network',
      'host',
      '--skip-pull-image',
      pascal(name),
      '-e',
      eventOf(name),
    ],
    {
      env: {
        ...process.env,
        ...aws,
        DOCKER_HOST: containerEngineHost(),
        // SAM asks STS for the account id (and falls back to a default): no AWS here, so one refused attempt, not
        // several timed out ones, and no wait on instance metadata.
        AWS_ENDPOINT_URL_STS: 'http://127.0.0.1:1',
        AWS_MAX_ATTEMPTS: '1',
        AWS_EC2_METADATA_DISABLED: 'true',
      },
    },
  );
  return parsed(out.code, out.stdout.trim().split('\n').at(-1) ?? '', out.stderr, started);
}

/** `npm run invoke -- <function> <event> --no-runtime`, with the configuration the layer holds and a table of its own. */
async function npmInvoke(name: string): Promise<Answer> {
  const bed = testbed();
  const started = Date.now();
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OUTRIGGER_') && !k.startsWith('AWS_')));
  const out = await capture(join(projectRoot, 'node_modules/node/bin/node'), ['scripts/invoke.ts', name, eventOf(name), '--no-runtime'], {
    cwd: projectRoot,
    env: {
      ...base,
      ...aws,
      OUTRIGGER_CLUSTERS_FILE: clustersFile,
      OUTRIGGER_TABLE: tables.invoke,
      OUTRIGGER_DYNAMODB_ENDPOINT: bed.dynamodbEndpoint,
      OUTRIGGER_QUEUE_URL_PREFIX: prefix,
      OUTRIGGER_DEAD_LETTER_FILE: join(dir, `${name}-dead-letter.jsonl`),
      AWS_ENDPOINT_URL_SECRETS_MANAGER: secrets.endpoint,
      // The ingest function's own dead-letter queue, as sam-env gives it.
      ...(name === 'ingest' ? { OUTRIGGER_DEAD_LETTER_QUEUE_URL: `${prefix}${INGEST_DEAD_LETTER_QUEUE}` } : {}),
    },
  });
  return parsed(out.code, out.stdout, out.stderr, started);
}

test.each(functions.map((f) => f.name))(
  "sam local invoke %s answers in Lambda's runtime what npm run invoke answers",
  async (name) => {
    const [sam, invoked] = await runs.get(name)!;
    process.stderr.write(`${name}: sam local invoke ${sam.seconds} s, npm run invoke ${invoked.seconds} s\n`);
    if (JSON.stringify(outcome(sam)) !== JSON.stringify(outcome(invoked)))
      process.stderr.write(
        `--- sam local invoke ${name}:\n${sam.log.slice(-6000)}\n--- npm run invoke ${name}:\n${invoked.log.slice(-3000)}\n`,
      );
    expect(outcome(sam)).toEqual(outcome(invoked));
    // npm run invoke exits 1 when the handler throws; SAM prints the error and exits 0.
    expect([sam.code, invoked.code]).toEqual([0, 0]);
  },
  300_000,
);
