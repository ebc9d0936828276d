// `cdk synth` / `cdk deploy` entry: the repository's own use of the Outrigger construct (infra/outrigger.ts), one
// stack named Outrigger, configured from context (`-c key=value` or cdk.json; docs/reference/configuration.md#cdk-context):
//   outrigger:clusters          the cluster configuration (a JSON array, in the shape of OUTRIGGER_CLUSTERS), or
//   outrigger:clustersFile      a file holding it
//   outrigger:mapHookFunctions  Lambda functions definitions may call, each with its callers
//   outrigger:examples=true     also the SnapshotSchedule example's hooks
//   outrigger:webhookAllow      where webhooks may go: host names and address ranges (a JSON array)
//   outrigger:forwarderNamespace, outrigger:forwarderServiceAccount   where the forwarder runs in each cluster
//   outrigger:forwarderImage    build the forwarder's image: `true` for linux/amd64 and linux/arm64, or the platforms
//                               themselves, comma-separated (linux/arm64 for Graviton nodes only)
//   outrigger:architecture      the functions' architecture: arm64 (the default) or x86_64 (`sam local invoke` on
//                               an x86 machine, or a region without Graviton)
// Anything else a user would set (a VPC, an alarm topic, log retention) is a prop of the construct, in an app of
// their own.
import { Annotations, App, CfnWaitConditionHandle, Stack, type AppProps } from 'aws-cdk-lib';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import { Architecture } from 'aws-cdk-lib/aws-lambda';
import { readFileSync } from 'node:fs';
import type { ClusterConfig } from '../shared/clusters.ts';
import type { BoundHookFunction } from './hooks.ts';
import { OutriggerStack } from './stack.ts';

/** The app was given no cluster configuration. */
export class NoClustersError extends Error {
  constructor() {
    super(
      "no clusters: pass -c outrigger:clustersFile=clusters.json (or -c outrigger:clusters='[...]'); docs/getting-started/deploy.md writes the file",
    );
  }
}

/** The app as the CDK CLI runs it; tests build it with their own context (and an outdir). */
export function outriggerApp(props: AppProps = {}): { app: App; stack: OutriggerStack } {
  // `sam local invoke -t cdk.out/Outrigger.template.json <FunctionLogicalId>` finds each function's code by the
  // asset metadata. The CDK CLI turns it on; this default covers running the app without the CLI, and the
  // CLI's own context (`--no-asset-metadata`) still wins.
  const app = new App({ ...props, context: { 'aws:cdk:enable-asset-metadata': true, ...props.context } });
  const context = (key: string): unknown => app.node.tryGetContext(`outrigger:${key}`);
  // A misspelt key would otherwise be ignored, and its setting silently not applied.
  const known = [
    'clusters',
    'clustersFile',
    'mapHookFunctions',
    'examples',
    'webhookAllow',
    'forwarderNamespace',
    'forwarderServiceAccount',
    'forwarderImage',
    'architecture',
  ].map((k) => `outrigger:${k}`);
  for (const key of Object.keys(app.node.getAllContext() as Record<string, unknown>)) {
    if (key.startsWith('outrigger:') && !known.includes(key)) throw new Error(`unknown context ${key} (known: ${known.join(', ')})`);
  }
  const json = (key: string): unknown => {
    const value = context(key);
    try {
      return typeof value === 'string' ? (JSON.parse(value) as unknown) : value;
    } catch (err) {
      throw new Error(`context outrigger:${key} is not JSON: ${(err as Error).message}`, { cause: err });
    }
  };
  const text = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
  const file = text(context('clustersFile'));
  const clusters = file ? (JSON.parse(readFileSync(file, 'utf8')) as unknown) : json('clusters');
  if (clusters === undefined) throw new NoClustersError();
  if (!Array.isArray(clusters)) throw new Error(`the cluster configuration${file ? ` in ${file}` : ''} is not a JSON array`);
  const namespace = text(context('forwarderNamespace'));
  const serviceAccount = text(context('forwarderServiceAccount'));
  const examples = context('examples');
  const image = context('forwarderImage');
  const platforms =
    image === true || image === 'true'
      ? []
      : image === false || image === 'false'
        ? undefined
        : text(image)
            ?.split(',')
            .map((p) => p.trim());
  for (const p of platforms ?? []) {
    if (p !== 'linux/arm64' && p !== 'linux/amd64')
      throw new Error(
        `context outrigger:forwarderImage names ${JSON.stringify(p)}: true, false, or linux/amd64 and/or linux/arm64, comma-separated`,
      );
  }
  const architecture = context('architecture') ?? 'arm64';
  if (architecture !== 'arm64' && architecture !== 'x86_64')
    throw new Error(`context outrigger:architecture is ${JSON.stringify(architecture)}: arm64 or x86_64`);
  const stack = new OutriggerStack(app, 'Outrigger', {
    // Checked by the construct, which names the cluster and field of anything wrong.
    clusters: clusters as ClusterConfig[],
    // Checked by the construct, which names an entry without callers.
    mapHookFunctions: (json('mapHookFunctions') as BoundHookFunction[] | undefined) ?? [],
    examples: examples === true || examples === 'true',
    ...(json('webhookAllow') === undefined ? {} : { webhookAllow: json('webhookAllow') as string[] }),
    forwarder: { ...(namespace ? { namespace } : {}), ...(serviceAccount ? { serviceAccount } : {}) },
    architecture: architecture === 'x86_64' ? Architecture.X86_64 : Architecture.ARM_64,
    ...(platforms ? { forwarderImage: platforms.length ? { platforms: platforms.map((p) => Platform.custom(p)) } : {} } : {}),
    env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  });
  return { app, stack };
}

/**
 * The app without a cluster configuration: `cdk bootstrap` runs the app for the account and region of its stacks,
 * and docs/getting-started/deploy.md bootstraps (step 1) before clusters.json exists. An empty stack named
 * as the real one gives them; its error still fails `cdk synth` and `cdk deploy`, with what to pass.
 */
export function noClustersApp(props: AppProps = {}): App {
  const app = new App(props);
  const stack = new Stack(app, 'Outrigger', { env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION } });
  Annotations.of(stack).addError(new NoClustersError().message);
  // A template holds at least one resource (CloudFormation's F0001, which synth would warn of); this one is inert.
  new CfnWaitConditionHandle(stack, 'NoClusters');
  return app;
}

// The CLI runs this file; the App synthesizes itself when the process ends.
if (import.meta.main) {
  try {
    outriggerApp();
  } catch (err) {
    if (!(err instanceof NoClustersError)) throw err;
    noClustersApp();
  }
}
