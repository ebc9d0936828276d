// Outrigger's Lambda functions: each one functions/index.ts declares, with only the permissions it uses, its log
// group and role, the layer holding the cluster configuration, its schedules, and its access to the clusters.
import type { RemovalPolicy } from 'aws-cdk-lib';
import { Duration, Fn, Stack, Stage, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { functions } from '../functions/index.ts';
import { sendTargets, type FunctionSpec } from '../functions/spec.ts';
import { maxConcurrency, storagePlan, type ClusterConfig } from '../shared/clusters.ts';
import { bundled, DEFAULT_ARCHITECTURE, RUNTIME } from './bundling.ts';
import type { OutriggerCluster } from './cluster.ts';
import type { Alarms } from './monitoring.ts';
import { output, pascal } from './names.ts';
import { queueUrlPrefix } from './queues.ts';

/** Each function's memory unless the deployment's props say otherwise (the cost estimate reads it: bench/cost.ts). */
export const DEFAULT_MEMORY_MB = 512;
/** EventBridge's hard limit on one rule's targets. */
export const TARGETS_PER_RULE = 5;
/** The cluster configuration's file in the layer every function has; Lambda extracts layers under /opt. */
export const CLUSTERS_FILE_IN_LAYER = 'outrigger/clusters.json';

/**
 * Every variable the functions' code reads (shared/lambda/environment.ts, shared/lambda/dead-letter.ts,
 * shared/lambda/logger.ts, functions/metacontroller/environment.ts, and the AWS SDK's Secrets Manager endpoint that
 * shared/kube/secret-token.ts's client reads), declared in every function, empty where the deployment does not use
 * it (an empty value is unset to every reader, the SDK included): `sam local invoke --env-vars` overrides only
 * variables the template declares (docs/contributing/invoking-locally.md#with-docker-sam).
 */
export const FUNCTION_ENVIRONMENT = [
  'OUTRIGGER_CLUSTERS',
  'OUTRIGGER_CLUSTERS_FILE',
  'OUTRIGGER_TABLE',
  'OUTRIGGER_DYNAMODB_ENDPOINT',
  'OUTRIGGER_QUEUE_URL_PREFIX',
  'OUTRIGGER_DEAD_LETTER_QUEUE_URL',
  'OUTRIGGER_DEAD_LETTER_FILE',
  'OUTRIGGER_HOOK_SECRET_ARN',
  'OUTRIGGER_HOOK_SECRET_FILE',
  'OUTRIGGER_LAMBDA_ENDPOINT',
  'OUTRIGGER_WEBHOOK_ALLOW',
  'OUTRIGGER_HOOK_BINDINGS',
  'OUTRIGGER_LOG_FORMAT',
  'OUTRIGGER_FORWARDER_NAMESPACE',
  'POWERTOOLS_LOG_LEVEL',
  'AWS_ENDPOINT_URL_SECRETS_MANAGER',
] as const;

/** What the deployment's props (OutriggerProps) say of every function, with its security groups resolved. */
export interface FunctionSettings {
  logRetention?: logs.RetentionDays | undefined;
  memorySize?: number | undefined;
  tracing?: lambda.Tracing | undefined;
  vpc?: ec2.IVpc | undefined;
  vpcSubnets?: ec2.SubnetSelection | undefined;
  securityGroups?: ec2.ISecurityGroup[] | undefined;
  architecture?: lambda.Architecture | undefined;
}

/** What each function is built with. */
export interface FunctionDeps {
  settings: FunctionSettings;
  removalPolicy: RemovalPolicy;
  table: dynamodb.TableV2;
  clustersLayer: lambda.LayerVersion;
  clusters: readonly OutriggerCluster[];
  alarms: Alarms;
  /** Where the ingest function puts the requests it refuses. */
  ingestDeadLetter: sqs.Queue;
  /** The ARNs of the secrets holding the clusters' tokens: the controllers', and the migrator's own. */
  secrets: TokenSecrets;
}

export interface TokenSecrets {
  controllers: readonly string[];
  migrator: readonly string[];
}

/** The secrets of clusters outside EKS, by who may read them. */
export function tokenSecrets(clusters: readonly ClusterConfig[]): TokenSecrets {
  return {
    // Clusters outside EKS: their tokens' secrets, readable by the functions that talk to clusters (and no other).
    controllers: [...new Set(clusters.flatMap((c) => (c.access.kind === 'secret' ? [c.access.secretArn] : [])))],
    // The migrator's tokens (list and patch on everything): the migrator function alone reads them, and no other.
    migrator: [
      ...new Set(
        clusters.flatMap((c) => (c.access.kind === 'secret' && c.access.migratorTokenSecretArn ? [c.access.migratorTokenSecretArn] : [])),
      ),
    ],
  };
}

export function addFunction(scope: Construct, spec: FunctionSpec, deps: FunctionDeps): NodejsFunction {
  const { settings, clusters } = deps;
  const environment: Record<string, string> = Object.fromEntries(FUNCTION_ENVIRONMENT.map((name) => [name, '']));
  const fn = new NodejsFunction(scope, pascal(spec.name), {
    ...bundled(spec.entry, settings.architecture),
    ...roleAndLogs(scope, settings, pascal(spec.name), deps.removalPolicy),
    description: spec.description,
    handler: 'handler',
    memorySize: settings.memorySize ?? DEFAULT_MEMORY_MB,
    timeout: Duration.seconds(spec.timeoutSeconds),
    layers: [deps.clustersLayer],
    ...(settings.tracing ? { tracing: settings.tracing } : {}),
    ...(settings.vpc ? { vpc: settings.vpc, vpcSubnets: settings.vpcSubnets, securityGroups: settings.securityGroups } : {}),
    environment: {
      ...environment,
      OUTRIGGER_CLUSTERS_FILE: `/opt/${CLUSTERS_FILE_IN_LAYER}`,
      OUTRIGGER_TABLE: deps.table.tableName,
      NODE_OPTIONS: '--enable-source-maps',
    },
  });
  // `sam local invoke <construct id>`: SAM takes a function's id from aws:cdk:path only when that path has two or
  // three parts, and the construct's functions have four (Outrigger/Default/Router/Resource); this names them.
  (fn.node.defaultChild as lambda.CfnFunction).addMetadata('SamResourceId', pascal(spec.name));
  // The DynamoDB actions its code performs on the table (its declaration's), nothing else.
  if (spec.table?.length) fn.addToRolePolicy(new iam.PolicyStatement({ actions: [...spec.table], resources: [deps.table.tableArn] }));
  // As its declaration says it reaches clusters: the migrator only with its own token (Clusters.migratorClient).
  const secrets = { none: [], migrator: deps.secrets.migrator, controllers: deps.secrets.controllers }[spec.clusterAccess];
  if (secrets.length) {
    // A secret's ARN in the configuration may lack the random suffix Secrets Manager appends; the grant allows it.
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: secrets.map((a) => (/-[A-Za-z0-9]{6}$/.test(a) ? a : `${a}-??????`)),
      }),
    );
  }
  // What it consumes: its queue of each cluster, in batches it may partly fail, through one event source
  // mapping per queue held to the cluster's maxConcurrency (Lambda counts it per mapping, for FIFO queues too),
  // so one cluster's backlog cannot take the function's concurrency from the others. What can never be
  // processed goes to the dead-letter queue beside its queue at once (with a reason), what keeps failing
  // after the queue's maximum receive count.
  const sendTo: sqs.Queue[] = [];
  for (const c of clusters) {
    const input = spec.events ? c.events : spec.sync ? c.sync.get(spec.sync.target) : undefined;
    if (!input) continue;
    fn.addEventSource(
      new SqsEventSource(input.queue, { batchSize: 10, reportBatchItemFailures: true, maxConcurrency: maxConcurrency(c.config) }),
    );
    sendTo.push(input.deadLetter);
  }
  // Each sync request goes to its cluster's queue for the target, where the target's controller runs.
  for (const t of sendTargets(spec, functions)) sendTo.push(...clusters.flatMap((c) => c.sync.get(t)?.queue ?? []));
  if (spec.functionUrl) {
    fn.addEnvironment('OUTRIGGER_DEAD_LETTER_QUEUE_URL', deps.ingestDeadLetter.queueUrl);
    sendTo.push(...clusters.map((c) => c.events.queue), deps.ingestDeadLetter);
  }
  if (sendTo.length) {
    // One prefix names every queue: a URL per cluster and target would outgrow Lambda's 4 KB of environment.
    fn.addEnvironment('OUTRIGGER_QUEUE_URL_PREFIX', queueUrlPrefix(scope));
    // SendMessageBatch is authorised as sqs:SendMessage; nothing else is needed to send.
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [...new Set(sendTo)].map((q) => q.queueArn) }));
  }
  deps.alarms.add(
    scope,
    `${pascal(spec.name)}Errors`,
    `${spec.name} failed at least once in 5 minutes`,
    fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
    1,
    cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
  );
  if (spec.schedule) addSchedule(scope, clusters, spec.name, spec.schedule, fn);
  return fn;
}

/**
 * Cluster access: every function but the ingest (which talks to SQS only) reads and writes clusters; the
 * migrator alone also as outrigger:migrators. The forwarder watches with its service account, not IAM.
 */
export function grantClusterAccess(
  scope: Construct,
  fns: ReadonlyMap<string, NodejsFunction>,
  clusters: ReadonlyMap<string, OutriggerCluster>,
): void {
  const clusterRoles = functions
    .filter((f) => f.clusterAccess !== 'none')
    .map((f) => ({ name: f.name, role: fns.get(f.name)!.role!, migrator: f.clusterAccess === 'migrator' }));
  for (const cluster of clusters.values()) cluster.grantAccess(clusterRoles);
  if ([...clusters.values()].some((c) => c.access !== 'stack')) {
    // For access entries made by hand (another region, or a region known only at deploy) and a token's identity.
    const controllers = clusterRoles.filter((r) => !r.migrator).map((r) => r.role.roleArn);
    output(
      scope,
      'ControllerRoleArns',
      `The roles to map to ${'outrigger:controllers'} in a cluster the stack gives no access entries (space-separated)`,
      Fn.join(' ', controllers),
    );
    const migrator = clusterRoles.find((r) => r.migrator);
    if (migrator)
      output(
        scope,
        'MigratorRoleArn',
        'The role to map to outrigger:controllers and outrigger:migrators in a cluster the stack gives no access entries',
        migrator.role.roleArn,
      );
  }
}

/**
 * A function's log group and execution role. The role may write to that log group only: Lambda's
 * AWSLambdaBasicExecutionRole would let it create and write any log group of the account. In a VPC it also
 * gets AWSLambdaVPCAccessExecutionRole, the network-interface actions Lambda performs with it (EC2's
 * Describe actions have no resource-level permissions). `deployTime`: a function that runs only while the
 * stack deploys (the image index), outside the VPC and untraced whatever the props say, since it calls no
 * cluster.
 */
export function roleAndLogs(
  scope: Construct,
  settings: FunctionSettings,
  id: string,
  removalPolicy: RemovalPolicy,
  deployTime = false,
): { role: iam.Role; logGroup: logs.LogGroup } {
  const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
    retention: settings.logRetention ?? logs.RetentionDays.THREE_MONTHS,
    removalPolicy,
  });
  const role = new iam.Role(scope, `${id}ServiceRole`, { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [logGroup.logGroupArn] }),
  );
  if (settings.vpc && !deployTime) {
    role.addManagedPolicy(iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaVPCAccessExecutionRole'));
    Validations.of(role).acknowledge({
      id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
      reason:
        "Lambda creates, describes and deletes the function's network interfaces in the VPC with its role; EC2 allows no narrower resource for the Describe actions",
    });
  }
  if (settings.tracing === lambda.Tracing.ACTIVE && !deployTime) {
    Validations.of(role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'X-Ray tracing (asked for by the tracing prop): xray:PutTraceSegments and PutTelemetryRecords have no resource-level permissions',
    });
  }
  return { role, logGroup };
}

/**
 * The cluster configuration as a file in a layer that every function has: in the environment it would count
 * against Lambda's 4 KB there, which two or three EKS clusters' CA data fill. A layer rather than a file in
 * each bundle: the bundles stay the same whatever the clusters, and a change of clusters publishes one layer
 * version. Its directory is written beside the cloud assembly (the layer's asset is staged from it, or with
 * `cdk synth --no-staging` read from it by `sam local invoke`).
 */
export function addClustersLayer(
  scope: Construct,
  clusters: ClusterConfig[],
  architecture: lambda.Architecture = DEFAULT_ARCHITECTURE,
): lambda.LayerVersion {
  const dir = join(Stage.of(scope)!.assetOutdir, `${Stack.of(scope).artifactId}-${scope.node.addr}-clusters-layer`);
  mkdirSync(join(dir, dirname(CLUSTERS_FILE_IN_LAYER)), { recursive: true, mode: 0o755 });
  writeFileSync(join(dir, CLUSTERS_FILE_IN_LAYER), JSON.stringify(clusters), { mode: 0o644 });
  return new lambda.LayerVersion(scope, 'Clusters', {
    code: lambda.Code.fromAsset(dir),
    compatibleRuntimes: [RUNTIME],
    compatibleArchitectures: [architecture],
    description: `Outrigger's cluster configuration: /opt/${CLUSTERS_FILE_IN_LAYER}`,
  });
}

/**
 * A scheduled function's EventBridge rules. A per-reporter function (the storage poll) gets a rule per
 * cluster whose storage migration is on (in that cluster's construct), with a target per reporter whose input
 * names the (cluster, reporter): one invocation each per period, and a rule's targets never outgrow
 * TARGETS_PER_RULE however many clusters there are; a cluster with more reporters than that gets a further rule
 * for each TARGETS_PER_RULE more. Any other function gets one rule and one target, and covers every cluster in
 * each invocation.
 */
function addSchedule(
  scope: Construct,
  clusters: readonly OutriggerCluster[],
  name: string,
  schedule: NonNullable<FunctionSpec['schedule']>,
  fn: lambda.IFunction,
): void {
  const rules: Array<{ scope: Construct; id: string; about: string; inputs: Array<Record<string, string> | undefined> }> =
    schedule.perReporter
      ? clusters
          .filter((c) => c.config.storage?.enabled !== false)
          .flatMap((c) => {
            const reporters = storagePlan(c.config).reporters.map((reporter) => ({ cluster: c.config.id, reporter }));
            const split = reporters.length > TARGETS_PER_RULE;
            return chunks(reporters, TARGETS_PER_RULE).map((inputs, i) => ({
              scope: c,
              id: `${pascal(name)}Schedule${i ? i + 1 : ''}`,
              about: ` for cluster ${c.config.id}${split ? ` (reporters ${i * TARGETS_PER_RULE + 1}-${i * TARGETS_PER_RULE + inputs.length} of ${reporters.length})` : ''}`,
              inputs,
            }));
          })
      : [{ scope, id: `${pascal(name)}Schedule`, about: '', inputs: [undefined] }];
  for (const rule of rules) {
    new events.Rule(rule.scope, rule.id, {
      description: `Runs ${name}${rule.about} every ${schedule.everyMinutes} minute(s)`,
      schedule: events.Schedule.rate(Duration.minutes(schedule.everyMinutes)),
      targets: rule.inputs.map(
        (input) =>
          new targets.LambdaFunction(fn, { retryAttempts: 0, ...(input ? { event: events.RuleTargetInput.fromObject(input) } : {}) }),
      ),
    });
  }
}

/** `items` in runs of at most `size`, in order. */
function chunks<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}
