// What Outrigger's functions are and what triggers them. The CDK stack and the local runtime both read this
// list, so a function is declared once and runs the same way in AWS and on one machine.
import type { Context } from 'aws-lambda';
import type { GVR, KubeClient } from '../shared/kube/index.ts';

// Handlers differ in event and result types; the registry only passes events through.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each handler types its own event
export type LambdaHandler = (event: any, context: Context) => Promise<unknown>;

export interface FunctionSpec {
  /** Also the Lambda function's construct id. */
  name: string;
  description: string;
  /** The handler module, relative to the project root (esbuild's entry point). */
  entry: string;
  load: () => Promise<{ handler: LambdaHandler }>;
  /** Watch events of these resources are queued for the function (as envelopes); re-read as policies change. */
  events?: {
    resources: (cluster: string, kube: KubeClient) => Promise<GVR[]>;
    /** Resources whose events change `resources`: the forwarder refreshes on each, after `forget`. */
    definitions?: readonly GVR[];
    forget?: (cluster: string) => void;
    /** Of `resources`, those whose events must carry whole objects; the rest are watched as metadata only. */
    wholeObjects?: (cluster: string, kube: KubeClient) => Promise<GVR[]>;
  };
  /** The router's sync requests for this target are queued for the function (Reconcile(key)). */
  sync?: { target: string };
  /** The sync targets the function sends requests to: in AWS it may send to these queues only. */
  sends?: readonly string[];
  /** Served on a Lambda Function URL (IAM auth); it queues the watch events it receives for the event consumers. */
  functionUrl?: true;
  /** Runs on a schedule, once per period (per cluster and reporter with `perReporter`, the storage poll). */
  schedule?: { everyMinutes: number; perReporter?: boolean };
  /** Seconds; the Lambda timeout and the local runtime's limit for one invocation. */
  timeoutSeconds: number;
}

/** The sync targets `spec` sends to, checked against the targets the registry's functions consume. */
export function sendTargets(spec: FunctionSpec, registry: readonly FunctionSpec[]): string[] {
  const targets = registry.flatMap((f) => (f.sync ? [f.sync.target] : []));
  for (const t of spec.sends ?? []) {
    if (!targets.includes(t)) throw new Error(`${spec.name} sends to sync target ${JSON.stringify(t)}, which no function consumes (targets: ${targets.join(', ')})`);
  }
  return [...(spec.sends ?? [])];
}
