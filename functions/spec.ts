// What Outrigger's functions are, what triggers them and what each needs of AWS. The CDK stack and the local
// runtime both read these declarations, so a function is declared once and runs the same way in AWS and on one
// machine. A declaration is data only: its handler is loaded from `entry` (esbuild bundles it for the stack;
// the local runtime imports it), so a module that reads the declarations bundles no handler.
import type { Context } from 'aws-lambda';
import type { ClusterConfig } from '../shared/clusters.ts';
import type { GVR, KubeClient } from '../shared/kube/index.ts';
import type { ControllerSource, StatusRead } from './controller-source.ts';

// Handlers differ in event and result types; the registry only passes events through.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each handler types its own event
export type LambdaHandler = (event: any, context: Context) => Promise<unknown>;

export interface FunctionSpec {
  /** Also the Lambda function's construct id. */
  name: string;
  description: string;
  /** The handler module, relative to the project root (esbuild's entry point; it exports `handler`). */
  entry: string;
  /** Watch events of these resources are queued for the function (as envelopes); re-read as policies change. */
  events?: {
    resources: (cluster: ClusterConfig, kube: KubeClient) => Promise<GVR[]>;
    /** Resources whose events change `resources`: the forwarder refreshes on each, after `forget`. */
    definitions?: readonly GVR[];
    forget?: (cluster: string) => void;
    /** Of `resources`, those whose events must carry whole objects; the rest are watched as metadata only. */
    wholeObjects?: (cluster: ClusterConfig, kube: KubeClient) => Promise<GVR[]>;
    /** Of the rest, those whose status-only changes are sent too (forwarder/metadata.ts drops them otherwise). */
    statusChanges?: (cluster: ClusterConfig, kube: KubeClient) => Promise<GVR[]>;
    /** Of the parents watched whole, those whose status is read at these paths only (forwarder/metadata.ts#unreadStatusChange). */
    statusReads?: (cluster: ClusterConfig, kube: KubeClient) => Promise<StatusRead[]>;
  };
  /** The router's sync requests for this target are queued for the function (Reconcile(key)). */
  sync?: { target: string };
  /** The sync targets the function sends requests to: in AWS it may send to these queues only. */
  sends?: readonly string[];
  /** Served on a Lambda Function URL (IAM auth); it queues the watch events it receives for the event consumers. */
  functionUrl?: true;
  /** Runs on a schedule, once per period (per cluster and reporter with `perReporter`, the storage poll). */
  schedule?: { everyMinutes: number; perReporter?: boolean };
  /**
   * The receives its sync queue must allow before it dead-letters a message, where the function consumes a
   * failing message itself after fewer (the map function's retries): the local runtime's queue allows this many
   * instead of its default 5; in AWS every queue allows 12 (infra/queues.ts).
   */
  receives?: number;
  /** Seconds; the Lambda timeout and the local runtime's limit for one invocation. */
  timeoutSeconds: number;
  /** The DynamoDB actions its code performs on the state table (docs/design/architecture.md#a-deployment); none: no table access. */
  table?: readonly string[];
  /**
   * How it reaches clusters: as the controllers' identity (`outrigger:controllers`), as the storage migrator's
   * (also `outrigger:migrators`, with a token of its own), or not at all (the ingest function talks to SQS only).
   */
  clusterAccess: 'controllers' | 'migrator' | 'none';
  /** Calls the MapController hooks the deployment names (lambda:InvokeFunction on them, the webhook signing key). */
  callsHooks?: true;
}

/**
 * One controller, declared in one module (docs/contributing/layout.md#adding-a-controller): what the router knows of it (its parent
 * kinds and what to watch) and its functions with their AWS needs. The function registry, the router, the
 * forwarder and the CDK construct all read it from there.
 */
export interface Controller {
  /** As its docs page names it (docs/controllers/). */
  name: string;
  source: ControllerSource;
  /** The kinds that define it (RevisionPolicy, MapController), if any: their events change what is watched and routed. */
  definitions?: readonly GVR[];
  functions: readonly FunctionSpec[];
  /**
   * Whether it runs in a cluster of this configuration (unset: in every one). A cluster it does not run in gets
   * none of its functions' queues, each of which would be polled for nothing (docs/operations/cost.md#idle-polling).
   */
  runsIn?: (config: ClusterConfig) => boolean;
}

/** The sync targets `spec` sends to, checked against the targets the registry's functions consume. */
export function sendTargets(spec: FunctionSpec, registry: readonly FunctionSpec[]): string[] {
  const targets = registry.flatMap((f) => (f.sync ? [f.sync.target] : []));
  for (const t of spec.sends ?? []) {
    if (!targets.includes(t))
      throw new Error(
        `${spec.name} sends to sync target ${JSON.stringify(t)}, which no function consumes (targets: ${targets.join(', ')})`,
      );
  }
  return [...(spec.sends ?? [])];
}
