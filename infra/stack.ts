// The Outrigger stack: the state table, the queues between forwarders and functions (one set per cluster, each
// FIFO, each with a dead-letter queue), every function in functions/index.ts with only the permissions it uses,
// the ingest Function URL, each cluster's in-cluster forwarder role, and alarms on a dashboard. A new handler
// adds its function to the registry and its table actions here; queues and their grants follow from the
// registry.
import { ArnFormat, AssetStaging, CfnOutput, Duration, RemovalPolicy, Stack, Stage, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { functions } from '../functions/index.ts';
import { sendTargets, type FunctionSpec } from '../functions/spec.ts';
import { projectRoot } from '../local/paths.ts';
import { maxConcurrency, parseClusters, type ClusterConfig } from '../shared/clusters.ts';
import { METRICS_NAMESPACE, METRICS_SERVICE } from '../shared/lambda/metrics.ts';
import { EVENTS_QUEUE, MAX_QUEUE_NAME_LENGTH, queueName } from '../shared/lambda/queues.ts';
import { TABLE } from '../shared/state/table.ts';

export const RUNTIME = lambda.Runtime.NODEJS_24_X;

export interface OutriggerStackProps extends StackProps {
  /** The clusters this deployment serves (no secrets: EKS clusters are reached with IAM tokens). */
  clusters: ClusterConfig[];
  /** Lambda functions (names, in this account and region) that MapControllers name as hooks: the map function may invoke these only. */
  mapHookFunctions?: string[];
  /** Also deploy the SnapshotSchedule example's hooks (examples/snapshot-schedule), under the names its MapController uses. */
  examples?: boolean;
  /**
   * Narrows who may assume the forwarder's role through EKS Pod Identity (its session tags): the forwarder's
   * namespace and service account. Without them, any pod of a configured cluster with a Pod Identity
   * association to the role may.
   */
  forwarder?: { namespace?: string; serviceAccount?: string };
}

/** A FIFO queue and the dead-letter queue beside it. */
export interface QueuePair {
  queue: sqs.Queue;
  deadLetter: sqs.Queue;
}

/**
 * How often SQS redelivers a message before it moves it to the dead-letter queue. A failed message comes back
 * after 2 s, doubling up to 10 minutes (shared/lambda/retry.ts), as a controller's workqueue retries: 12 receives
 * give a failing cause about 37 minutes to clear before the message is given up.
 */
export const MAX_RECEIVE_COUNT = 12;
/** AWS's advice for a queue a Lambda function consumes: a visibility timeout of at least six function timeouts. */
const VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT = 6;
/** An event or sync request waiting longer than this means its consumer is failing or falling behind. */
const OLDEST_MESSAGE_ALARM_SECONDS = 300;
/** CloudWatch's hard limit on the metrics one metric-math alarm reads (each cluster's alarms read all of its queues). */
const METRICS_PER_ALARM = 10;
/** EventBridge's hard limit on one rule's targets. */
export const TARGETS_PER_RULE = 5;
/** The cluster configuration's file in the layer every function has; Lambda extracts layers under /opt. */
export const CLUSTERS_FILE_IN_LAYER = 'outrigger/clusters.json';

/** The example hooks: function name -> export of examples/snapshot-schedule/hooks.ts. */
export const EXAMPLE_HOOKS: Record<string, string> = { 'outrigger-snapshot-schedule-map': 'map', 'outrigger-snapshot-schedule-tombstone': 'tombstone' };

/** DynamoDB actions each function's code performs on the table; nothing else is granted. */
// Leases are UpdateItem; fenced writes are TransactWriteItems, authorised per item (ConditionCheckItem, PutItem).
const tableActions: Record<string, string[]> = {
  heartbeat: ['dynamodb:GetItem', 'dynamodb:PutItem'],
  // The parent's history lease, its memo read on the fast path. (Truncation needs no table: its deletes are
  // preconditioned on each revision's resourceVersion instead of a lease.)
  history: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
  // Storage: epochs (UpdateItem ADD, GetItem), the leader lease (UpdateItem) and its fenced decision log
  // (PutItem in a transaction with a ConditionCheckItem on the lease).
  'storage-poll': ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem'],
  storage: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem'],
  // The migrator: its per-migration lease only.
  migrator: ['dynamodb:UpdateItem'],
  // MapController: when each parent's last clean pass started.
  map: ['dynamodb:GetItem', 'dynamodb:PutItem'],
};

export class OutriggerStack extends Stack {
  readonly table: dynamodb.TableV2;
  readonly functions = new Map<string, NodejsFunction>();
  /**
   * Per cluster, the router's input: the cluster's watch-event envelopes, from its forwarder and the ingest
   * function. Each cluster's queues have their own event source mappings, each held to the cluster's
   * maxConcurrency, so a noisy cluster's backlog waits behind its own limit, not in front of other clusters.
   */
  readonly eventsQueues = new Map<string, QueuePair>();
  /** Per cluster, one queue per sync target (a controller handler's input): cluster -> target -> queues. */
  readonly syncQueues = new Map<string, Map<string, QueuePair>>();
  /** Where the ingest function puts requests it refuses (they may name no cluster, or one not served). */
  readonly ingestDeadLetter: sqs.Queue;
  /** Per EKS cluster: its forwarder's role, which may send to that cluster's events queues only. */
  readonly forwarderRoles = new Map<string, iam.Role>();
  /** Every queue's name starts with this (the stack's name), and its URL with queueUrlPrefix (see shared/lambda/queues.ts). */
  private readonly queueNamePrefix: string;
  private readonly queueUrlPrefix: string;
  /** Each cluster's part of construct ids and output names: its id in PascalCase. */
  private readonly clusterIds = new Map<string, string>();
  private readonly clusterSecrets: string[];
  private readonly migratorSecrets: string[];
  /** The cluster configuration, as a file every function reads (OUTRIGGER_CLUSTERS_FILE). */
  readonly clustersLayer: lambda.LayerVersion;
  readonly ingestUrl: lambda.FunctionUrl;
  readonly alarmTopic: sns.Topic;
  private readonly alarms: cloudwatch.Alarm[] = [];

  constructor(scope: Construct, id: string, props: OutriggerStackProps) {
    super(scope, id, props);
    const clusters = parseClusters(JSON.stringify(props.clusters));
    for (const c of clusters) {
      if (c.access.kind !== 'eks' && c.access.kind !== 'secret') {
        throw new Error(`cluster ${c.id}: a deployed stack reaches clusters through EKS IAM tokens or a token in Secrets Manager, not ${c.access.kind}`);
      }
    }
    // Clusters outside EKS: their tokens' secrets, readable by the functions that talk to clusters (and no other).
    this.clusterSecrets = [...new Set(clusters.flatMap((c) => (c.access.kind === 'secret' ? [c.access.secretArn] : [])))];
    // The migrator's tokens (list and patch on everything): the migrator function alone reads them, and no other.
    this.migratorSecrets = [...new Set(clusters.flatMap((c) => (c.access.kind === 'secret' && c.access.migratorTokenSecretArn ? [c.access.migratorTokenSecretArn] : [])))];

    this.table = new dynamodb.TableV2(this, 'State', {
      partitionKey: { name: TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: TABLE.sortKey, type: dynamodb.AttributeType.STRING },
      timeToLiveAttribute: TABLE.timeToLiveAttribute,
      billing: dynamodb.Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: RemovalPolicy.RETAIN,
    });

    const eventConsumers = functions.filter((f) => f.events);
    // SQS consumers compete for messages: a second consumer of watch events would need a queue of its own.
    if (eventConsumers.length !== 1) throw new Error(`exactly one function consumes watch events, not ${eventConsumers.map((f) => f.name).join(', ') || 'none'}`);
    // Named queues (not CloudFormation's generated names): the functions find any cluster's queue from this one
    // pattern, and an operator reads the cluster and the consumer in each queue's name.
    this.queueNamePrefix = `${this.stackName}-`;
    this.queueUrlPrefix = `https://sqs.${this.region}.${this.urlSuffix}/${this.account}/${this.queueNamePrefix}`;
    for (const c of clusters) {
      // Output names are alphanumeric: `a-1` and `a1` would both be A1.
      const id = fnId(c.id).replace(/[^A-Za-z0-9]/g, '');
      const same = [...this.clusterIds].find(([, other]) => other === id);
      if (same) throw new Error(`clusters ${same[0]} and ${c.id} would share the name ${id} in the stack's resources and outputs: rename one`);
      this.clusterIds.set(c.id, id);
      this.eventsQueues.set(c.id, this.queuePair(c.id, EVENTS_QUEUE, eventConsumers[0]!.timeoutSeconds));
      this.syncQueues.set(c.id, new Map(functions.flatMap((spec) => (spec.sync ? [[spec.sync.target, this.queuePair(c.id, spec.sync.target, spec.timeoutSeconds)] as const] : []))));
    }
    this.ingestDeadLetter = this.deadLetterQueue('IngestDeadLetter', this.fifoName('ingest-dlq.fifo'));

    this.alarmTopic = new sns.Topic(this, 'Alarms', { displayName: 'Outrigger alarms' });
    this.clustersLayer = this.addClustersLayer(clusters);
    for (const spec of functions) this.addFunction(spec, clusters);
    const ingest = functions.find((f) => f.functionUrl);
    if (!ingest) throw new Error('no function serves the ingest Function URL');
    this.ingestUrl = this.functions.get(ingest.name)!.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.AWS_IAM });

    this.addForwarderRoles(clusters, props.forwarder ?? {});
    this.addQueueAlarms(clusters);
    this.addDashboard(clusters);

    // What each cluster's forwarder is configured with (cluster/forwarder/forwarder.yaml).
    for (const c of clusters) {
      const id = this.clusterIds.get(c.id)!;
      const events = this.eventsQueues.get(c.id)!;
      new CfnOutput(this, `${id}EventsQueueUrl`, { description: `Cluster ${c.id}'s events queue: where its forwarder sends watch-event envelopes (FIFO)`, value: events.queue.queueUrl });
      new CfnOutput(this, `${id}EventsDeadLetterQueueUrl`, { description: `Cluster ${c.id}'s events dead-letter queue: where its forwarder sends what it cannot send as an envelope`, value: events.deadLetter.queueUrl });
      const role = this.forwarderRoles.get(c.id);
      if (role) new CfnOutput(this, `${id}ForwarderRoleArn`, { description: `Cluster ${c.id}'s forwarder role (EKS Pod Identity): SendMessage on its events queue and dead-letter queue only`, value: role.roleArn });
    }
    new CfnOutput(this, 'IngestDeadLetterQueueUrl', { description: 'The ingest function\'s dead-letter queue: the requests it refused, each with its reason', value: this.ingestDeadLetter.queueUrl });
    new CfnOutput(this, 'IngestUrl', { description: 'The ingest function\'s URL: requests must be SigV4-signed (service lambda); Knative events need ?cluster=<id>', value: this.ingestUrl.url });
    new CfnOutput(this, 'IngestFunctionArn', { description: 'What a signing proxy\'s role needs lambda:InvokeFunctionUrl and lambda:InvokeFunction on', value: this.functions.get(ingest.name)!.functionArn });
    new CfnOutput(this, 'AlarmTopicArn', { description: 'Every alarm notifies this topic: subscribe to it', value: this.alarmTopic.topicArn });

    const hooks = [...(props.mapHookFunctions ?? [])];
    if (props.examples) {
      for (const [functionName, handler] of Object.entries(EXAMPLE_HOOKS)) {
        new NodejsFunction(this, fnId(functionName), { ...bundled(join(projectRoot, 'examples/snapshot-schedule/hooks.ts')), functionName, handler, description: `SnapshotSchedule example: the ${handler} hook`, timeout: Duration.seconds(10), memorySize: 256 });
        hooks.push(functionName);
      }
    }
    if (hooks.length) {
      // A hook may be called through an alias or version (hooks.<x>.lambda.qualifier).
      const arns = hooks.flatMap((name) => [this.formatArn({ service: 'lambda', resource: 'function', resourceName: name, arnFormat: ArnFormat.COLON_RESOURCE_NAME }), this.formatArn({ service: 'lambda', resource: 'function', resourceName: `${name}:*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME })]);
      this.functions.get('map')!.addToRolePolicy(new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: arns }));
    }
    // Webhooks authenticate the map function by the HMAC it signs each request with (README "MapController"):
    // the key is generated here, and read by the map function alone; hook authors read it from the output's ARN.
    const hookSecret = new secretsmanager.Secret(this, 'MapHookSigningSecret', {
      description: 'The key the map function signs webhook requests with (X-Outrigger-Signature: sha256=HMAC of "<timestamp>.<body>")',
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
    });
    const map = this.functions.get('map')!;
    map.addEnvironment('OUTRIGGER_HOOK_SECRET_ARN', hookSecret.secretArn);
    map.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [hookSecret.secretArn] }));
    new CfnOutput(this, 'MapHookSigningSecretArn', { description: 'The webhook signing key: verify X-Outrigger-Signature with it', value: hookSecret.secretArn });
  }

  private addFunction(spec: FunctionSpec, clusters: ClusterConfig[]): void {
    const fn = new NodejsFunction(this, fnId(spec.name), {
      ...bundled(join(projectRoot, spec.entry)),
      description: spec.description,
      handler: 'handler',
      memorySize: 512,
      timeout: Duration.seconds(spec.timeoutSeconds),
      layers: [this.clustersLayer],
      environment: {
        OUTRIGGER_CLUSTERS_FILE: `/opt/${CLUSTERS_FILE_IN_LAYER}`,
        OUTRIGGER_TABLE: this.table.tableName,
        NODE_OPTIONS: '--enable-source-maps',
      },
    });
    const actions = tableActions[spec.name];
    if (actions) {
      fn.addToRolePolicy(new iam.PolicyStatement({ actions, resources: [this.table.tableArn] }));
    }
    // Every function but ingest talks to clusters; the migrator only with its own token (Clusters.migratorClient).
    const secrets = spec.functionUrl ? [] : spec.name === 'migrator' ? this.migratorSecrets : this.clusterSecrets;
    if (secrets.length) {
      // A secret's ARN in the configuration may lack the random suffix Secrets Manager appends; the grant allows it.
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: secrets.map((a) => (/-[A-Za-z0-9]{6}$/.test(a) ? a : `${a}-??????`)) }));
    }
    // What it consumes: its queue of each cluster, in batches it may partly fail, through one event source
    // mapping per queue held to the cluster's maxConcurrency (Lambda counts it per mapping, for FIFO queues too),
    // so one cluster's backlog cannot take the function's concurrency from the others. What can never be
    // processed goes to the dead-letter queue beside its queue at once (with a reason), what keeps failing
    // after MAX_RECEIVE_COUNT tries.
    const sendTo: sqs.Queue[] = [];
    for (const c of clusters) {
      const input = spec.events ? this.eventsQueues.get(c.id) : spec.sync ? this.syncQueues.get(c.id)!.get(spec.sync.target) : undefined;
      if (!input) continue;
      fn.addEventSource(new SqsEventSource(input.queue, { batchSize: 10, reportBatchItemFailures: true, maxConcurrency: maxConcurrency(c) }));
      sendTo.push(input.deadLetter);
    }
    // Each sync request goes to its cluster's queue for the target.
    for (const t of sendTargets(spec, functions)) sendTo.push(...clusters.map((c) => this.syncQueues.get(c.id)!.get(t)!.queue));
    if (spec.functionUrl) {
      fn.addEnvironment('OUTRIGGER_DEAD_LETTER_QUEUE_URL', this.ingestDeadLetter.queueUrl);
      sendTo.push(...clusters.map((c) => this.eventsQueues.get(c.id)!.queue), this.ingestDeadLetter);
    }
    if (sendTo.length) {
      // One prefix names every queue: a URL per cluster and target would outgrow Lambda's 4 KB of environment.
      fn.addEnvironment('OUTRIGGER_QUEUE_URL_PREFIX', this.queueUrlPrefix);
      // SendMessageBatch is authorised as sqs:SendMessage; nothing else is needed to send.
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [...new Set(sendTo)].map((q) => q.queueArn) }));
    }
    this.alarm(`${fnId(spec.name)}Errors`, `${spec.name} failed at least once in 5 minutes`, fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
    if (spec.schedule) this.addSchedule(spec.name, spec.schedule, fn, clusters);
    this.functions.set(spec.name, fn);
  }

  /**
   * The cluster configuration as a file in a layer that every function has: in the environment it would count
   * against Lambda's 4 KB there, which two or three EKS clusters' CA data fill. A layer rather than a file in
   * each bundle: the bundles stay the same whatever the clusters, and a change of clusters publishes one layer
   * version. Its directory is written beside the cloud assembly (the layer's asset is staged from it, or with
   * `cdk synth --no-staging` read from it by `sam local invoke`).
   */
  private addClustersLayer(clusters: ClusterConfig[]): lambda.LayerVersion {
    const dir = join(Stage.of(this)!.assetOutdir, `${this.artifactId}-clusters-layer`);
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
   * cluster whose storage migration is on, with a target per reporter whose input names the (cluster,
   * reporter): one invocation each per period, and a rule's targets never outgrow TARGETS_PER_RULE however many
   * clusters there are; a cluster with more reporters than that gets a further rule for each TARGETS_PER_RULE
   * more. Any other function gets one rule and one target, and covers every cluster in each invocation.
   */
  private addSchedule(name: string, schedule: NonNullable<FunctionSpec['schedule']>, fn: lambda.IFunction, clusters: ClusterConfig[]): void {
    const rules: Array<{ id: string; about: string; inputs: Array<Record<string, string> | undefined> }> = schedule.perReporter
      ? clusters
          .filter((c) => c.storage?.enabled !== false)
          .flatMap((c) => {
            const reporters = (c.storage?.reporters ?? [{ id: 'apiserver' }]).map((r) => ({ cluster: c.id, reporter: r.id }));
            const split = reporters.length > TARGETS_PER_RULE;
            return chunks(reporters, TARGETS_PER_RULE).map((inputs, i) => ({
              id: `${this.clusterIds.get(c.id)!}${fnId(name)}Schedule${i ? i + 1 : ''}`,
              about: ` for cluster ${c.id}${split ? ` (reporters ${i * TARGETS_PER_RULE + 1}-${i * TARGETS_PER_RULE + inputs.length} of ${reporters.length})` : ''}`,
              inputs,
            }));
          })
      : [{ id: `${fnId(name)}Schedule`, about: '', inputs: [undefined] }];
    for (const rule of rules) {
      new events.Rule(this, rule.id, {
        description: `Runs ${name}${rule.about} every ${schedule.everyMinutes} minute(s)`,
        schedule: events.Schedule.rate(Duration.minutes(schedule.everyMinutes)),
        targets: rule.inputs.map((input) => new targets.LambdaFunction(fn, { retryAttempts: 0, ...(input ? { event: events.RuleTargetInput.fromObject(input) } : {}) })),
      });
    }
  }

  /**
   * A cluster's FIFO queue (its events queue, or its queue for a sync target) whose consumer times out after
   * `consumerTimeoutSeconds`, and its FIFO dead-letter queue, named as shared/lambda/queues.ts says. Senders
   * name each message's deduplication id (derived from the event or request), so the queue does not
   * deduplicate by content.
   */
  private queuePair(cluster: string, name: string, consumerTimeoutSeconds: number): QueuePair {
    const id = `${this.clusterIds.get(cluster)!}${name === EVENTS_QUEUE ? 'Events' : `Sync${fnId(name)}`}`;
    const deadLetter = this.deadLetterQueue(`${id}DeadLetter`, this.fifoName(queueName(cluster, name, true)));
    const queue = new sqs.Queue(this, id, {
      queueName: this.fifoName(queueName(cluster, name)),
      fifo: true,
      contentBasedDeduplication: false,
      visibilityTimeout: Duration.seconds(VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT * consumerTimeoutSeconds),
      deadLetterQueue: { queue: deadLetter, maxReceiveCount: MAX_RECEIVE_COUNT },
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    return { queue, deadLetter };
  }

  /**
   * A FIFO dead-letter queue. SqsDeadLetterSink names a deduplication id (a digest of body and reason); content-based
   * deduplication covers a sender that names none.
   */
  private deadLetterQueue(id: string, name: string): sqs.Queue {
    return new sqs.Queue(this, id, {
      queueName: name,
      fifo: true,
      contentBasedDeduplication: true,
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
  }

  /** A queue's name in this deployment, checked against SQS's limit here rather than at deploy. */
  private fifoName(name: string): string {
    const full = `${this.queueNamePrefix}${name}`;
    if (full.length > MAX_QUEUE_NAME_LENGTH) throw new Error(`queue name ${full} is ${full.length} characters, over SQS's ${MAX_QUEUE_NAME_LENGTH}: shorten the cluster id or the stack name`);
    return full;
  }

  /**
   * Each EKS cluster's forwarder role, for EKS Pod Identity: only pods of that cluster (and, when named, the
   * forwarder's namespace and service account) get it, by the session tags Pod Identity sets, and it may send
   * to that cluster's events queue and dead-letter queue only: a cluster cannot write another's events. IRSA
   * would need each cluster's OIDC provider ARN, which the cluster configuration does not hold; a cluster
   * outside EKS has no Pod Identity, and its forwarder needs credentials of its own (or uses the ingest URL).
   */
  private addForwarderRoles(clusters: ClusterConfig[], forwarder: NonNullable<OutriggerStackProps['forwarder']>): void {
    for (const c of clusters) {
      if (c.access.kind !== 'eks') continue;
      // The cluster's ARN, not just its name: a cluster of the same name in another region of the account
      // must not get the role.
      const clusterArn = this.formatArn({ service: 'eks', region: c.access.region, resource: 'cluster', resourceName: c.access.clusterName, arnFormat: ArnFormat.SLASH_RESOURCE_NAME });
      const tags: Record<string, string[]> = { 'aws:RequestTag/eks-cluster-arn': [clusterArn] };
      if (forwarder.namespace) tags['aws:RequestTag/kubernetes-namespace'] = [forwarder.namespace];
      if (forwarder.serviceAccount) tags['aws:RequestTag/kubernetes-service-account'] = [forwarder.serviceAccount];
      const role = new iam.Role(this, `${this.clusterIds.get(c.id)!}ForwarderRole`, {
        description: `Outrigger forwarder of cluster ${c.id} (EKS Pod Identity): sends its watch events to its events queue`,
        assumedBy: new iam.PrincipalWithConditions(new iam.SessionTagsPrincipal(new iam.ServicePrincipal('pods.eks.amazonaws.com')), { StringEquals: tags }),
      });
      const events = this.eventsQueues.get(c.id)!;
      role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [events.queue.queueArn, events.deadLetter.queueArn] }));
      this.forwarderRoles.set(c.id, role);
    }
  }

  private alarm(id: string, description: string, metric: cloudwatch.IMetric, threshold: number, comparisonOperator: cloudwatch.ComparisonOperator): void {
    const alarm = new cloudwatch.Alarm(this, id, { alarmDescription: description, metric, threshold, comparisonOperator, evaluationPeriods: 1, treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING });
    alarm.addAlarmAction(new cwActions.SnsAction(this.alarmTopic));
    this.alarms.push(alarm);
  }

  /** A cluster's queue pairs, each named by what it holds. */
  private queuePairs(cluster: string): Array<[string, QueuePair]> {
    return [['events', this.eventsQueues.get(cluster)!], ...[...this.syncQueues.get(cluster)!].map(([t, q]): [string, QueuePair] => [`sync ${t}`, q])];
  }

  /**
   * Per cluster, one alarm on its dead-letter queues and one on its queues' oldest message, each the worst of
   * its queues (the cluster's dashboard row shows which queue): an alarm per queue would add 12 resources per
   * cluster, and a stack holds at most 500.
   */
  private addQueueAlarms(clusters: ClusterConfig[]): void {
    for (const c of clusters) {
      const pairs = this.queuePairs(c.id);
      if (pairs.length > METRICS_PER_ALARM) throw new Error(`cluster ${c.id} has ${pairs.length} queues; one alarm reads at most ${METRICS_PER_ALARM} metrics`);
      const worst = (metric: (p: QueuePair) => cloudwatch.Metric, period: Duration) =>
        new cloudwatch.MathExpression({ expression: 'MAX(METRICS())', usingMetrics: Object.fromEntries(pairs.map(([, p], i) => [`q${i}`, metric(p)])), period });
      const id = this.clusterIds.get(c.id)!;
      this.alarm(`${id}DeadLetters`, `A dead-letter queue of cluster ${c.id} holds messages: read their reason attribute, fix the cause, redrive`, worst((p) => deadLetterMetric(p.deadLetter), Duration.minutes(1)), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
      this.alarm(`${id}OldestMessage`, `A queue of cluster ${c.id} has a message that waited over ${OLDEST_MESSAGE_ALARM_SECONDS} s: its consumer is failing or falling behind`, worst(oldestMessageMetric, Duration.minutes(5)), OLDEST_MESSAGE_ALARM_SECONDS, cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD);
      if (c.storage?.enabled !== false) {
        // Published by every storage poll's leader step; three polls' worth, so one poll that did not lead is no gap.
        const overdue = (metricName: string) => new cloudwatch.Metric({ namespace: METRICS_NAMESPACE, metricName, dimensionsMap: { service: METRICS_SERVICE, cluster: c.id }, statistic: 'Maximum', period: Duration.minutes(30) });
        this.alarm(`${id}StorageUnknown`, `A StorageState of cluster ${c.id} has listed Unknown for over an hour with no migration under way: see the storage-poll log's leader.overdue`, overdue('StorageStatesUnknownOverdue'), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
        this.alarm(`${id}StorageMigrationStuck`, `A storage version migration of cluster ${c.id} has been Pending, Running or Failed for over an hour: kubectl get svm`, overdue('StorageMigrationsOverdue'), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
        this.alarm(`${id}StoragePollMissed`, `A storage poll reporter of cluster ${c.id} missed a poll: see the storage-poll log's missedPolls; one more in a row resets its StorageStates to Unknown`, overdue('StoragePollsMissed'), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
      }
    }
    this.alarm('IngestDeadLetters', 'The ingest dead-letter queue holds refused requests: read their reason attribute, fix the sender', deadLetterMetric(this.ingestDeadLetter), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
  }

  /** Alarms and functions on top, then a row per cluster: a graph widget shows at most 100 metrics, an alarm widget 100 alarms. */
  private addDashboard(clusters: ClusterConfig[]): void {
    const fns = [...this.functions];
    new cloudwatch.Dashboard(this, 'Dashboard', {
      widgets: [
        [new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24 })],
        [
          new cloudwatch.GraphWidget({ title: 'Function errors', width: 8, left: fns.map(([name, fn]) => fn.metricErrors({ label: name, period: Duration.minutes(5), statistic: 'Sum' })) }),
          new cloudwatch.GraphWidget({ title: 'Invocations', width: 8, left: fns.map(([name, fn]) => fn.metricInvocations({ label: name, period: Duration.minutes(5), statistic: 'Sum' })) }),
          new cloudwatch.GraphWidget({ title: 'Duration p99 (ms)', width: 8, left: fns.map(([name, fn]) => fn.metricDuration({ label: name, period: Duration.minutes(5), statistic: 'p99' })) }),
        ],
        ...clusters.map((c) => {
          const pairs = this.queuePairs(c.id);
          return [
            new cloudwatch.GraphWidget({ title: `${c.id}: dead letters (messages visible)`, width: 12, left: pairs.map(([name, p]) => deadLetterMetric(p.deadLetter, name)) }),
            new cloudwatch.GraphWidget({ title: `${c.id}: oldest message age (s)`, width: 12, left: pairs.map(([name, p]) => oldestMessageMetric(p, name)) }),
          ];
        }),
        [new cloudwatch.GraphWidget({ title: 'Ingest: refused requests (dead letters visible)', width: 24, left: [deadLetterMetric(this.ingestDeadLetter, 'ingest')] })],
      ],
    });
  }
}

/** How every function of the project is built and run: one esbuild bundle per entry, CommonJS, arm64, Node 24 (see scripts/bundle.ts). */
function bundled(entry: string) {
  return {
    entry,
    runtime: RUNTIME,
    architecture: lambda.Architecture.ARM_64,
    projectRoot,
    depsLockFilePath: join(projectRoot, 'package-lock.json'),
    bundling: {
      // CommonJS: it loads 20-50 ms faster than ESM (scripts/bundle.ts BUNDLE_FILE says why).
      format: OutputFormat.CJS,
      target: 'node24',
      minify: true,
      sourceMap: true,
      // NODE_OPTIONS=--enable-source-maps reads the map at every cold start, and stack traces need only its
      // mappings: without the sources' text it is a third of the size, and quicker to load.
      sourcesContent: false,
      mainFields: ['module', 'main'],
      // Replaces the default (['@aws-sdk/*']: Lambda's own SDK), so the SDK is bundled; client-node only reads
      // kubeconfigs, which deployed functions never use (see scripts/bundle.ts EXTERNALS).
      externalModules: ['@kubernetes/client-node'],
      // Credentials from the environment only, as Lambda provides them (scripts/bundle.ts ALIASES). esbuild
      // resolves the alias's path from its working directory: the project root when bundling locally, and this
      // (the project's mount) when bundling in Docker, where it would otherwise be `/`.
      esbuildArgs: { '--alias': '@aws-sdk/credential-provider-node=./shared/lambda/credentials.ts' },
      workingDirectory: AssetStaging.BUNDLING_INPUT_DIR,
    },
  };
}

/** What the alarms and the dashboard watch: a dead-letter queue's depth, and a queue's oldest message's age. */
function deadLetterMetric(deadLetter: sqs.IQueue, label?: string): cloudwatch.Metric {
  return deadLetter.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum', ...(label ? { label } : {}) });
}

function oldestMessageMetric(pair: QueuePair, label?: string): cloudwatch.Metric {
  return pair.queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(5), statistic: 'Maximum', ...(label ? { label } : {}) });
}

/** `items` in runs of at most `size`, in order. */
function chunks<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}

function fnId(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}
