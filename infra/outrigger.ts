// The Outrigger construct: a whole deployment in one stack. The state table, per cluster its queues, alarms,
// forwarder role and (EKS in the stack's region) access entries and Pod Identity association (infra/cluster.ts),
// every function in functions/index.ts with only the permissions it uses, the ingest Function URL, the schedules,
// and a dashboard. The repository's own app (infra/app.ts) is one use of it; docs/getting-started/deploy.md has another.
import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { functions } from '../functions/index.ts';
import type { ClusterConfig } from '../shared/clusters.ts';
import { TABLE } from '../shared/state/table.ts';
import { addClusters, type OutriggerCluster } from './cluster.ts';
import { deployableClusters } from './config.ts';
import { addForwarderImage, FORWARDER_PLATFORMS } from './forwarder-image.ts';
import { addClustersLayer, addFunction, grantClusterAccess, tokenSecrets, type FunctionSettings } from './functions.ts';
import { addMapHooks, type BoundHookFunction } from './hooks.ts';
import { addIngestUrl, ingestDeadLetter } from './ingest.ts';
import { addDashboard, Alarms } from './monitoring.ts';
import { output } from './names.ts';
import { queueUrlPrefix } from './queues.ts';

/** Where the forwarder's kustomize base (deploy/forwarder/base) runs it: its Pod Identity association's default. */
export const DEFAULT_FORWARDER = { namespace: 'outrigger-system', serviceAccount: 'outrigger-forwarder' } as const;

export interface OutriggerProps {
  /**
   * The clusters this deployment serves, in the shape of OUTRIGGER_CLUSTERS (shared/clusters.ts): EKS clusters
   * (reached with the functions' IAM roles) or clusters whose token is in Secrets Manager. Checked at synth: an
   * unknown field, a placeholder or another kind of access fails with the cluster's id and the field.
   */
  clusters: readonly ClusterConfig[];
  /**
   * Lambda functions definitions name as hooks (by name, in this account and region, or the function), each bound to
   * the definitions that may call it: the map function may invoke these only, and each only for its callers
   * (docs/reference/hooks.md#who-may-call-a-lambda-hook).
   */
  mapHookFunctions?: readonly BoundHookFunction[];
  /** Also deploy the SnapshotSchedule example's hooks (examples/snapshot-schedule), under the names its MapController uses. */
  examples?: boolean;
  /**
   * Where webhooks may go (docs/reference/hooks.md#where-webhooks-may-go): host names (`hooks.example.com`,
   * `*.example.com`) and addresses or CIDR ranges. Given, a webhook's host must be listed; either way, a loopback,
   * private, link-local, instance metadata or reserved address is reached only when a listed range holds it.
   */
  webhookAllow?: readonly string[];
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
   * The functions' and their layer's architecture (default ARM_64, Graviton). X86_64 where Graviton is not offered,
   * or to run the synthesized functions on an x86 machine (`sam local invoke` without emulation,
   * docs/contributing/invoking-locally.md#with-docker-sam).
   */
  architecture?: lambda.Architecture;
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

  constructor(scope: Construct, id: string, props: OutriggerProps) {
    super(scope, id);
    const clusters = deployableClusters(props.clusters);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;

    // The state table: leases, records and the storage controller's decision log.
    this.table = new dynamodb.TableV2(this, 'State', {
      partitionKey: { name: TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: TABLE.sortKey, type: dynamodb.AttributeType.STRING },
      timeToLiveAttribute: TABLE.timeToLiveAttribute,
      billing: dynamodb.Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy,
    });

    // Every alarm notifies one topic.
    this.alarmTopic = props.alarmTopic ?? new sns.Topic(this, 'Alarms', { displayName: 'Outrigger alarms', enforceSSL: true });
    this.alarms = new Alarms(this.alarmTopic);

    // Per cluster: its queues, alarms, forwarder role and access.
    for (const [clusterId, cluster] of addClusters(this, clusters, {
      alarms: this.alarms,
      forwarder: { ...DEFAULT_FORWARDER, ...props.forwarder },
    }))
      this.clusters.set(clusterId, cluster);
    this.ingestDeadLetter = ingestDeadLetter(this);

    // The functions, each with only the permissions it uses, and their access to the clusters.
    if (props.vpc) {
      this.securityGroups = props.securityGroups ?? [
        new ec2.SecurityGroup(this, 'FunctionsSecurityGroup', {
          vpc: props.vpc,
          description: 'Outrigger functions: outbound to the cluster API servers and AWS APIs; nothing inbound',
          allowAllOutbound: true,
        }),
      ];
    }
    const settings: FunctionSettings = { ...props, securityGroups: this.securityGroups };
    this.clustersLayer = addClustersLayer(this, clusters, props.architecture);
    const deps = {
      settings,
      removalPolicy,
      table: this.table,
      clustersLayer: this.clustersLayer,
      clusters: [...this.clusters.values()],
      alarms: this.alarms,
      ingestDeadLetter: this.ingestDeadLetter,
      secrets: tokenSecrets(clusters),
    };
    for (const spec of functions) this.functions.set(spec.name, addFunction(this, spec, deps));
    // The heartbeat reads the forwarder leader's Lease where the forwarder is installed (ForwarderSilentSeconds).
    this.functions
      .get('heartbeat')
      ?.addEnvironment('OUTRIGGER_FORWARDER_NAMESPACE', props.forwarder?.namespace ?? DEFAULT_FORWARDER.namespace);
    grantClusterAccess(this, this.functions, this.clusters);

    // The ingest URL, and what an operator reads off the stack.
    this.ingestUrl = addIngestUrl(this, this.functions, this.ingestDeadLetter, this.alarms);
    output(this, 'AlarmTopicArn', 'Every alarm notifies this topic: subscribe to it', this.alarmTopic.topicArn);
    output(
      this,
      'QueueUrlPrefix',
      "What each sync queue's URL starts with (OUTRIGGER_QUEUE_URL_PREFIX): npm run sam-env reads it",
      queueUrlPrefix(this),
    );

    // The hooks the map function may call, the forwarder's image, and the dashboard.
    addMapHooks(this, this.functions, props, settings, removalPolicy);
    if (props.forwarderImage) {
      // The prop before 0.x's multi-platform image: refused by name rather than read as the default's two platforms.
      if ('platform' in props.forwarderImage) throw new Error('forwarderImage.platform is now forwarderImage.platforms: a list');
      addForwarderImage(this, props.forwarderImage.platforms ?? FORWARDER_PLATFORMS, settings);
    }
    addDashboard(this, 'Dashboard', {
      alarms: this.alarms,
      functions: this.functions,
      clusters: new Map([...this.clusters].map(([id, c]) => [id, c.queuePairs()])),
      ingestDeadLetter: this.ingestDeadLetter,
    });
  }
}
