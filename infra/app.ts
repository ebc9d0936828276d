// `cdk synth` / `cdk deploy` entry. The clusters come from the context value `outrigger:clusters` (a JSON
// array, in cdk.json or `-c`), in the shape of OUTRIGGER_CLUSTERS (the stack gives it to the functions as a file
// in a layer: OUTRIGGER_CLUSTERS_FILE). MapController hooks the map function may invoke:
// `outrigger:mapHookFunctions` (function names); `outrigger:examples=true` also deploys the SnapshotSchedule
// example's hooks. `outrigger:forwarderNamespace` and `outrigger:forwarderServiceAccount` narrow who may assume
// the forwarder's role (EKS Pod Identity).
import { App, type AppProps } from 'aws-cdk-lib';
import { parseClusters } from '../shared/clusters.ts';
import { OutriggerStack } from './stack.ts';

/** The app as the CDK CLI runs it; tests build it with their own context (and an outdir). */
export function outriggerApp(props: AppProps = {}): { app: App; stack: OutriggerStack } {
  // `sam local invoke -t cdk.out/Outrigger.template.json <FunctionLogicalId>` finds each function's code by the
  // asset metadata. The CDK CLI turns it on; this default covers running the app without the CLI, and the
  // CLI's own context (`--no-asset-metadata`) still wins.
  const app = new App({ ...props, context: { 'aws:cdk:enable-asset-metadata': true, ...props.context } });
  const context = (key: string): unknown => app.node.tryGetContext(`outrigger:${key}`);
  const raw = context('clusters');
  const hooks = context('mapHookFunctions');
  const examples = context('examples');
  const text = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
  const namespace = text(context('forwarderNamespace'));
  const serviceAccount = text(context('forwarderServiceAccount'));
  const stack = new OutriggerStack(app, 'Outrigger', {
    clusters: parseClusters(typeof raw === 'string' ? raw : JSON.stringify(raw ?? [])),
    mapHookFunctions: typeof hooks === 'string' ? (JSON.parse(hooks) as string[]) : ((hooks as string[] | undefined) ?? []),
    examples: examples === true || examples === 'true',
    forwarder: { ...(namespace ? { namespace } : {}), ...(serviceAccount ? { serviceAccount } : {}) },
    env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  });
  return { app, stack };
}

// The CLI runs this file; the App synthesizes itself when the process ends.
if (import.meta.main) outriggerApp();
