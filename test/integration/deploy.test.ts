// The documented deploy, rehearsed on moto's server (local/aws-emulator.ts): the blocks of
// docs/getting-started/deploy.md#rehearse-the-deploy-on-an-emulator run as written, in a scratch directory that
// holds the repository as a clone would, with only the settings a user pointing the CDK at an emulator sets (the
// page's port replaced by the emulator's). After each deploy everything the template declares is read back through
// the AWS APIs with the template's settings, since moto's stack status says CREATE_COMPLETE even when a resource
// failed; after `cdk destroy`, only what the template retains is left.
import { CloudFormationClient, paginateListStackResources } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmsCommand } from '@aws-sdk/client-cloudwatch';
import { CloudWatchLogsClient, DescribeLogGroupsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { DescribeTableCommand, DescribeTimeToLiveCommand, DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { DescribeRuleCommand, EventBridgeClient, ListRulesCommand, ListTargetsByRuleCommand } from '@aws-sdk/client-eventbridge';
import { GetRoleCommand, IAMClient, ListRolesCommand } from '@aws-sdk/client-iam';
import {
  GetFunctionConfigurationCommand,
  LambdaClient,
  ListEventSourceMappingsCommand,
  ListFunctionsCommand,
} from '@aws-sdk/client-lambda';
import { DescribeSecretCommand, ListSecretsCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand, GetQueueUrlCommand, ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { EMULATOR_ACCOUNT, startAwsEmulator, typesMotoSkips, type AwsEmulator } from '../../local/aws-emulator.ts';
import { projectRoot } from '../../local/paths.ts';
import { runnableBlocks, type RunnableBlock } from '../docs/blocks.ts';
import { deployedClustersJson } from '../testbed/deploy-docs.ts';

const run = promisify(execFile);
const PAGE = 'docs/getting-started/deploy.md';
/** The endpoint the page's blocks name: `npm run aws-emulator`'s default port. */
const PAGE_ENDPOINT = 'localhost:5055';
const REGION = 'eu-west-1';

let emulator: AwsEmulator;
let dir: string;
let logFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'outrigger-rehearsal-'));
  logFile = join(dir, 'moto.log');
  emulator = await startAwsEmulator({ logFile });
  // The repository as a clone has it, in a directory of its own, so that what the commands write (cdk.out,
  // clusters.json, cdk-outputs.json) stays out of the checkout.
  const skip = new Set(['.git', 'cdk.out', 'clusters.json', 'cdk-outputs.json', 'cdk.context.json']);
  for (const entry of await readdir(projectRoot)) if (!skip.has(entry)) await symlink(join(projectRoot, entry), join(dir, entry));
}, 600_000);

afterAll(async () => {
  await emulator?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Runs a block in a fresh bash, with what the earlier blocks exported, as docs-walkthrough.test.ts does. */
async function runBlock(block: RunnableBlock, envFile: string): Promise<void> {
  const script = [
    'set -eo pipefail',
    `if [ -f ${envFile} ]; then source ${envFile}; fi`,
    block.script.replaceAll(PAGE_ENDPOINT, new URL(emulator.endpoint).host.replace('127.0.0.1', 'localhost')),
    `export -p > ${envFile}`,
  ].join('\n');
  // The user's shell, less any AWS or CDK setting of the test's own: the page's blocks set what they need.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_') && !k.startsWith('CDK_')));
  const started = Date.now();
  try {
    await run('bash', ['-c', script], { cwd: dir, env, maxBuffer: 64 * 1024 * 1024 });
    process.stderr.write(`${PAGE}:${block.line} ran in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    const moto = await readFile(logFile, 'utf8').catch(() => '');
    throw new Error(
      `${PAGE}:${block.line} exited with ${e.code}:\n${block.script}\n--- stderr\n${(e.stderr ?? '').slice(-6000)}\n--- moto\n${moto.slice(-4000)}`,
    );
  }
}

const config = () => ({
  endpoint: emulator.endpoint,
  region: REGION,
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
});

interface Resource {
  Type: string;
  Properties?: Record<string, unknown>;
  DeletionPolicy?: string;
}
type Template = { Resources: Record<string, Resource> };

const ofType = (t: Template, type: string) => Object.entries(t.Resources).filter(([, r]) => r.Type === type);
const props = (r: Resource) => r.Properties ?? {};
/** The logical id an intrinsic ({Ref} or {Fn::GetAtt}) points at. */
const target = (v: unknown): string => {
  const o = v as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
  return o.Ref ?? o['Fn::GetAtt']?.[0] ?? String(v);
};

/** Each resource of the stack: logical id to physical id, as CloudFormation lists them. */
async function physicalIds(): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for await (const page of paginateListStackResources({ client: new CloudFormationClient(config()) }, { StackName: 'Outrigger' }))
    for (const r of page.StackResourceSummaries ?? []) ids.set(r.LogicalResourceId!, r.PhysicalResourceId!);
  return ids;
}

/**
 * Every resource of `template` read back through its service's API, each difference from the template's settings
 * named. What moto does not keep (Architectures, Layers) and the placeholders are not read.
 */
async function differences(template: Template): Promise<{ found: Record<string, number>; wrong: string[] }> {
  const ids = await physicalIds();
  const wrong: string[] = [];
  const check = (what: string, actual: unknown, expected: unknown) => {
    if (JSON.stringify(actual) !== JSON.stringify(expected))
      wrong.push(`${what}: ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`);
  };
  const found: Record<string, number> = {};
  const count = (type: string) => (found[type] = (found[type] ?? 0) + 1);
  /** Reads each resource of a type back; one its API does not find is named, with the API's error. */
  const each = async (type: string, read: (id: string, r: Resource) => Promise<void>) => {
    for (const [id, r] of ofType(template, type)) {
      try {
        await read(id, r);
        count(type);
      } catch (err) {
        wrong.push(`${id} (${type}): ${(err as Error).name}: ${(err as Error).message}`);
      }
    }
  };

  const sqs = new SQSClient(config());
  const queueArns = new Map<string, string>();
  await each('AWS::SQS::Queue', async (id, r) => {
    const p = props(r);
    const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: p.QueueName as string }));
    const { Attributes: a = {} } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['All'] }));
    queueArns.set(id, a.QueueArn!);
    check(`${id} FifoQueue`, a.FifoQueue, String(p.FifoQueue));
    check(`${id} ContentBasedDeduplication`, a.ContentBasedDeduplication, String(p.ContentBasedDeduplication));
    if (p.VisibilityTimeout !== undefined) check(`${id} VisibilityTimeout`, a.VisibilityTimeout, String(p.VisibilityTimeout));
    if (p.MessageRetentionPeriod !== undefined)
      check(`${id} MessageRetentionPeriod`, a.MessageRetentionPeriod, String(p.MessageRetentionPeriod));
    check(`${id} SqsManagedSseEnabled`, a.SqsManagedSseEnabled, String(p.SqsManagedSseEnabled));
  });
  for (const [id, r] of ofType(template, 'AWS::SQS::Queue')) {
    const redrive = props(r).RedrivePolicy as { deadLetterTargetArn: unknown; maxReceiveCount: number } | undefined;
    if (!redrive || !queueArns.has(id)) continue;
    const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: props(r).QueueName as string }));
    const { Attributes: a = {} } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['RedrivePolicy'] }));
    const actual = JSON.parse(a.RedrivePolicy ?? '{}') as { deadLetterTargetArn?: string; maxReceiveCount?: number | string };
    check(
      `${id} RedrivePolicy`,
      { arn: actual.deadLetterTargetArn, max: Number(actual.maxReceiveCount) },
      {
        arn: queueArns.get(target(redrive.deadLetterTargetArn)),
        max: redrive.maxReceiveCount,
      },
    );
  }

  const dynamodb = new DynamoDBClient(config());
  await each('AWS::DynamoDB::GlobalTable', async (id, r) => {
    const p = props(r);
    const TableName = ids.get(id)!;
    const { Table: t } = await dynamodb.send(new DescribeTableCommand({ TableName }));
    const { TimeToLiveDescription: ttl } = await dynamodb.send(new DescribeTimeToLiveCommand({ TableName }));
    check(`${id} KeySchema`, t?.KeySchema, p.KeySchema);
    check(`${id} BillingMode`, t?.BillingModeSummary?.BillingMode ?? 'PROVISIONED', p.BillingMode);
    const spec = p.TimeToLiveSpecification as { AttributeName: string; Enabled: boolean };
    check(
      `${id} TTL`,
      { name: ttl?.AttributeName, status: ttl?.TimeToLiveStatus },
      {
        name: spec.AttributeName,
        status: spec.Enabled ? 'ENABLED' : 'DISABLED',
      },
    );
  });

  const lambda = new LambdaClient(config());
  await each('AWS::Lambda::Function', async (id, r) => {
    const p = props(r);
    const fn = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: ids.get(id)! }));
    check(`${id} Runtime`, fn.Runtime, p.Runtime);
    check(`${id} Handler`, fn.Handler, p.Handler);
    check(`${id} MemorySize`, fn.MemorySize, p.MemorySize);
    check(`${id} Timeout`, fn.Timeout, p.Timeout);
    const env = (p.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
    check(`${id} environment keys`, Object.keys(fn.Environment?.Variables ?? {}).sort(), Object.keys(env).sort());
  });
  const mappings = (await lambda.send(new ListEventSourceMappingsCommand({}))).EventSourceMappings ?? [];
  await each('AWS::Lambda::EventSourceMapping', async (id, r) => {
    const p = props(r);
    const m = mappings.find((x) => x.UUID === ids.get(id));
    check(
      `${id}`,
      {
        fn: m?.FunctionArn?.split(':').pop(),
        source: m?.EventSourceArn,
        batch: m?.BatchSize,
        responses: m?.FunctionResponseTypes,
        concurrency: m?.ScalingConfig?.MaximumConcurrency,
      },
      {
        fn: ids.get(target(p.FunctionName)),
        source: queueArns.get(target(p.EventSourceArn)),
        batch: p.BatchSize,
        responses: p.FunctionResponseTypes,
        concurrency: (p.ScalingConfig as { MaximumConcurrency?: number } | undefined)?.MaximumConcurrency,
      },
    );
  });

  const events = new EventBridgeClient(config());
  await each('AWS::Events::Rule', async (id, r) => {
    const p = props(r);
    const Name = ids.get(id)!;
    const rule = await events.send(new DescribeRuleCommand({ Name }));
    const { Targets = [] } = await events.send(new ListTargetsByRuleCommand({ Rule: Name }));
    const targets = p.Targets as Array<{ Id: string; Arn: unknown; Input?: string }>;
    check(`${id}`, { schedule: rule.ScheduleExpression, state: rule.State }, { schedule: p.ScheduleExpression, state: p.State });
    check(
      `${id} targets`,
      Targets.map((t) => [t.Id, t.Arn?.split(':').pop(), t.Input]),
      targets.map((t) => [t.Id, ids.get(target(t.Arn)), t.Input]),
    );
  });

  const cloudwatch = new CloudWatchClient(config());
  await each('AWS::CloudWatch::Alarm', async (id, r) => {
    const p = props(r);
    const { MetricAlarms = [] } = await cloudwatch.send(new DescribeAlarmsCommand({ AlarmNames: [ids.get(id)!] }));
    const a = MetricAlarms[0];
    check(
      `${id}`,
      {
        op: a?.ComparisonOperator,
        threshold: a?.Threshold,
        periods: a?.EvaluationPeriods,
        metric: a?.MetricName,
        missing: a?.TreatMissingData,
        actions: a?.AlarmActions,
      },
      {
        op: p.ComparisonOperator,
        threshold: p.Threshold,
        periods: p.EvaluationPeriods,
        metric: p.MetricName,
        missing: p.TreatMissingData,
        actions: (p.AlarmActions as unknown[]).map((x) => ids.get(target(x)) ?? x),
      },
    );
  });

  const iam = new IAMClient(config());
  await each('AWS::IAM::Role', async (id, r) => {
    const { Role } = await iam.send(new GetRoleCommand({ RoleName: ids.get(id)! }));
    const doc = JSON.parse(decodeURIComponent(Role?.AssumeRolePolicyDocument ?? '{}')) as { Statement: Array<{ Principal: unknown }> };
    const want = (props(r).AssumeRolePolicyDocument as { Statement: Array<{ Principal: unknown }> }).Statement.map((s) => s.Principal);
    check(
      `${id} trusts`,
      doc.Statement.map((s) => s.Principal),
      want,
    );
  });

  const secrets = new SecretsManagerClient(config());
  await each('AWS::SecretsManager::Secret', async (id) => {
    const s = await secrets.send(new DescribeSecretCommand({ SecretId: ids.get(id)! }));
    check(`${id} exists`, Boolean(s.ARN), true);
  });

  const logs = new CloudWatchLogsClient(config());
  const { logGroups = [] } = await logs.send(new DescribeLogGroupsCommand({}));
  await each('AWS::Logs::LogGroup', async (id, r) => {
    const g = logGroups.find((x) => x.logGroupName === ids.get(id));
    check(`${id} retention`, g?.retentionInDays, props(r).RetentionInDays);
  });
  return { found, wrong };
}

/** What each service still holds of the stack: queues, functions, mappings, rules, alarms, roles, secrets, tables, log groups. */
async function leftOver(): Promise<Record<string, string[]>> {
  const ours = (names: Array<string | undefined>) => names.filter((n): n is string => Boolean(n && n.includes('Outrigger-'))).sort();
  const lambda = new LambdaClient(config());
  const iam = new IAMClient(config());
  const { Roles = [] } = await iam.send(new ListRolesCommand({}));
  const { SecretList = [] } = await new SecretsManagerClient(config()).send(new ListSecretsCommand({}));
  const { Rules = [] } = await new EventBridgeClient(config()).send(new ListRulesCommand({}));
  const { logGroups = [] } = await new CloudWatchLogsClient(config()).send(new DescribeLogGroupsCommand({}));
  return {
    queues: ours(((await new SQSClient(config()).send(new ListQueuesCommand({}))).QueueUrls ?? []).map((u) => u.split('/').pop())),
    functions: ours(((await lambda.send(new ListFunctionsCommand({}))).Functions ?? []).map((f) => f.FunctionName)),
    mappings: ((await lambda.send(new ListEventSourceMappingsCommand({}))).EventSourceMappings ?? []).map((m) => m.UUID!),
    rules: ours(Rules.map((r) => r.Name)),
    alarms: ours(((await new CloudWatchClient(config()).send(new DescribeAlarmsCommand({}))).MetricAlarms ?? []).map((a) => a.AlarmName)),
    roles: ours(Roles.map((r) => r.RoleName)),
    secrets: ours(SecretList.map((s) => s.Name)),
    tables: ours((await new DynamoDBClient(config()).send(new ListTablesCommand({}))).TableNames ?? []),
    logGroups: ours(logGroups.map((g) => g.logGroupName)),
  };
}

const stackTemplate = async (): Promise<Template> =>
  JSON.parse(await readFile(join(dir, 'cdk.out', 'Outrigger.template.json'), 'utf8')) as Template;

/** The rows of the page's table of the types moto's CloudFormation cannot create: type, and moto's words. */
async function typesListed(): Promise<Map<string, string>> {
  const page = await readFile(join(projectRoot, PAGE), 'utf8');
  const section = page.slice(page.indexOf('## Rehearse the deploy on an emulator'));
  return new Map([...section.matchAll(/^\| `(AWS::[A-Za-z0-9:]+)` \| "([^"]+)" \|/gm)].map((m) => [m[1]!, m[2]!]));
}

test("deploy.md's rehearsal runs as written: bootstrap, deploy, update and destroy on the emulator, every resource with the template's settings, and only what the template retains left", async () => {
  const blocks = runnableBlocks(await readFile(join(projectRoot, PAGE), 'utf8'), PAGE).filter((b) => b.sequence === 'rehearsal');
  const envFile = join(dir, 'rehearsal.env');
  const at = (pattern: RegExp) => {
    const b = blocks.find((x) => pattern.test(x.script));
    if (!b) throw new Error(`${PAGE}: no rehearsal block matches ${pattern}`);
    return b;
  };
  const [settings, bootstrap, clusters, deploy, update, destroy] = [
    at(/export AWS_ENDPOINT_URL=/),
    at(/cdk bootstrap/),
    at(/> clusters\.json/),
    at(/npm run deploy(?![\s\S]*examples)/),
    at(/npm run deploy[\s\S]*outrigger:examples=true/),
    at(/cdk destroy/),
  ];
  expect(blocks).toEqual([settings, bootstrap, clusters, deploy, update, destroy]);
  // The settings are the endpoint, credentials and region, as for AWS itself; nothing of the emulator's own.
  expect(settings.script.match(/\b[A-Z_]+(?==)/g)).toEqual([
    'AWS_ENDPOINT_URL',
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_REGION',
  ]);

  await runBlock(settings, envFile);
  // Step 1 as the page has it, before clusters.json exists.
  expect(await readFile(join(dir, 'clusters.json'), 'utf8').catch(() => 'absent')).toBe('absent');
  await runBlock(bootstrap, envFile);
  await runBlock(clusters, envFile);
  // What step 2 writes for an EKS cluster prod in the page's region: the same fields.
  const written = JSON.parse(await readFile(join(dir, 'clusters.json'), 'utf8')) as Array<{ access: Record<string, unknown> }>;
  const step2 = (await deployedClustersJson({ caData: 'x' })) as Array<{ access: Record<string, unknown> }>;
  const shape = (cs: Array<{ access: Record<string, unknown> }>) =>
    cs.map((c) => [Object.keys(c).sort(), Object.keys(c.access).sort(), c.access.kind, c.access.region]);
  expect(shape(written)).toEqual(shape(step2));

  await runBlock(deploy, envFile);
  const outputs = JSON.parse(await readFile(join(dir, 'cdk-outputs.json'), 'utf8')) as { Outrigger: Record<string, string> };
  expect(outputs.Outrigger.ProdEventsQueueUrl).toMatch(new RegExp(`/${EMULATOR_ACCOUNT}/Outrigger-prod-events\\.fifo$`));
  const deployed = await differences(await stackTemplate());
  expect(deployed.wrong).toEqual([]);
  process.stderr.write(`deployed and read back: ${JSON.stringify(deployed.found)}\n`);
  expect(deployed.found['AWS::Lambda::Function']).toBe(10);

  await runBlock(update, envFile);
  const template = await stackTemplate();
  const updated = await differences(template);
  expect(updated.wrong).toEqual([]);
  expect(updated.found['AWS::Lambda::Function']).toBe(12);
  // Each type moto's own CloudFormation would skip is on the page, in moto's words.
  const copy = join(dir, 'deployed.template.json');
  await copyFile(join(dir, 'cdk.out', 'Outrigger.template.json'), copy);
  const skipped = await typesMotoSkips(copy);
  skipped.delete('AWS::CDK::Metadata');
  expect(await typesListed()).toEqual(skipped);

  const before = await leftOver();
  await runBlock(destroy, envFile);
  const after = await leftOver();
  // What the template retains stays (the table and the log groups: DeletionPolicy Retain); nothing else.
  const retained = Object.values(template.Resources).filter((r) => r.DeletionPolicy === 'Retain');
  expect(retained.map((r) => r.Type).sort()).toEqual(['AWS::DynamoDB::GlobalTable', ...Array<string>(12).fill('AWS::Logs::LogGroup')]);
  expect(before.tables).toHaveLength(1);
  expect(before.logGroups).toHaveLength(12);
  expect(after).toEqual({
    queues: [],
    functions: [],
    mappings: [],
    rules: [],
    alarms: [],
    roles: [],
    secrets: [],
    tables: before.tables,
    logGroups: before.logGroups,
  });
}, 600_000);
