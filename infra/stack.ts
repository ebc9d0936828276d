// The Outrigger stack: the state table, the queues between forwarders and functions (each FIFO, each with a
// dead-letter queue), every function in functions/index.ts with only the permissions it uses, the ingest
// Function URL, the in-cluster forwarder's role, and alarms on a dashboard. Each handler issue adds its
// function to the registry and its table actions here; queues and their grants follow from the registry.
import { ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { join } from 'node:path';
import { functions } from '../functions/index.ts';
import { sendTargets, type FunctionSpec } from '../functions/spec.ts';
import { projectRoot } from '../local/paths.ts';
import { parseClusters, type ClusterConfig } from '../shared/clusters.ts';
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

/** How often SQS redelivers a message before it moves it to the dead-letter queue. */
export const MAX_RECEIVE_COUNT = 5;
/** AWS's advice for a queue a Lambda function consumes: a visibility timeout of at least six function timeouts. */
const VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT = 6;
/** An event or sync request waiting longer than this means its consumer is failing or falling behind. */
const OLDEST_MESSAGE_ALARM_SECONDS = 300;

/** The example hooks: function name -> export of examples/snapshot-schedule/hooks.ts. */
export const EXAMPLE_HOOKS: Record<string, string> = { 'outrigger-snapshot-schedule-map': 'map', 'outrigger-snapshot-schedule-tombstone': 'tombstone' };

/** DynamoDB actions each function's code performs on the table; nothing else is granted. */
// Leases are UpdateItem; fenced writes are TransactWriteItems, authorised per item (ConditionCheckItem, PutItem).
const historyActions = ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:ConditionCheckItem'];
const tableActions: Record<string, string[]> = {
  heartbeat: ['dynamodb:GetItem', 'dynamodb:PutItem'],
  history: historyActions,
  truncate: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
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
  /** The router's input: watch-event envelopes from the forwarder and the ingest function. */
  readonly eventsQueue: QueuePair;
  /** One queue per sync target (a controller handler's input). */
  readonly syncQueues = new Map<string, QueuePair>();
  readonly forwarderRole: iam.Role;
  private readonly clusterSecrets: string[];
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
    this.eventsQueue = this.queuePair('Events', eventConsumers[0]!.timeoutSeconds);
    for (const spec of functions) if (spec.sync) this.syncQueues.set(spec.sync.target, this.queuePair(`Sync${fnId(spec.sync.target)}`, spec.timeoutSeconds));

    this.alarmTopic = new sns.Topic(this, 'Alarms', { displayName: 'Outrigger alarms' });
    for (const spec of functions) this.addFunction(spec, clusters);
    const ingest = functions.find((f) => f.functionUrl);
    if (!ingest) throw new Error('no function serves the ingest Function URL');
    this.ingestUrl = this.functions.get(ingest.name)!.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.AWS_IAM });

    this.forwarderRole = this.addForwarderRole(clusters, props.forwarder ?? {});
    this.addQueueAlarms();
    this.addDashboard();

    new CfnOutput(this, 'EventsQueueUrl', { description: 'The events queue: where the forwarder sends watch-event envelopes (FIFO)', value: this.eventsQueue.queue.queueUrl });
    new CfnOutput(this, 'EventsDeadLetterQueueUrl', { description: 'The events dead-letter queue: where the forwarder sends what it cannot send as an envelope', value: this.eventsQueue.deadLetter.queueUrl });
    new CfnOutput(this, 'ForwarderRoleArn', { description: 'The in-cluster forwarder\'s role (EKS Pod Identity): SendMessage on the events queue and its dead-letter queue only', value: this.forwarderRole.roleArn });
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
  }

  private addFunction(spec: FunctionSpec, clusters: ClusterConfig[]): void {
    const fn = new NodejsFunction(this, fnId(spec.name), {
      ...bundled(join(projectRoot, spec.entry)),
      description: spec.description,
      handler: 'handler',
      memorySize: 512,
      timeout: Duration.seconds(spec.timeoutSeconds),
      environment: {
        OUTRIGGER_CLUSTERS: JSON.stringify(clusters),
        OUTRIGGER_TABLE: this.table.tableName,
        NODE_OPTIONS: '--enable-source-maps',
      },
    });
    const actions = tableActions[spec.name];
    if (actions) {
      fn.addToRolePolicy(new iam.PolicyStatement({ actions, resources: [this.table.tableArn] }));
    }
    if (!spec.functionUrl && this.clusterSecrets.length) {
      // Every function but ingest talks to clusters. A secret's ARN in the configuration may lack the random
      // suffix Secrets Manager appends; the grant allows it.
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: this.clusterSecrets.map((a) => (/-[A-Za-z0-9]{6}$/.test(a) ? a : `${a}-??????`)) }));
    }
    // What it consumes: its queue, in batches it may partly fail; what can never be processed goes to the
    // dead-letter queue at once (with a reason), what keeps failing after MAX_RECEIVE_COUNT tries.
    const input = spec.events ? this.eventsQueue : spec.sync ? this.syncQueues.get(spec.sync.target) : undefined;
    const sendTo: sqs.Queue[] = [];
    if (input) {
      fn.addEventSource(new SqsEventSource(input.queue, { batchSize: 10, reportBatchItemFailures: true }));
      fn.addEnvironment('OUTRIGGER_DEAD_LETTER_QUEUE_URL', input.deadLetter.queueUrl);
      sendTo.push(input.deadLetter);
    }
    const sends = sendTargets(spec, functions);
    if (sends.length) {
      const queues = sends.map((t) => [t, this.syncQueues.get(t)!.queue] as const);
      fn.addEnvironment('OUTRIGGER_SYNC_QUEUES', this.toJsonString(Object.fromEntries(queues.map(([t, q]) => [t, q.queueUrl]))));
      sendTo.push(...queues.map(([, q]) => q));
    }
    if (spec.functionUrl) {
      fn.addEnvironment('OUTRIGGER_EVENT_QUEUE_URL', this.eventsQueue.queue.queueUrl);
      fn.addEnvironment('OUTRIGGER_DEAD_LETTER_QUEUE_URL', this.eventsQueue.deadLetter.queueUrl);
      sendTo.push(this.eventsQueue.queue, this.eventsQueue.deadLetter);
    }
    // SendMessageBatch is authorised as sqs:SendMessage; nothing else is needed to send.
    if (sendTo.length) fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [...new Set(sendTo)].map((q) => q.queueArn) }));
    this.alarm(`${fnId(spec.name)}Errors`, `${spec.name} failed at least once in 5 minutes`, fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
    if (spec.schedule) {
      new events.Rule(this, `${fnId(spec.name)}Schedule`, {
        description: `Runs ${spec.name} every ${spec.schedule.everyMinutes} minute(s)`,
        schedule: events.Schedule.rate(Duration.minutes(spec.schedule.everyMinutes)),
        // A per-reporter function gets one target per (cluster, reporter): one invocation each per period.
        targets: spec.schedule.perReporter
          ? clusters.flatMap((c) =>
              (c.storage?.reporters ?? [{ id: 'apiserver' }]).map(
                (r) => new targets.LambdaFunction(fn, { retryAttempts: 0, event: events.RuleTargetInput.fromObject({ cluster: c.id, reporter: r.id }) }),
              ),
            )
          : [new targets.LambdaFunction(fn, { retryAttempts: 0 })],
      });
    }
    this.functions.set(spec.name, fn);
  }

  /**
   * A FIFO queue whose consumer times out after `consumerTimeoutSeconds`, and its FIFO dead-letter queue.
   * Senders name each message's deduplication id (derived from the event or request), so the queue does not
   * deduplicate by content; the dead-letter queue does, since SqsDeadLetterSink names only the group.
   */
  private queuePair(id: string, consumerTimeoutSeconds: number): QueuePair {
    const deadLetter = new sqs.Queue(this, `${id}DeadLetter`, {
      fifo: true,
      contentBasedDeduplication: true,
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    const queue = new sqs.Queue(this, id, {
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
   * The in-cluster forwarder's role, for EKS Pod Identity: only pods of the configured clusters (and, when
   * named, the forwarder's namespace and service account) get it, by the session tags Pod Identity sets.
   * IRSA would need each cluster's OIDC provider ARN, which the cluster configuration does not hold.
   */
  private addForwarderRole(clusters: ClusterConfig[], forwarder: NonNullable<OutriggerStackProps['forwarder']>): iam.Role {
    const tags: Record<string, string[]> = {
      'aws:RequestTag/eks-cluster-name': [...new Set(clusters.flatMap((c) => (c.access.kind === 'eks' ? [c.access.clusterName] : [])))],
    };
    if (forwarder.namespace) tags['aws:RequestTag/kubernetes-namespace'] = [forwarder.namespace];
    if (forwarder.serviceAccount) tags['aws:RequestTag/kubernetes-service-account'] = [forwarder.serviceAccount];
    const role = new iam.Role(this, 'ForwarderRole', {
      description: 'Outrigger forwarder (EKS Pod Identity): sends watch events to the events queue',
      assumedBy: new iam.PrincipalWithConditions(new iam.SessionTagsPrincipal(new iam.ServicePrincipal('pods.eks.amazonaws.com')), { StringEquals: tags }),
    });
    role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [this.eventsQueue.queue.queueArn, this.eventsQueue.deadLetter.queueArn] }));
    return role;
  }

  private alarm(id: string, description: string, metric: cloudwatch.IMetric, threshold: number, comparisonOperator: cloudwatch.ComparisonOperator): void {
    const alarm = new cloudwatch.Alarm(this, id, { alarmDescription: description, metric, threshold, comparisonOperator, evaluationPeriods: 1, treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING });
    alarm.addAlarmAction(new cwActions.SnsAction(this.alarmTopic));
    this.alarms.push(alarm);
  }

  private queuePairs(): Array<[string, QueuePair]> {
    return [['events', this.eventsQueue], ...[...this.syncQueues].map(([t, q]): [string, QueuePair] => [`sync ${t}`, q])];
  }

  private addQueueAlarms(): void {
    for (const [name, { queue, deadLetter }] of this.queuePairs()) {
      const id = fnId(name.replace(' ', '-'));
      this.alarm(`${id}DeadLetters`, `The ${name} dead-letter queue holds messages: read their reason attribute, fix the cause, redrive`, deadLetter.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum' }), 1, cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD);
      this.alarm(`${id}OldestMessage`, `The ${name} queue's oldest message waited over ${OLDEST_MESSAGE_ALARM_SECONDS} s: its consumer is failing or falling behind`, queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(5), statistic: 'Maximum' }), OLDEST_MESSAGE_ALARM_SECONDS, cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD);
    }
  }

  private addDashboard(): void {
    const pairs = this.queuePairs();
    const fns = [...this.functions];
    new cloudwatch.Dashboard(this, 'Dashboard', {
      widgets: [
        [new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24 })],
        [
          new cloudwatch.GraphWidget({ title: 'Dead letters (messages visible)', width: 8, left: pairs.map(([name, p]) => p.deadLetter.metricApproximateNumberOfMessagesVisible({ label: name, period: Duration.minutes(1), statistic: 'Maximum' })) }),
          new cloudwatch.GraphWidget({ title: 'Oldest message age (s)', width: 8, left: pairs.map(([name, p]) => p.queue.metricApproximateAgeOfOldestMessage({ label: name, period: Duration.minutes(5), statistic: 'Maximum' })) }),
          new cloudwatch.GraphWidget({ title: 'Function errors', width: 8, left: fns.map(([name, fn]) => fn.metricErrors({ label: name, period: Duration.minutes(5), statistic: 'Sum' })) }),
        ],
        [
          new cloudwatch.GraphWidget({ title: 'Invocations', width: 12, left: fns.map(([name, fn]) => fn.metricInvocations({ label: name, period: Duration.minutes(5), statistic: 'Sum' })) }),
          new cloudwatch.GraphWidget({ title: 'Duration p99 (ms)', width: 12, left: fns.map(([name, fn]) => fn.metricDuration({ label: name, period: Duration.minutes(5), statistic: 'p99' })) }),
        ],
      ],
    });
  }
}

/** How every function of the project is built and run: one esbuild bundle per entry, ESM, arm64, Node 24. */
function bundled(entry: string) {
  return {
    entry,
    runtime: RUNTIME,
    architecture: lambda.Architecture.ARM_64,
    projectRoot,
    depsLockFilePath: join(projectRoot, 'package-lock.json'),
    bundling: {
      format: OutputFormat.ESM,
      target: 'node24',
      minify: true,
      sourceMap: true,
      // NODE_OPTIONS=--enable-source-maps reads the map at every cold start, and stack traces need only its
      // mappings: without the sources' text it is a third of the size, and quicker to load.
      sourcesContent: false,
      mainFields: ['module', 'main'],
      // Some dependencies are CommonJS and call require() for built-ins.
      banner: "import { createRequire as __outriggerRequire } from 'node:module'; const require = __outriggerRequire(import.meta.url);",
      // This replaces the default (['@aws-sdk/*']: Lambda provides the AWS SDK), so it is restated. client-node
      // only reads kubeconfigs, which deployed functions never use (see scripts/bundle.ts EXTERNALS).
      externalModules: ['@aws-sdk/*', '@kubernetes/client-node'],
    },
  };
}

function fnId(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}
