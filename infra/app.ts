// `cdk synth` / `cdk deploy` entry. The clusters come from the context value `outrigger:clusters` (a JSON
// array, in cdk.json or `-c`), in the same shape the functions read from OUTRIGGER_CLUSTERS.
import { App } from 'aws-cdk-lib';
import { parseClusters } from '../shared/clusters.ts';
import { OutriggerStack } from './stack.ts';

const app = new App();
const raw: unknown = app.node.tryGetContext('outrigger:clusters');
const clusters = parseClusters(typeof raw === 'string' ? raw : JSON.stringify(raw ?? []));
new OutriggerStack(app, 'Outrigger', {
  clusters,
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
});
