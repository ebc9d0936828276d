// The Outrigger construct: a whole deployment in one stack. The state table, per cluster its queues, alarms,
// forwarder role and (EKS in the stack's region) access entries and Pod Identity association (infra/cluster.ts),
// every function in functions/index.ts with only the permissions it uses, the ingest Function URL, the schedules,
// and a dashboard. The repository's own app (infra/app.ts) is one use of it; docs/getting-started/deploy.md has another.
import {
  ArnFormat,
  Aws,
  CfnCondition,
  CustomResource,
  Duration,
  Fn,
  IgnoreMode,
  RemovalPolicy,
  Stack,
  Stage,
  Validations,
} from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as cr from 'aws-cdk-lib/custom-resources';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { functions } from '../functions/index.ts';
import { sendTargets, type FunctionSpec } from '../functions/spec.ts';
import { maxConcurrency, type ClusterConfig } from '../shared/clusters.ts';
import { projectRoot } from '../local/paths.ts';
import { TABLE } from '../shared/state/table.ts';
import { acknowledgeWildcard } from './acknowledge.ts';
import { bundled, RUNTIME } from './bundling.ts';
import { OutriggerCluster } from './cluster.ts';
import { deployableClusters } from './config.ts';
import type { ImageIndexProperties } from './image-index/handler.ts';
import { indexTag, parsePlatform, platformText } from './image-index/manifests.ts';
import { addDashboard, Alarms, deadLetterMetric } from './monitoring.ts';
import { output, pascal } from './names.ts';
import { deadLetterQueue, fifoName, queueUrlPrefix, tlsOnly } from './queues.ts';

/** The forwarder image's platforms unless forwarderImage.platforms says otherwise: x86 and Graviton nodes. */
export const FORWARDER_PLATFORMS: readonly ecrAssets.Platform[] = [ecrAssets.Platform.LINUX_AMD64, ecrAssets.Platform.LINUX_ARM64];

/** EventBridge's hard limit on one rule's targets. */
export const TARGETS_PER_RULE = 5;
/** The cluster configuration's file in the layer every function has; Lambda extracts layers under /opt. */
export const CLUSTERS_FILE_IN_LAYER = 'outrigger/clusters.json';
/** Where the forwarder's kustomize base (deploy/forwarder/base) runs it: its Pod Identity association's default. */
export const DEFAULT_FORWARDER = { namespace: 'outrigger-system', serviceAccount: 'outrigger-forwarder' } as const;
/** The example hooks: function name -> export of examples/snapshot-schedule/hooks.ts. */
export const EXAMPLE_HOOKS: Record<string, string> = {
  'outrigger-snapshot-schedule-map': 'map',
  'outrigger-snapshot-schedule-tombstone': 'tombstone',
};

/**
 * Every variable the functions' code reads (shared/lambda/environment.ts, shared/lambda/dead-letter.ts,
 * shared/lambda/logger.ts, functions/map/environment.ts), declared in every function, empty where the deployment
 * does not use it (an empty value is unset to every reader): `sam local invoke --env-vars` overrides only
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
  'OUTRIGGER_LOG_FORMAT',
  'POWERTOOLS_LOG_LEVEL',
] as const;

export interface OutriggerProps {
  /**
   * The clusters this deployment serves, in the shape of OUTRIGGER_CLUSTERS (shared/clusters.ts): EKS clusters
   * (reached with the functions' IAM roles) or clusters whose token is in Secrets Manager. Checked at synth: an
   * unknown field, a placeholder or another kind of access fails with the cluster's id and the field.
   */
  clusters: readonly ClusterConfig[];
  /** Lambda functions MapControllers name as hooks (by name, in this account and region, or the function): the map function may invoke these only. */
  mapHookFunctions?: ReadonlyArray<string | lambda.IFunction>;
  /** Also deploy the SnapshotSchedule example's hooks (examples/snapshot-schedule), under the names its MapController uses. */
  examples?: boolean;
  /** The forwarder's namespace and service account in each cluster (default DEFAULT_FORWARDER): its Pod Identity association, and who may assume its role. */
  forwarder?: { namespace?: string; serviceAccount?: string };
  /**
   * Runs the functions in this VPC (a private cluster endpoint, in-cluster webhook Services). The subnets need a
   * way to SQS, DynamoDB, STS, Secrets Manager, CloudWatch and Lambda (a NAT gateway or VPC endpoints) and to the
   * clusters' API servers (each cluster's security group must allow the functions' group on 443).
   */
  vpc?: ec2.IVpc;
  /** Where in `vpc` (default: its private subnets with egress). */
  vpcSubnets?: ec2.SubnetSelection;
  /** The functions' security groups in `vpc` (default: one group for all, outbound open, no inbound). */
  securityGroups?: ec2.ISecurityGroup[];
  /** Every alarm notifies this topic (default: a topic of the construct's own). */
  alarmTopic?: sns.ITopic;
  /** How long the functions' logs are kept (default three months). */
  logRetention?: logs.RetentionDays;
  /** Each function's memory in MB (default 512). */
  memorySize?: number;
  /**
   * X-Ray tracing (default off). Active tracing grants each function xray:PutTraceSegments and
   * xray:PutTelemetryRecords on `*`: X-Ray has no resource-level permissions.
   */
  tracing?: lambda.Tracing;
  /** What deleting the stack does with the state table and the logs (default RETAIN). */
  removalPolicy?: RemovalPolicy;
  /**
   * Builds the forwarder's image (forwarder/Dockerfile) as container image assets in the CDK's ECR repository,
   * one per platform (default linux/amd64 and linux/arm64, so x86 and Graviton nodes run it alike), and outputs
   * the image as ForwarderImageUri: with two platforms or more, the digest of an index over them, which a custom
   * resource writes into the repository (infra/image-index). `cdk deploy` then needs Docker with BuildKit (the
   * default since Docker 23), and no emulator: the bundle is built on the machine's own platform and only copied
   * into each platform's Node image. Synth needs no Docker. Default: no image; the forwarder's overlay names one
   * (docs/getting-started/deploy.md).
   */
  forwarderImage?: { platforms?: ecrAssets.Platform[] };
}

export class Outrigger extends Construct {
  readonly table: dynamodb.TableV2;
  readonly functions = new Map<string, NodejsFunction>();
  /** Per cluster id, its queues, forwarder role and access (infra/cluster.ts). */
  readonly clusters = new Map<string, OutriggerCluster>();
  /** Where the ingest function puts requests it refuses (they may name no cluster, or one not served). */
  readonly ingestDeadLetter: sqs.Queue;
  /** The cluster configuration, as a file every function reads (OUTRIGGER_CLUSTERS_FILE). */
  readonly clustersLayer: lambda.LayerVersion;
  readonly ingestUrl: lambda.FunctionUrl;
  readonly alarmTopic: sns.ITopic;
  /** The functions' security groups, when they run in a VPC. */
  readonly securityGroups?: ec2.ISecurityGroup[];
  private readonly alarms: Alarms;
  private readonly props: OutriggerProps;
  private readonly clusterSecrets: string[];
  private readonly migratorSecrets: string[];

  constructor(scope: Construct, id: string, props: OutriggerProps) {
    super(scope, id);
    this.props = props;
    const clusters = deployableClusters(props.clusters);
    // Clusters outside EKS: their tokens' secrets, readable by the functions that talk to clusters (and no other).
    this.clusterSecrets = [...new Set(clusters.flatMap((c) => (c.access.kind === 'secret' ? [c.access.secretArn] : [])))];
    // The migrator's tokens (list and patch on everything): the migrator function alone reads them, and no other.
    this.migratorSecrets = [
      ...new Set(
        clusters.flatMap((c) => (c.access.kind === 'secret' && c.access.migratorTokenSecretArn ? [c.access.migratorTokenSecretArn] : [])),
      ),
    ];
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;

    this.table = new dynamodb.TableV2(this, 'State', {
      partitionKey: { name: TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: TABLE.sortKey, type: dynamodb.AttributeType.STRING },
      timeToLiveAttribute: TABLE.timeToLiveAttribute,
      billing: dynamodb.Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy,
    });

    this.alarmTopic = props.alarmTopic ?? new sns.Topic(this, 'Alarms', { displayName: 'Outrigger alarms', enforceSSL: true });
    this.alarms = new Alarms(this.alarmTopic);

    const eventConsumers = functions.filter((f) => f.events);
    // SQS consumers compete for messages: a second consumer of watch events would need a queue of its own.
    if (eventConsumers.length !== 1)
      throw new Error(`exactly one function consumes watch events, not ${eventConsumers.map((f) => f.name).join(', ') || 'none'}`);
    const syncTargets = functions.flatMap((spec) => (spec.sync ? [{ target: spec.sync.target, timeoutSeconds: spec.timeoutSeconds }] : []));
    const forwarder = { ...DEFAULT_FORWARDER, ...props.forwarder };
    const names = new Map<string, string>();
    const regionConditions = new Map<string, CfnCondition>();
    const inRegion = (region: string) => {
      let condition = regionConditions.get(region);
      if (!condition)
        regionConditions.set(
          region,
          (condition = new CfnCondition(this, `InRegion${pascal(region).replace(/[^A-Za-z0-9]/g, '')}`, {
            expression: Fn.conditionEquals(Aws.REGION, region),
          })),
        );
      return condition;
    };
    for (const c of clusters) {
      // Construct ids and output names are alphanumeric: `a-1` and `a1` would both be A1.
      const name = pascal(c.id).replace(/[^A-Za-z0-9]/g, '');
      const same = [...names].find(([, other]) => other === name);
      if (same)
        throw new Error(`clusters ${same[0]} and ${c.id} would share the name ${name} in the stack's resources and outputs: rename one`);
      names.set(c.id, name);
      this.clusters.set(
        c.id,
        new OutriggerCluster(this, name, {
          config: c,
          eventsConsumerTimeoutSeconds: eventConsumers[0]!.timeoutSeconds,
          syncTargets,
          alarms: this.alarms,
          forwarder,
          inRegion,
        }),
      );
    }
    this.ingestDeadLetter = deadLetterQueue(this, 'IngestDeadLetter', fifoName(this, 'ingest-dlq.fifo'));
    tlsOnly(this, 'IngestDeadLetterTlsOnly', [this.ingestDeadLetter]);
    Validations.of(this.ingestDeadLetter).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'It is a dead-letter queue: the ingest function puts the requests it refuses there, and nothing consumes it but an operator',
    });

    if (props.vpc) {
      this.securityGroups = props.securityGroups ?? [
        new ec2.SecurityGroup(this, 'FunctionsSecurityGroup', {
          vpc: props.vpc,
          description: "Outrigger functions: outbound to the clusters' API servers and AWS APIs; nothing inbound",
          allowAllOutbound: true,
        }),
      ];
    }
    this.clustersLayer = this.addClustersLayer(clusters);
    for (const spec of functions) this.addFunction(spec, removalPolicy);
    const ingest = functions.find((f) => f.functionUrl);
    if (!ingest) throw new Error('no function serves the ingest Function URL');
    this.ingestUrl = this.functions.get(ingest.name)!.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.AWS_IAM });

    // Cluster access: every function but the ingest (which talks to SQS only) reads and writes clusters; the
    // migrator alone also as outrigger:migrators. The forwarder watches with its service account, not IAM.
    const clusterRoles = functions
      .filter((f) => f.clusterAccess !== 'none')
      .map((f) => ({ name: f.name, role: this.functions.get(f.name)!.role!, migrator: f.clusterAccess === 'migrator' }));
    for (const cluster of this.clusters.values()) cluster.grantAccess(clusterRoles);
    if ([...this.clusters.values()].some((c) => c.access !== 'stack')) {
      // For access entries made by hand (another region, or a region known only at deploy) and a token's identity.
      const controllers = clusterRoles.filter((r) => !r.migrator).map((r) => r.role.roleArn);
      output(
        this,
        'ControllerRoleArns',
        `The roles to map to ${'outrigger:controllers'} in a cluster the stack gives no access entries (space-separated)`,
        Fn.join(' ', controllers),
      );
      const migrator = clusterRoles.find((r) => r.migrator);
      if (migrator)
        output(
          this,
          'MigratorRoleArn',
          'The role to map to outrigger:controllers and outrigger:migrators in a cluster the stack gives no access entries',
          migrator.role.roleArn,
        );
    }

    this.alarms.add(
      this,
      'IngestDeadLetters',
      'The ingest dead-letter queue holds refused requests: read their reason attribute, fix the sender',
      deadLetterMetric(this.ingestDeadLetter),
      1,
      cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    );
    output(
      this,
      'IngestDeadLetterQueueUrl',
      "The ingest function's dead-letter queue: the requests it refused, each with its reason",
      this.ingestDeadLetter.queueUrl,
    );
    output(
      this,
      'IngestUrl',
      "The ingest function's URL: requests must be SigV4-signed (service lambda); Knative events need ?cluster=<id>",
      this.ingestUrl.url,
    );
    output(
      this,
      'IngestFunctionArn',
      "What a signing proxy's role needs lambda:InvokeFunctionUrl and lambda:InvokeFunction on",
      this.functions.get(ingest.name)!.functionArn,
    );
    output(this, 'AlarmTopicArn', 'Every alarm notifies this topic: subscribe to it', this.alarmTopic.topicArn);
    output(
      this,
      'QueueUrlPrefix',
      "What each sync queue's URL starts with (OUTRIGGER_QUEUE_URL_PREFIX): npm run sam-env reads it",
      queueUrlPrefix(this),
    );

    this.addMapHooks();
    if (props.forwarderImage) {
      // The prop before 0.x's multi-platform image: refused by name rather than read as the default's two platforms.
      if ('platform' in props.forwarderImage) throw new Error('forwarderImage.platform is now forwarderImage.platforms: a list');
      this.addForwarderImage(props.forwarderImage.platforms ?? FORWARDER_PLATFORMS);
    }
    addDashboard(this, 'Dashboard', {
      alarms: this.alarms,
      functions: this.functions,
      clusters: new Map([...this.clusters].map(([id, c]) => [id, c.queuePairs()])),
      ingestDeadLetter: this.ingestDeadLetter,
    });
  }

  /** The hooks the map function may invoke, the example's hooks on request, and the webhook signing key. */
  private addMapHooks(): void {
    const stack = Stack.of(this);
    const callers = functions.filter((f) => f.callsHooks);
    if (callers.length !== 1) throw new Error(`one function calls MapController hooks, not ${callers.length}`);
    const map = this.functions.get(callers[0]!.name)!;
    const arns: string[] = [];
    const byName = (name: string) => [
      stack.formatArn({ service: 'lambda', resource: 'function', resourceName: name, arnFormat: ArnFormat.COLON_RESOURCE_NAME }),
      stack.formatArn({ service: 'lambda', resource: 'function', resourceName: `${name}:*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME }),
    ];
    // A hook may be called through an alias or version (hooks.<x>.lambda.qualifier).
    for (const hook of this.props.mapHookFunctions ?? [])
      arns.push(...(typeof hook === 'string' ? byName(hook) : [hook.functionArn, `${hook.functionArn}:*`]));
    if (this.props.examples) {
      for (const [functionName, handler] of Object.entries(EXAMPLE_HOOKS)) {
        new NodejsFunction(this, pascal(functionName), {
          ...bundled('examples/snapshot-schedule/hooks.ts'),
          ...this.roleAndLogs(pascal(functionName), this.props.removalPolicy ?? RemovalPolicy.RETAIN),
          functionName,
          handler,
          description: `SnapshotSchedule example: the ${handler} hook`,
          timeout: Duration.seconds(10),
          memorySize: 256,
        });
        arns.push(...byName(functionName));
      }
    }
    if (arns.length) {
      map.addToRolePolicy(new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: arns }));
      for (const arn of arns.filter((a) => a.endsWith(':*')))
        acknowledgeWildcard(
          map.role!,
          arn,
          "A hook may be called through one of its versions or aliases (hooks.<x>.lambda.qualifier): the named function's qualifiers, no other function",
        );
    }
    // Webhooks authenticate the map function by the HMAC it signs each request with (docs/reference/hooks.md#the-webhook-contract):
    // the key is generated here, and read by the map function alone; hook authors read it from the output's ARN.
    const hookSecret = new secretsmanager.Secret(this, 'MapHookSigningSecret', {
      description: 'The key the map function signs webhook requests with (X-Outrigger-Signature: sha256=HMAC of "<timestamp>.<body>")',
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
    });
    Validations.of(hookSecret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'An HMAC key every webhook receiver verifies with: rotation on a schedule would break verification until each receiver read the new key, so an operator rotates it with the receivers (docs/reference/hooks.md#the-webhook-contract)',
    });
    map.addEnvironment('OUTRIGGER_HOOK_SECRET_ARN', hookSecret.secretArn);
    map.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [hookSecret.secretArn] }));
    output(this, 'MapHookSigningSecretArn', 'The webhook signing key: verify X-Outrigger-Signature with it', hookSecret.secretArn);
  }

  private addFunction(spec: FunctionSpec, removalPolicy: RemovalPolicy): void {
    const { props } = this;
    const clusters = [...this.clusters.values()];
    const environment: Record<string, string> = Object.fromEntries(FUNCTION_ENVIRONMENT.map((name) => [name, '']));
    const fn = new NodejsFunction(this, pascal(spec.name), {
      ...bundled(spec.entry),
      ...this.roleAndLogs(pascal(spec.name), removalPolicy),
      description: spec.description,
      handler: 'handler',
      memorySize: props.memorySize ?? 512,
      timeout: Duration.seconds(spec.timeoutSeconds),
      layers: [this.clustersLayer],
      ...(props.tracing ? { tracing: props.tracing } : {}),
      ...(props.vpc ? { vpc: props.vpc, vpcSubnets: props.vpcSubnets, securityGroups: this.securityGroups } : {}),
      environment: {
        ...environment,
        OUTRIGGER_CLUSTERS_FILE: `/opt/${CLUSTERS_FILE_IN_LAYER}`,
        OUTRIGGER_TABLE: this.table.tableName,
        NODE_OPTIONS: '--enable-source-maps',
      },
    });
    // `sam local invoke <construct id>`: SAM takes a function's id from aws:cdk:path only when that path has two or
    // three parts, and the construct's functions have four (Outrigger/Default/Router/Resource); this names them.
    (fn.node.defaultChild as lambda.CfnFunction).addMetadata('SamResourceId', pascal(spec.name));
    // The DynamoDB actions its code performs on the table (its declaration's), nothing else.
    if (spec.table?.length) fn.addToRolePolicy(new iam.PolicyStatement({ actions: [...spec.table], resources: [this.table.tableArn] }));
    // As its declaration says it reaches clusters: the migrator only with its own token (Clusters.migratorClient).
    const secrets = { none: [], migrator: this.migratorSecrets, controllers: this.clusterSecrets }[spec.clusterAccess];
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
    // Each sync request goes to its cluster's queue for the target.
    for (const t of sendTargets(spec, functions)) sendTo.push(...clusters.map((c) => c.sync.get(t)!.queue));
    if (spec.functionUrl) {
      fn.addEnvironment('OUTRIGGER_DEAD_LETTER_QUEUE_URL', this.ingestDeadLetter.queueUrl);
      sendTo.push(...clusters.map((c) => c.events.queue), this.ingestDeadLetter);
    }
    if (sendTo.length) {
      // One prefix names every queue: a URL per cluster and target would outgrow Lambda's 4 KB of environment.
      fn.addEnvironment('OUTRIGGER_QUEUE_URL_PREFIX', queueUrlPrefix(this));
      // SendMessageBatch is authorised as sqs:SendMessage; nothing else is needed to send.
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [...new Set(sendTo)].map((q) => q.queueArn) }));
    }
    this.alarms.add(
      this,
      `${pascal(spec.name)}Errors`,
      `${spec.name} failed at least once in 5 minutes`,
      fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
      1,
      cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    );
    if (spec.schedule) this.addSchedule(spec.name, spec.schedule, fn);
    this.functions.set(spec.name, fn);
  }

  /**
   * The forwarder's image: an asset per platform and, for two or more, the index over them that a custom
   * resource writes next to them (docs/operations/forwarder.md#the-forwarders-image), output as ForwarderImageUri.
   */
  private addForwarderImage(platforms: readonly ecrAssets.Platform[]): void {
    if (platforms.length === 0) throw new Error('forwarderImage.platforms: names no platform');
    const names = platforms.map((p) => parsePlatform(p.platform));
    const twice = names.map(platformText).find((p, i, all) => all.indexOf(p) !== i);
    if (twice) throw new Error(`forwarderImage.platforms: names ${twice} twice`);
    const images = platforms.map(
      (platform, i) =>
        new ecrAssets.DockerImageAsset(this, `ForwarderImage${pascal(platformText(names[i]!).replace(/\//g, '-'))}`, {
          directory: projectRoot,
          file: 'forwarder/Dockerfile',
          platform,
          // The build reads these only (see the Dockerfile's COPY lines): staging the whole project would copy
          // node_modules and .cache into every cloud assembly.
          ignoreMode: IgnoreMode.DOCKER,
          exclude: ['*', '!package.json', '!package-lock.json', '!shared', '!functions', '!forwarder'],
        }),
    );
    const what = "The forwarder's image (forwarder/Dockerfile), built by the stack";
    if (images.length === 1) {
      output(this, 'ForwarderImageUri', `${what} for ${platforms[0]!.platform}`, images[0]!.imageUri);
      return;
    }
    const repository = images[0]!.repository;
    const onEvent = new NodejsFunction(this, 'ForwarderImageIndexFunction', {
      ...bundled('infra/image-index/handler.ts'),
      ...this.roleAndLogs('ForwarderImageIndex', RemovalPolicy.DESTROY, true),
      description: "Writes the index over the forwarder image's platforms into the CDK's asset repository (deploy time only)",
      handler: 'handler',
      memorySize: 256,
      timeout: Duration.minutes(2),
    });
    // Reads each platform's manifest and config, and writes the index's manifest: no layer is pushed.
    onEvent.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['ecr:BatchGetImage', 'ecr:GetDownloadUrlForLayer', 'ecr:PutImage'],
        resources: [repository.repositoryArn],
      }),
    );
    onEvent.addToRolePolicy(new iam.PolicyStatement({ actions: ['ecr:GetAuthorizationToken'], resources: ['*'] }));
    Validations.of(onEvent.role!).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'ecr:GetAuthorizationToken, for the registry credential the index is written with, has no resource-level permissions; the repository actions name the asset repository only',
    });
    const framework = this.roleAndLogs('ForwarderImageIndexProvider', RemovalPolicy.DESTROY, true);
    const provider = new cr.Provider(this, 'ForwarderImageIndexProvider', {
      onEventHandler: onEvent,
      frameworkOnEventRole: framework.role,
      logGroup: framework.logGroup,
    });
    acknowledgeWildcard(
      framework.role,
      `${onEvent.functionArn}:*`,
      "The provider framework invokes the index function by any of its versions (the CDK's grantInvoke): that function's, no other's",
    );
    const sources = images.map((image, i) => ({ platform: platformText(names[i]!), tag: image.imageTag }));
    const properties: ImageIndexProperties = {
      RepositoryUri: repository.repositoryUri,
      Tag: indexTag(sources),
      Images: sources.map((source) => ({ Platform: source.platform, Tag: source.tag })),
    };
    const index = new CustomResource(this, 'ForwarderImageIndex', {
      serviceToken: provider.serviceToken,
      resourceType: 'Custom::OutriggerImageIndex',
      properties,
    });
    output(
      this,
      'ForwarderImageUri',
      `${what} for ${names.map(platformText).join(' and ')}: its index, by digest`,
      index.getAttString('ImageUri'),
    );
  }

  /**
   * A function's log group and execution role. The role may write to that log group only: Lambda's
   * AWSLambdaBasicExecutionRole would let it create and write any log group of the account. In a VPC it also
   * gets AWSLambdaVPCAccessExecutionRole, the network-interface actions Lambda performs with it (EC2's
   * Describe actions have no resource-level permissions). `deployTime`: a function that runs only while the
   * stack deploys (the image index), outside the VPC and untraced whatever the props say, since it calls no
   * cluster.
   */
  private roleAndLogs(id: string, removalPolicy: RemovalPolicy, deployTime = false): { role: iam.Role; logGroup: logs.LogGroup } {
    const logGroup = new logs.LogGroup(this, `${id}Logs`, {
      retention: this.props.logRetention ?? logs.RetentionDays.THREE_MONTHS,
      removalPolicy,
    });
    const role = new iam.Role(this, `${id}ServiceRole`, { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [logGroup.logGroupArn] }),
    );
    if (this.props.vpc && !deployTime) {
      role.addManagedPolicy(iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaVPCAccessExecutionRole'));
      Validations.of(role).acknowledge({
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
        reason:
          "Lambda creates, describes and deletes the function's network interfaces in the VPC with its role; EC2 allows no narrower resource for the Describe actions",
      });
    }
    if (this.props.tracing === lambda.Tracing.ACTIVE && !deployTime) {
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
  private addClustersLayer(clusters: ClusterConfig[]): lambda.LayerVersion {
    const dir = join(Stage.of(this)!.assetOutdir, `${Stack.of(this).artifactId}-${this.node.addr}-clusters-layer`);
    mkdirSync(join(dir, dirname(CLUSTERS_FILE_IN_LAYER)), { recursive: true, mode: 0o755 });
    writeFileSync(join(dir, CLUSTERS_FILE_IN_LAYER), JSON.stringify(clusters), { mode: 0o644 });
    return new lambda.LayerVersion(this, 'Clusters', {
      code: lambda.Code.fromAsset(dir),
      compatibleRuntimes: [RUNTIME],
      compatibleArchitectures: [lambda.Architecture.ARM_64],
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
  private addSchedule(name: string, schedule: NonNullable<FunctionSpec['schedule']>, fn: lambda.IFunction): void {
    const rules: Array<{ scope: Construct; id: string; about: string; inputs: Array<Record<string, string> | undefined> }> =
      schedule.perReporter
        ? [...this.clusters.values()]
            .filter((c) => c.config.storage?.enabled !== false)
            .flatMap((c) => {
              const reporters = (c.config.storage?.reporters ?? [{ id: 'apiserver' }]).map((r) => ({
                cluster: c.config.id,
                reporter: r.id,
              }));
              const split = reporters.length > TARGETS_PER_RULE;
              return chunks(reporters, TARGETS_PER_RULE).map((inputs, i) => ({
                scope: c,
                id: `${pascal(name)}Schedule${i ? i + 1 : ''}`,
                about: ` for cluster ${c.config.id}${split ? ` (reporters ${i * TARGETS_PER_RULE + 1}-${i * TARGETS_PER_RULE + inputs.length} of ${reporters.length})` : ''}`,
                inputs,
              }));
            })
        : [{ scope: this, id: `${pascal(name)}Schedule`, about: '', inputs: [undefined] }];
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
}

/** `items` in runs of at most `size`, in order. */
function chunks<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}
