// invoke's command line: its usage, its options, and which function and event it names.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { FunctionSpec } from '../../functions/spec.ts';
import { projectRoot } from '../../local/paths.ts';

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
  OUTRIGGER_WEBHOOK_ALLOW                 where webhooks may go (a JSON array of hosts and ranges)
`;

/** A usage or setup problem: invoke exits 2 with its message. */
export class UsageError extends Error {}

export interface Invocation {
  spec: FunctionSpec;
  /** The event file, or `-` for stdin. */
  eventPath: string;
  stateDir: string;
  useRuntime: boolean;
  /** Stamp the event's SQS records as sent now. */
  now: boolean;
}

/** What the command line asks for: an invocation, or the usage printed and the exit code it ends with. */
export async function parseCommandLine(argv: string[], functions: readonly FunctionSpec[]): Promise<Invocation | { exit: number }> {
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
  const samples = (await readdir(join(projectRoot, 'events')).catch(() => [])).filter((f) => f.endsWith('.json')).sort();
  const listing = `\nfunctions: ${functions.map((f) => f.name).join(', ')}\nsample events: ${samples.map((f) => `events/${f}`).join(', ')}\n`;
  if (values.help || positionals.length === 0) {
    process.stderr.write(usage + listing);
    return { exit: values.help ? 0 : 2 };
  }
  if (positionals.length > 2) throw new UsageError(`too many arguments: ${positionals.slice(2).join(' ')}\n${usage}`);
  const [name, eventPath = join(projectRoot, 'events', `${positionals[0]}.json`)] = positionals as [string, string?];
  const spec = functions.find((f) => f.name === name);
  if (!spec) throw new UsageError(`no function named ${JSON.stringify(name)}${listing}`);
  return { spec, eventPath, stateDir: values['state-dir'], useRuntime: !values['no-runtime'], now: values.now };
}
