// `cdk synth` / `cdk deploy` entry. The clusters come from the context value `outrigger:clusters` (a JSON
// array, in cdk.json or `-c`), in the same shape the functions read from OUTRIGGER_CLUSTERS. MapController hooks
// the map function may invoke: `outrigger:mapHookFunctions` (function names); `outrigger:examples=true` also
// deploys the SnapshotSchedule example's hooks.
import { App } from 'aws-cdk-lib';
import { parseClusters } from '../shared/clusters.ts';
import { OutriggerStack } from './stack.ts';

const app = new App();
const raw: unknown = app.node.tryGetContext('outrigger:clusters');
const clusters = parseClusters(typeof raw === 'string' ? raw : JSON.stringify(raw ?? []));
const hooks: unknown = app.node.tryGetContext('outrigger:mapHookFunctions');
const examples: unknown = app.node.tryGetContext('outrigger:examples');
new OutriggerStack(app, 'Outrigger', {
  clusters,
  mapHookFunctions: typeof hooks === 'string' ? (JSON.parse(hooks) as string[]) : ((hooks as string[] | undefined) ?? []),
  examples: examples === true || examples === 'true',
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
});
