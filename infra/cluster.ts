// Everything one cluster has of its own: its queues (events, and one per sync target, each with a dead-letter
// queue), its alarms, its forwarder's role, and, for an EKS cluster in the stack's region, the EKS access entries
// of the functions' roles and the forwarder's Pod Identity association. Clusters share nothing of these, so one
// cluster's backlog, failures or foothold stay its own (docs/operations/security.md).
import { ArnFormat, Aws, CfnCondition, Duration, Fn, Stack, Token, type CfnResource } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as eks from 'aws-cdk-lib/aws-eks';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { CONTROLLERS_GROUP, MIGRATORS_GROUP, type ClusterConfig } from '../shared/clusters.ts';
import { FORWARDER_SILENT_SECONDS } from '../functions/heartbeat/heartbeat.ts';
import { functions, syncTargetsIn } from '../functions/index.ts';
import { METRICS_NAMESPACE, METRICS_SERVICE } from '../shared/lambda/metrics.ts';
import { EVENTS_QUEUE, queueName } from '../shared/lambda/queues.ts';
import { isEks } from './config.ts';
import { deadLetterMetric, oldestMessageMetric, type Alarms } from './monitoring.ts';
import { output, pascal } from './names.ts';
import { queuePair, tlsOnly, type QueuePair } from './queues.ts';

/** An event or sync request waiting longer than this means its consumer is failing or falling behind. */
const OLDEST_MESSAGE_ALARM_SECONDS = 300;
/** CloudWatch's hard limit on the metrics one metric-math alarm reads (each cluster's alarms read all of its queues). */
const METRICS_PER_ALARM = 10;

export { CONTROLLERS_GROUP, MIGRATORS_GROUP };

/**
 * How a cluster's functions and forwarder get in: `stack` (an EKS cluster in the stack's region: access entries
 * and the Pod Identity association are the stack's), `region-condition` (the same, in a stack whose region is
 * known only at deploy: each is made when the stack's region is the cluster's), `manual` (another region, or
 * not EKS: the role ARN outputs and docs/getting-started/deploy.md#clusters-the-stack-cannot-let-in say what to create).
 */
export type ClusterAccessMode = 'stack' | 'region-condition' | 'manual';

export interface OutriggerClusterProps {
  config: ClusterConfig;
  /** The events queue's consumer's timeout (the router's). */
  eventsConsumerTimeoutSeconds: number;
  /** Each sync target of the controllers that run in the cluster, and its consumer's timeout. */
  syncTargets: ReadonlyArray<{ target: string; timeoutSeconds: number }>;
  alarms: Alarms;
  /** The forwarder's namespace and service account: its Pod Identity association, and its role's trust. */
  forwarder: { namespace: string; serviceAccount: string };
  /** A condition true when the stack is deployed in `region` (one per region, shared by its clusters). */
  inRegion: (region: string) => CfnCondition;
}

export class OutriggerCluster extends Construct {
  readonly config: ClusterConfig;
  /** The router's input: the cluster's watch-event envelopes, from its forwarder and the ingest function. */
  readonly events: QueuePair;
  /** One queue per sync target (a controller handler's input) of the controllers that run in the cluster. */
  readonly sync: ReadonlyMap<string, QueuePair>;
  /** An EKS cluster's forwarder role (EKS Pod Identity), which may send to this cluster's events queues only. */
  readonly forwarderRole?: iam.Role;
  readonly access: ClusterAccessMode;
  /** The id in PascalCase: this construct's id and its outputs' prefix. */
  readonly name: string;
  private readonly inRegion?: CfnCondition;

  constructor(scope: Construct, id: string, props: OutriggerClusterProps) {
    super(scope, id);
    const c = props.config;
    this.config = c;
    this.name = id;
    this.events = queuePair(
      this,
      'Events',
      { queue: queueName(c.id, EVENTS_QUEUE), deadLetter: queueName(c.id, EVENTS_QUEUE, true) },
      props.eventsConsumerTimeoutSeconds,
    );
    this.sync = new Map(
      props.syncTargets.map(({ target, timeoutSeconds }) => [
        target,
        queuePair(
          this,
          `Sync${pascal(target)}`,
          { queue: queueName(c.id, target), deadLetter: queueName(c.id, target, true) },
          timeoutSeconds,
        ),
      ]),
    );
    tlsOnly(
      this,
      'QueuesTlsOnly',
      this.queuePairs().flatMap(([, p]) => [p.queue, p.deadLetter]),
    );

    const region = Stack.of(this).region;
    this.access = !isEks(c) ? 'manual' : Token.isUnresolved(region) ? 'region-condition' : region === c.access.region ? 'stack' : 'manual';
    if (this.access === 'region-condition' && isEks(c)) {
      this.inRegion = props.inRegion(c.access.region);
    }
    if (isEks(c)) this.forwarderRole = this.addForwarder(c, props.forwarder);
    this.addAlarms(props.alarms);

    // What the cluster's forwarder is configured with (deploy/forwarder/base, through its generated overlay).
    output(
      this,
      `${id}EventsQueueUrl`,
      `Cluster ${c.id}'s events queue: where its forwarder sends watch-event envelopes (FIFO)`,
      this.events.queue.queueUrl,
    );
    output(
      this,
      `${id}EventsDeadLetterQueueUrl`,
      `Cluster ${c.id}'s events dead-letter queue: where its forwarder sends what it cannot send as an envelope`,
      this.events.deadLetter.queueUrl,
    );
    if (this.forwarderRole)
      output(
        this,
        `${id}ForwarderRoleArn`,
        `Cluster ${c.id}'s forwarder role (EKS Pod Identity): SendMessage on its events queue and dead-letter queue only`,
        this.forwarderRole.roleArn,
      );
  }

  /** The cluster's queue pairs, each named by what it holds. */
  queuePairs(): Array<[string, QueuePair]> {
    return [['events', this.events], ...[...this.sync].map(([t, q]): [string, QueuePair] => [`sync ${t}`, q])];
  }

  /**
   * Lets the functions' roles into the cluster where the stack can (see ClusterAccessMode): an EKS access entry
   * per role, each in the controllers' group, the migrator's in the migrators' group as well (cluster/rbac.yaml
   * binds each group's role). Elsewhere the roles are outputs of the stack, for access entries (or a token's
   * identity) made by hand.
   */
  grantAccess(roles: ReadonlyArray<{ name: string; role: iam.IRole; migrator: boolean }>): void {
    const c = this.config;
    if (this.access === 'manual' || !isEks(c)) return;
    for (const { name, role, migrator } of roles) {
      const entry = new eks.CfnAccessEntry(this, `${pascal(name)}Access`, {
        clusterName: c.access.clusterName,
        principalArn: role.roleArn,
        type: 'STANDARD',
        kubernetesGroups: migrator ? [CONTROLLERS_GROUP, MIGRATORS_GROUP] : [CONTROLLERS_GROUP],
      });
      this.onlyInRegion(entry);
    }
  }

  private onlyInRegion(resource: CfnResource): void {
    if (this.inRegion) resource.cfnOptions.condition = this.inRegion;
  }

  /**
   * The forwarder's role, for EKS Pod Identity: only pods of this cluster in the forwarder's namespace and service
   * account get it, by the session tags Pod Identity sets, and it may send to this cluster's events queue and
   * dead-letter queue only: a cluster cannot write another's events. In the stack's region the stack associates it
   * with the forwarder's service account. IRSA would need each cluster's OIDC provider ARN, which the cluster
   * configuration does not hold; a cluster outside EKS has no Pod Identity (its forwarder needs credentials of its
   * own, or uses the ingest URL).
   */
  private addForwarder(c: ClusterConfig & { access: { kind: 'eks' } }, forwarder: OutriggerClusterProps['forwarder']): iam.Role {
    // The cluster's ARN, not just its name: a cluster of the same name in another region of the account must not
    // get the role.
    const clusterArn = Stack.of(this).formatArn({
      service: 'eks',
      region: c.access.region,
      resource: 'cluster',
      resourceName: c.access.clusterName,
      arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
    });
    const tags: Record<string, string[]> = {
      'aws:RequestTag/eks-cluster-arn': [clusterArn],
      'aws:RequestTag/kubernetes-namespace': [forwarder.namespace],
      'aws:RequestTag/kubernetes-service-account': [forwarder.serviceAccount],
    };
    const role = new iam.Role(this, 'ForwarderRole', {
      description: `Outrigger forwarder of cluster ${c.id} (EKS Pod Identity): sends its watch events to its events queue`,
      assumedBy: new iam.PrincipalWithConditions(new iam.SessionTagsPrincipal(new iam.ServicePrincipal('pods.eks.amazonaws.com')), {
        StringEquals: tags,
      }),
    });
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: [this.events.queue.queueArn, this.events.deadLetter.queueArn] }),
    );
    if (this.access !== 'manual') {
      const association = new eks.CfnPodIdentityAssociation(this, 'ForwarderPodIdentity', {
        clusterName: c.access.clusterName,
        namespace: forwarder.namespace,
        serviceAccount: forwarder.serviceAccount,
        roleArn: role.roleArn,
      });
      this.onlyInRegion(association);
    }
    return role;
  }

  /**
   * One alarm on the cluster's dead-letter queues and one on its queues' oldest message, each the worst of its
   * queues (the cluster's dashboard row shows which queue): an alarm per queue would add 10 resources per cluster,
   * and a stack holds at most 500. With storage migration on, three on the storage poll's metrics.
   */
  private addAlarms(alarms: Alarms): void {
    const c = this.config;
    const pairs = this.queuePairs();
    if (pairs.length > METRICS_PER_ALARM)
      throw new Error(`cluster ${c.id} has ${pairs.length} queues; one alarm reads at most ${METRICS_PER_ALARM} metrics`);
    const worst = (metric: (p: QueuePair) => cloudwatch.Metric, period: Duration) =>
      new cloudwatch.MathExpression({
        expression: 'MAX(METRICS())',
        usingMetrics: Object.fromEntries(pairs.map(([, p], i) => [`q${i}`, metric(p)])),
        period,
      });
    const atLeastOne = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD;
    alarms.add(
      this,
      'DeadLetters',
      `A dead-letter queue of cluster ${c.id} holds messages: read their reason attribute, fix the cause, redrive`,
      worst((p) => deadLetterMetric(p.deadLetter), Duration.minutes(1)),
      1,
      atLeastOne,
    );
    alarms.add(
      this,
      'OldestMessage',
      `A queue of cluster ${c.id} has a message that waited over ${OLDEST_MESSAGE_ALARM_SECONDS} s: its consumer is failing or falling behind`,
      worst(oldestMessageMetric, Duration.minutes(5)),
      OLDEST_MESSAGE_ALARM_SECONDS,
      cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    );
    // The heartbeat's figures, once a minute: the least of five is the state the whole five minutes long.
    const heartbeat = (metricName: string) =>
      new cloudwatch.Metric({
        namespace: METRICS_NAMESPACE,
        metricName,
        dimensionsMap: { service: METRICS_SERVICE, cluster: c.id },
        statistic: 'Minimum',
        period: Duration.minutes(5),
      });
    alarms.add(
      this,
      'ClusterUnreachable',
      `The apiserver of cluster ${c.id} has not answered the heartbeat for 5 minutes: see the heartbeat log's error (network path, endpoint access, credentials)`,
      heartbeat('ClusterUnreachable'),
      1,
      atLeastOne,
    );
    alarms.add(
      this,
      'ForwarderSilent',
      `The forwarder of cluster ${c.id} has not renewed its leader Lease for over ${FORWARDER_SILENT_SECONDS} s in 5 minutes: kubectl -n outrigger-system get pods,lease`,
      heartbeat('ForwarderSilentSeconds'),
      FORWARDER_SILENT_SECONDS,
      cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    );
    if (c.storage?.enabled !== false) {
      // Published by every storage poll's leader step; three polls' worth, so one poll that did not lead is no gap.
      const overdue = (metricName: string) =>
        new cloudwatch.Metric({
          namespace: METRICS_NAMESPACE,
          metricName,
          dimensionsMap: { service: METRICS_SERVICE, cluster: c.id },
          statistic: 'Maximum',
          period: Duration.minutes(30),
        });
      alarms.add(
        this,
        'StorageUnknown',
        `A StorageState of cluster ${c.id} has listed Unknown for over an hour with no migration under way: see the storage-poll log's leader.overdue`,
        overdue('StorageStatesUnknownOverdue'),
        1,
        atLeastOne,
      );
      alarms.add(
        this,
        'StorageMigrationStuck',
        `A storage version migration of cluster ${c.id} has been Pending, Running or Failed for over an hour: kubectl get svm`,
        overdue('StorageMigrationsOverdue'),
        1,
        atLeastOne,
      );
      alarms.add(
        this,
        'StoragePollMissed',
        `A storage poll reporter of cluster ${c.id} missed a poll: see the storage-poll log's missedPolls; one more in a row resets its StorageStates to Unknown`,
        overdue('StoragePollsMissed'),
        1,
        atLeastOne,
      );
      // Its own alarm, not a missed poll: the poll still vouches for every other resource.
      alarms.add(
        this,
        'StorageDiscoveryFailed',
        `The storage poll of cluster ${c.id} could not read the discovery of a group version that serves StorageStates' resources: they get no heartbeat (condition DiscoveryFailed); after one and a half periods their next report persists Unknown. See the storage-poll log's failedGroups`,
        overdue('StorageStatesUndiscovered'),
        1,
        atLeastOne,
      );
    }
  }
}

/**
 * Each cluster's construct, by cluster id, with the queues every function consumes or sends to. Construct ids and
 * output names are alphanumeric, so two cluster ids that would share one are refused.
 */
export function addClusters(
  scope: Construct,
  clusters: readonly ClusterConfig[],
  shared: Pick<OutriggerClusterProps, 'alarms' | 'forwarder'>,
): Map<string, OutriggerCluster> {
  const eventConsumers = functions.filter((f) => f.events);
  // SQS consumers compete for messages: a second consumer of watch events would need a queue of its own.
  if (eventConsumers.length !== 1)
    throw new Error(`exactly one function consumes watch events, not ${eventConsumers.map((f) => f.name).join(', ') || 'none'}`);
  const syncTargets = functions.flatMap((spec) => (spec.sync ? [{ target: spec.sync.target, timeoutSeconds: spec.timeoutSeconds }] : []));
  const built = new Map<string, OutriggerCluster>();
  const names = new Map<string, string>();
  const regionConditions = new Map<string, CfnCondition>();
  const inRegion = (region: string) => {
    let condition = regionConditions.get(region);
    if (!condition)
      regionConditions.set(
        region,
        (condition = new CfnCondition(scope, `InRegion${pascal(region).replace(/[^A-Za-z0-9]/g, '')}`, {
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
    built.set(
      c.id,
      new OutriggerCluster(scope, name, {
        ...shared,
        config: c,
        eventsConsumerTimeoutSeconds: eventConsumers[0]!.timeoutSeconds,
        // Only those of the controllers that run in it: a queue no one sends to would still be polled.
        syncTargets: syncTargets.filter((t) => syncTargetsIn(c).includes(t.target)),
        inRegion,
      }),
    );
  }
  return built;
}
