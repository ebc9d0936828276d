#!/usr/bin/env node
// outrigger: the local runtime (`run`), a workload's history and rollback, the preflight (`doctor`), keys, roles,
// an offline hook pass (`render`), a Metacontroller definition's grants (`migrate`) and the cost model: the usage
// below lists them. Installed as `kubectl-outrigger` too, so that `kubectl outrigger ...` works as a kubectl plugin.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { historyCommand, parseOutput, rollbackCommand } from '../cli/history.ts';
import { migratorRoleCommand, migratorRoleUsage } from '../cli/migrator-role.ts';
import { connect } from '../shared/kube/index.ts';
import { LOG_FORMAT_ENV, LOG_FORMATS } from '../shared/lambda/logger.ts';

const usage = `usage: outrigger <command> [options]

commands:
  run        run Outrigger locally: every function, in one process, against KUBECONFIG's cluster or,
             when KUBECONFIG is unset, a local kube-apiserver it starts; DynamoDB Local for state
             --kubeconfig PATH   the cluster to watch (default: $KUBECONFIG)
             --context NAME      kubeconfig context
             --cluster-id ID     the cluster's id in events and state keys (default: local)
             --namespace NS      watch, resync and write in NS only; no storage migration
             --state-dir DIR     dead letters and runtime.json (default: .outrigger/)
             --log-format FMT    text (one short line per action, the default) or json (as in AWS)
             --one-apiserver     the cluster has one apiserver: storage polls read it once, unsampled
                                 (the default with the local kube-apiserver)
             --lambda-containers each function in its Lambda container (the Lambda Node.js base image in the
                                 project's container engine), invoked through the runtime API, not in process
  history    outrigger history <kind>/<name> [--revision N] [-o json|yaml]: the object's revisions
  rollback   outrigger rollback <kind>/<name> [--to-revision N] [--dry-run] [-o json|yaml]: put a
             revision's target state back (by default the previous one)
  doctor     outrigger doctor [--cluster ID] [--clusters FILE] [--outputs FILE] [--json]: check each cluster,
             its queues and EKS for what Outrigger needs, each finding with the command that fixes it
  hook-key   outrigger hook-key <MapController> [--cluster ID] [--secret-arn ARN | --secret-file FILE]: the key
             that controller's webhook requests are signed with, for its receiver
  migrator-role  outrigger migrator-role [--context NAME]: the storage migrator's ClusterRole, narrowed to the
             resources the cluster's StorageStates name
  forwarder-key  outrigger forwarder-key --cluster ID [--secret-arn ARN | --secret-file FILE]: the key that
             cluster's forwarder signs its envelopes with, for the Secret it mounts
  render     outrigger render --controller FILE --parent FILE [--children FILE]... [--url URL | --response FILE]:
             one CompositeController or DecoratorController pass, offline, for hook authors: the hook called and
             the children and status it would write, printed as YAML
  migrate    outrigger migrate -f FILE [--namespace NS] [--related APIVERSION/RESOURCE]...: what a Metacontroller
             CompositeController or DecoratorController needs beside it (ServiceAccount, consent, RBAC), as YAML
  cost       outrigger cost [--clusters N] [--changes-per-day N] [--map-inputs N] [--crds N] [--region R]:
             what a fleet would cost a month in AWS, beside the same controllers run in each cluster

common options: -n/--namespace NS, --kubeconfig PATH, --context NAME; \`outrigger <command> --help\`
`;

const historyUsage = `usage: outrigger history <kind>/<name> [--revision N] [-o json|yaml] [-n NS] [--kubeconfig PATH] [--context NAME]

The object's revisions, oldest first: number, name, CURRENT (* on the revision the object holds now), AGE and
change cause. With --revision N, that revision's target state and its diff against the one before. -o prints
the same as JSON or YAML. Works as \`kubectl outrigger history\` too.
`;

const rollbackUsage = `usage: outrigger rollback <kind>/<name> [--to-revision N] [--dry-run] [-o json|yaml] [-n NS] [--kubeconfig PATH] [--context NAME]

Puts revision N's target state back on the object (without --to-revision: the previous revision, the newest
one the object does not already hold), as one JSON patch that first tests the object's uid and the current
value of every path it removes. Nothing is written when the object already matches the revision, or with
--dry-run, which prints the patch instead. Works as \`kubectl outrigger rollback\` too.
`;

const common = {
  namespace: { type: 'string', short: 'n' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
} as const;

function client(values: { kubeconfig?: string | undefined; context?: string | undefined }) {
  return connect({ kind: 'kubeconfig', path: values.kubeconfig ?? (process.env.KUBECONFIG || undefined), context: values.context });
}

async function namespaceOf(values: { namespace?: string | undefined }, kube: ReturnType<typeof client>): Promise<string> {
  return values.namespace ?? (await kube.endpoint()).defaultNamespace ?? 'default';
}

/** `--help` anywhere in a subcommand's arguments prints its usage instead of running it. */
function helpWanted(argv: string[], usage: string): boolean {
  if (!argv.includes('--help') && !argv.includes('-h')) return false;
  process.stdout.write(usage);
  return true;
}

async function history(argv: string[]): Promise<void> {
  if (helpWanted(argv, historyUsage)) return;
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...common, revision: { type: 'string' }, output: { type: 'string', short: 'o' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw new Error(`expected one <kind>/<name>\n${historyUsage}`);
  const revision = values.revision === undefined ? undefined : positiveInt(values.revision, '--revision');
  const kube = client(values);
  process.stdout.write(
    await historyCommand(kube, positionals[0]!, await namespaceOf(values, kube), { revision, output: parseOutput(values.output) }),
  );
}

async function rollback(argv: string[]): Promise<void> {
  if (helpWanted(argv, rollbackUsage)) return;
  const options = {
    ...common,
    'to-revision': { type: 'string' },
    'dry-run': { type: 'boolean' },
    output: { type: 'string', short: 'o' },
  } as const;
  const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  if (positionals.length !== 1) throw new Error(`expected one <kind>/<name>\n${rollbackUsage}`);
  const toRevision = values['to-revision'] === undefined ? undefined : positiveInt(values['to-revision'], '--to-revision');
  const kube = client(values);
  process.stdout.write(
    await rollbackCommand(kube, positionals[0]!, await namespaceOf(values, kube), {
      toRevision,
      dryRun: values['dry-run'] === true,
      output: parseOutput(values.output),
    }),
  );
}

async function migratorRole(argv: string[]): Promise<void> {
  if (helpWanted(argv, migratorRoleUsage)) return;
  const { values } = parseArgs({ args: argv, options: { kubeconfig: common.kubeconfig, context: common.context }, strict: true });
  process.stdout.write(await migratorRoleCommand(client(values)));
}

function positiveInt(value: string, flag: string): number {
  if (!/^\d+$/.test(value)) throw new Error(`${flag} takes a revision number, got ${JSON.stringify(value)}`);
  return Number(value);
}

/**
 * What `run` needs of a checkout (the local runtime builds kube-apiserver from test/cluster and fetches DynamoDB
 * Local with test/dynamodb/pom.xml), imported only for `run`: the kubectl plugin's npm package has history and
 * rollback only (docs/controllers/history.md#the-kubectl-plugin).
 */
async function checkout(command: 'run' | 'doctor' | 'hook-key' | 'forwarder-key' | 'cost') {
  try {
    const [{ kubectlBinary }, { projectRoot }, { startRuntime }, { doctor, doctorUsage }, hookKey, forwarderKey, cost] = await Promise.all([
      import('../local/apiserver.ts'),
      import('../local/paths.ts'),
      import('../runtime/local.ts'),
      import('../cli/doctor/command.ts'),
      import('../cli/hook-key.ts'),
      import('../cli/forwarder-key.ts'),
      import('../cli/cost.ts'),
    ]);
    return { kubectlBinary, projectRoot, startRuntime, doctor, doctorUsage, hookKey, forwarderKey, cost };
  } catch (err) {
    throw new Error(
      `${command} needs a checkout of Outrigger (npm ci${command === 'run' ? ' && npm start' : ''} there); this installation has history and rollback only (${(err as Error).message})`,
      { cause: err },
    );
  }
}

async function render(argv: string[]): Promise<void> {
  const { renderCommand, renderUsage } = await import('../cli/render.ts');
  if (helpWanted(argv, renderUsage)) return;
  process.stdout.write(await renderCommand(argv));
}

async function migrate(argv: string[]): Promise<void> {
  const { migrateCommand, migrateUsage } = await import('../cli/migrate.ts');
  if (helpWanted(argv, migrateUsage)) return;
  process.stdout.write(await migrateCommand(argv));
}

async function cost(argv: string[]): Promise<void> {
  const { cost: cmd } = await checkout('cost');
  if (helpWanted(argv, cmd.costUsage)) return;
  process.stdout.write(cmd.costCommand(argv));
}

async function doctor(argv: string[]): Promise<void> {
  const { projectRoot, doctor: check, doctorUsage } = await checkout('doctor');
  if (helpWanted(argv, doctorUsage)) return;
  const { output, code } = await check(argv, { root: projectRoot });
  process.stdout.write(output);
  process.exitCode = code;
}

async function hookKey(argv: string[]): Promise<void> {
  const { hookKey: cmd } = await checkout('hook-key');
  if (helpWanted(argv, cmd.hookKeyUsage)) return;
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      kubeconfig: common.kubeconfig,
      context: common.context,
      cluster: { type: 'string', default: 'local' },
      uid: { type: 'string' },
      'secret-arn': { type: 'string' },
      'secret-file': { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw new Error(`expected one MapController name\n${cmd.hookKeyUsage}`);
  const secret = secretOf(values, cmd.signingSecret, cmd.hookKeyUsage);
  process.stdout.write(
    await cmd.hookKeyCommand(values.uid ? undefined : client(values), {
      name: positionals[0]!,
      cluster: values.cluster,
      uid: values.uid,
      secret,
    }),
  );
}

/** The deployment's signing secret, from --secret-arn or --secret-file, else the environment. */
function secretOf(
  values: { 'secret-arn'?: string | undefined; 'secret-file'?: string | undefined },
  signingSecret: (env: NodeJS.ProcessEnv) => (() => Promise<string>) | undefined,
  commandUsage: string,
): () => Promise<string> {
  if (values['secret-arn'] && values['secret-file']) throw new Error('give --secret-arn or --secret-file, not both');
  const given = values['secret-arn'] || values['secret-file'];
  const secret = signingSecret({
    AWS_REGION: process.env.AWS_REGION,
    OUTRIGGER_HOOK_SECRET_ARN: given ? values['secret-arn'] : process.env.OUTRIGGER_HOOK_SECRET_ARN,
    OUTRIGGER_HOOK_SECRET_FILE: given ? values['secret-file'] : process.env.OUTRIGGER_HOOK_SECRET_FILE,
  });
  if (!secret)
    throw new Error(`no signing secret: give --secret-arn (the stack's MapHookSigningSecretArn) or --secret-file\n${commandUsage}`);
  return secret;
}

async function forwarderKey(argv: string[]): Promise<void> {
  const { forwarderKey: cmd, hookKey } = await checkout('forwarder-key');
  if (helpWanted(argv, cmd.forwarderKeyUsage)) return;
  const { values } = parseArgs({
    args: argv,
    options: { cluster: { type: 'string' }, 'secret-arn': { type: 'string' }, 'secret-file': { type: 'string' } },
    strict: true,
  });
  if (!values.cluster) throw new Error(`--cluster is required: the cluster's id in clusters.json\n${cmd.forwarderKeyUsage}`);
  const secret = secretOf(values, hookKey.signingSecret, cmd.forwarderKeyUsage);
  process.stdout.write(await cmd.forwarderKeyCommand({ cluster: values.cluster, secret }));
}

async function run(argv: string[]): Promise<void> {
  if (helpWanted(argv, usage)) return;
  const { kubectlBinary, projectRoot, startRuntime } = await checkout('run');
  const { values } = parseArgs({
    args: argv,
    options: {
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      'cluster-id': { type: 'string', default: 'local' },
      namespace: { type: 'string' },
      'state-dir': { type: 'string', default: join(projectRoot, '.outrigger') },
      'log-format': { type: 'string', default: 'text' },
      'one-apiserver': { type: 'boolean' },
      'lambda-containers': { type: 'boolean' },
    },
    strict: true,
  });
  const logFormat = values['log-format'];
  if (!(LOG_FORMATS as readonly string[]).includes(logFormat))
    throw new Error(`--log-format takes ${LOG_FORMATS.join(' or ')}, got ${JSON.stringify(logFormat)}`);
  // Read by every function's logger, made when the runtime loads the handlers below.
  process.env[LOG_FORMAT_ENV] = logFormat;
  const kubeconfig = values.kubeconfig ?? (process.env.KUBECONFIG || undefined);
  const log = (m: string) => process.stderr.write(`[outrigger] ${m}\n`);
  log(kubeconfig ? `watching the cluster of ${kubeconfig}` : 'KUBECONFIG is not set: starting a local kube-apiserver');
  const runtime = await startRuntime({
    kubeconfig,
    context: values.context,
    clusterId: values['cluster-id'],
    namespace: values.namespace,
    stateDir: values['state-dir'],
    oneApiserver: values['one-apiserver'],
    lambdaContainers: values['lambda-containers'],
    log,
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      log('stopping now');
      process.exit(130);
    }
    stopping = true;
    log(`${signal}: stopping (again to force)`);
    runtime.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log(`stop failed: ${String(err)}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  log(`ready: cluster ${runtime.clusterId} at ${runtime.server}, DynamoDB Local at ${runtime.dynamodbEndpoint}`);
  if (!kubeconfig) log(`use the cluster with: ${kubectlBinary} --kubeconfig ${runtime.kubeconfig} get ns`);
  log(`dead letters: ${runtime.deadLetterFile}; Ctrl-C stops everything`);
  process.stdout.write(
    `${JSON.stringify({ ready: true, kubeconfig: runtime.kubeconfig, kubectl: kubectlBinary, server: runtime.server, dynamodb: runtime.dynamodbEndpoint })}\n`,
  );
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  switch (command) {
    case 'run':
      return run(rest);
    case 'history':
      return history(rest);
    case 'rollback':
      return rollback(rest);
    case 'doctor':
      return doctor(rest);
    case 'hook-key':
      return hookKey(rest);
    case 'migrator-role':
      return migratorRole(rest);
    case 'forwarder-key':
      return forwarderKey(rest);
    case 'cost':
      return cost(rest);
    case 'render':
      return render(rest);
    case 'migrate':
      return migrate(rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(usage);
      return;
    default:
      process.stderr.write(`outrigger: unknown command ${JSON.stringify(command)}\n${usage}`);
      process.exit(2);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`outrigger: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
