// npm run sam-env [-- --outputs FILE | --queue-url-prefix URL] [--state-dir DIR] [--out FILE] [--host HOST]: writes
// the `--env-vars` file with which `sam local invoke -t cdk.out/Outrigger.template.json <Function>` runs a deployed
// bundle against the running local runtime's state: its DynamoDB Local and table, dead letters to a file in the
// container, and sync requests to the deployed stack's queues. SAM overrides only
// variables the template declares; the stack declares every variable the functions read (infra/functions.ts
// FUNCTION_ENVIRONMENT), and this file sets them for every function (its "Parameters").
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { FUNCTION_ENVIRONMENT } from '../infra/functions.ts';
import { projectRoot } from '../local/paths.ts';
import { INGEST_DEAD_LETTER_QUEUE } from '../shared/lambda/queues.ts';
import { findOutput, readJson } from './forwarder-overlay.ts';
import { DEFAULT_TABLE, runningRuntime, type RuntimeFile } from './runtime-file.ts';

const usage = `usage: npm run sam-env -- [--outputs FILE | --queue-url-prefix URL] [--state-dir DIR] [--out FILE] [--host HOST]

Writes FILE (default env.json) for sam local invoke --env-vars FILE, from the local runtime (npm start) whose
runtime.json is in DIR (default .outrigger/).

  --outputs FILE            the deployed stack's outputs (cdk deploy --outputs-file FILE): its QueueUrlPrefix is
                            where the functions send sync requests
  --queue-url-prefix URL    that prefix itself (https://sqs.<region>.amazonaws.com/<account>/<stack>-). Without
                            either, the router and the functions that send refuse to run, naming the variable

  --host HOST   how the container reaches this machine: 127.0.0.1 (the default) with sam's --docker-network host
                on Linux, host.docker.internal with Docker Desktop`;

/** The ingest function's construct id (SamResourceId), which names its section of the file. */
export const INGEST_FUNCTION_ID = 'Ingest';

/** Where a function in the container writes dead letters (SAM's container has a writable /tmp, as Lambda does). */
export const CONTAINER_DEAD_LETTER_FILE = '/tmp/outrigger-dead-letter.jsonl';

type Variable = (typeof FUNCTION_ENVIRONMENT)[number];

/**
 * The variables for every function: the runtime's state, and the deployed stack's queues. Every reference to
 * the stack is replaced: SAM resolves the template's with placeholders (account 123456789012, URL suffix
 * `localhost`), which name no real resource. The ingest function, which puts the requests it refuses on a queue
 * and nowhere else, gets the stack's ingest dead-letter queue (named from the prefix as the stack names it).
 */
export function samEnvironment(
  runtime: RuntimeFile,
  host: string,
  queueUrlPrefix = '',
): { Parameters: Partial<Record<Variable, string>> } & { [INGEST_FUNCTION_ID]?: Partial<Record<Variable, string>> } {
  const dynamodb = new URL(runtime.dynamodb);
  dynamodb.hostname = host;
  return {
    Parameters: {
      OUTRIGGER_QUEUE_URL_PREFIX: queueUrlPrefix,
      OUTRIGGER_TABLE: DEFAULT_TABLE,
      OUTRIGGER_DYNAMODB_ENDPOINT: dynamodb.origin,
      OUTRIGGER_DEAD_LETTER_FILE: CONTAINER_DEAD_LETTER_FILE,
      // Every other function's dead letters go to the file: the stack's queues beside theirs are references too.
      OUTRIGGER_DEAD_LETTER_QUEUE_URL: '',
      // The signing key is a secret of the deployed stack: webhooks go unsigned, as they do locally without one.
      OUTRIGGER_HOOK_SECRET_ARN: '',
    },
    ...(queueUrlPrefix
      ? { [INGEST_FUNCTION_ID]: { OUTRIGGER_DEAD_LETTER_QUEUE_URL: `${queueUrlPrefix}${INGEST_DEAD_LETTER_QUEUE}` } }
      : {}),
  };
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      outputs: { type: 'string' },
      'queue-url-prefix': { type: 'string' },
      'state-dir': { type: 'string' },
      out: { type: 'string' },
      host: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  const stateDir = resolve(values['state-dir'] ?? resolve(projectRoot, '.outrigger'));
  const runtime = await runningRuntime(stateDir, (message) => process.stderr.write(`[sam-env] ${message}\n`));
  if (!runtime) {
    process.stderr.write(`sam-env: no local runtime is running (no live ${resolve(stateDir, 'runtime.json')}): start one with npm start\n`);
    return 2;
  }
  // An empty flag is no flag: the outputs, if given, still answer.
  let prefix = values['queue-url-prefix'] || undefined;
  if (values.outputs && !prefix) {
    try {
      prefix = findOutput((await readJson(values.outputs)) as Record<string, Record<string, string>>, 'QueueUrlPrefix');
    } catch (err) {
      process.stderr.write(`sam-env: ${values.outputs}: ${(err as Error).message}\n`);
      return 2;
    }
    if (!prefix) {
      process.stderr.write(
        `sam-env: ${values.outputs} has no QueueUrlPrefix output (deployed before it was added?): pass --queue-url-prefix\n`,
      );
      return 2;
    }
  }
  if (!prefix) process.stderr.write('sam-env: no --outputs or --queue-url-prefix: functions that send sync requests will refuse to run\n');
  const out = resolve(values.out ?? 'env.json');
  await writeFile(out, `${JSON.stringify(samEnvironment(runtime.info, values.host ?? '127.0.0.1', prefix), null, 2)}\n`);
  process.stdout.write(`${out}\n`);
  return 0;
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
