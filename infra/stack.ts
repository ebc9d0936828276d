// The Outrigger stack: the state table and every function in functions/index.ts, each with only the
// permissions it uses. Queues, the forwarder's ingest path, alarms and the dashboard arrive with the
// forwarder issue; each handler issue adds its function to the registry and its permissions here.
import { ArnFormat, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Construct } from 'constructs';
import { join } from 'node:path';
import { functions } from '../functions/index.ts';
import type { FunctionSpec } from '../functions/spec.ts';
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
}

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

  constructor(scope: Construct, id: string, props: OutriggerStackProps) {
    super(scope, id, props);
    const clusters = parseClusters(JSON.stringify(props.clusters));
    for (const c of clusters) {
      if (c.access.kind !== 'eks') throw new Error(`cluster ${c.id}: a deployed stack reaches clusters through EKS IAM tokens, not ${c.access.kind}`);
    }

    this.table = new dynamodb.TableV2(this, 'State', {
      partitionKey: { name: TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: TABLE.sortKey, type: dynamodb.AttributeType.STRING },
      timeToLiveAttribute: TABLE.timeToLiveAttribute,
      billing: dynamodb.Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: RemovalPolicy.RETAIN,
    });

    for (const spec of functions) this.addFunction(spec, clusters);

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
      mainFields: ['module', 'main'],
      // Some dependencies are CommonJS and call require() for built-ins.
      banner: "import { createRequire as __outriggerRequire } from 'node:module'; const require = __outriggerRequire(import.meta.url);",
    },
  };
}

function fnId(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}
