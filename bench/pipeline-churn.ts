// bench/pipeline --churn: Outrigger's history pipeline (the local runtime: forwarder, router, history, truncate,
// history-resync, heartbeat) on the nodes-and-pods bed under bench/churn.ts's churn, and what it spends per
// minute of that cluster's life: SQS messages and bytes by queue, Lambda invocations and handler time by
// function, DynamoDB calls by operation (and the capacity units DynamoDB reports), Kubernetes requests by verb.
// The figures and the AWS price dimension each converts to: docs/measurements.md#what-a-busy-cluster-costs.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from 'aws-lambda';
import { functions } from '../functions/index.ts';
import type { FunctionSpec } from '../functions/spec.ts';
import { loadHandler } from '../runtime/load-handler.ts';
import { startRuntime, type RuntimeFunction } from '../runtime/local.ts';
import { environment } from '../shared/lambda/environment.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { Resources } from '../shared/kube/index.ts';
import { DEFAULT_CONTROLLERS, startTestControlPlane } from '../test/testbed/control-plane.ts';
import { STATEFULSET_POLICY } from '../test/testbed/policies.ts';
import { createParents, startChurn, type ChurnCounts } from './churn.ts';

export interface ChurnBenchOptions {
  nodes: number;
  pods: number;
  parents: number;
  podChangesPerMinute: number;
  specChangesPerMinute: number;
  minutes: number;
  log: (m: string) => void;
}

const FUNCTIONS = ['router', 'history', 'history-resync', 'heartbeat'];
const CLUSTER = 'churn';

type Counter = Record<string, number>;
const add = (c: Counter, k: string, n = 1) => {
  c[k] = (c[k] ?? 0) + n;
};
const minus = (after: Counter, before: Counter): Counter =>
  Object.fromEntries(
    Object.entries(after)
      .map(([k, v]) => [k, v - (before[k] ?? 0)])
      .filter(([, v]) => v !== 0),
  );
const perMinute = (c: Counter, minutes: number): Counter =>
  Object.fromEntries(Object.entries(c).map(([k, v]) => [k, Number((v / minutes).toFixed(1))]));

/** The functions as the local runtime runs them, each invocation and its handler time counted by name. */
export function countedFunctions(specs: readonly FunctionSpec[], invocations: Counter, handlerMs: Counter): Promise<RuntimeFunction[]> {
  return Promise.all(
    specs.map(async (f) => {
      const handler = await loadHandler(f);
      return {
        ...f,
        handler: async (event: unknown, context: Context) => {
          const t = performance.now();
          try {
            return await handler(event, context);
          } finally {
            add(invocations, f.name);
            add(handlerMs, f.name, performance.now() - t);
          }
        },
      };
    }),
  );
}

export async function churnBench(opts: ChurnBenchOptions) {
  const { log } = opts;
  const cp = await startTestControlPlane({ controllers: DEFAULT_CONTROLLERS, nodes: opts.nodes });
  log(`bed: ${opts.nodes} nodes ready in ${cp.startedInMs} ms`);
  try {
    const admin = cp.client('admin');
    // kube-controller-manager keeps its own StatefulSet history here: Outrigger coexists with it
    // (docs/controllers/history.md#coexistence).
    await applyManifests(admin, `${STATEFULSET_POLICY}  foreignHistory: Coexist\n`);
    const namespace = `churn-${Date.now().toString(36)}`;
    await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });

    // Lambda invocations and handler time, counted where the runtime calls each handler.
    const invocations: Counter = {};
    const handlerMs: Counter = {};
    const specs = await countedFunctions(
      functions.filter((f) => FUNCTIONS.includes(f.name)),
      invocations,
      handlerMs,
    );
    // The whole cluster, as a deployment watches it (no namespace): node Leases and Nodes are not among what
    // the history functions watch, so heartbeats cost the pipeline nothing unless this says otherwise.
    const runtime = await startRuntime({
      kubeconfig: cp.kubeconfigs.outrigger,
      clusterId: CLUSTER,
      stateDir: await mkdtemp(join(tmpdir(), 'outrigger-churn-')),
      functions: specs,
      log: () => {},
    });
    try {
      // DynamoDB calls by operation, counted on the state adapters' one client, with the capacity each consumed.
      const dynamodb: Counter = {};
      const capacity: Counter = {};
      // The same, by operation: reads and writes apart where DynamoDB Local reports only a total per call.
      const capacityByCommand: Counter = {};
      environment().state.client.middlewareStack.add(
        (next, context) => async (args) => {
          add(dynamodb, context.commandName ?? 'unknown');
          (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity ??= 'TOTAL';
          const out = await next(args);
          const consumed = (out.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
          for (const c of (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as {
            ReadCapacityUnits?: number;
            WriteCapacityUnits?: number;
            CapacityUnits?: number;
          }[]) {
            if (c.ReadCapacityUnits !== undefined || c.WriteCapacityUnits !== undefined) {
              add(capacity, 'read', c.ReadCapacityUnits ?? 0);
              add(capacity, 'write', c.WriteCapacityUnits ?? 0);
            } else add(capacity, 'total', c.CapacityUnits ?? 0);
            add(
              capacityByCommand,
              context.commandName ?? 'unknown',
              c.CapacityUnits ?? (c.ReadCapacityUnits ?? 0) + (c.WriteCapacityUnits ?? 0),
            );
          }
          return out;
        },
        { step: 'initialize', name: 'benchCount' },
      );
      const handlerKube = environment().clusters.client(CLUSTER).stats;

      const churnOpts = {
        admin,
        namespace,
        pods: opts.pods,
        parents: opts.parents,
        podChangesPerMinute: opts.podChangesPerMinute,
        specChangesPerMinute: opts.specChangesPerMinute,
        log,
      };
      await createParents(churnOpts);
      log(`${opts.pods} pods of ${opts.parents} parents Running`);
      await runtime.settled();

      const snapshot = () => ({
        queues: Object.fromEntries([...runtime.queues].map(([name, q]) => [name, { ...q.stats }])),
        invocations: { ...invocations },
        handlerMs: { ...handlerMs },
        dynamodb: { ...dynamodb },
        capacity: { ...capacity },
        capacityByCommand: { ...capacityByCommand },
        forwarderKube: { ...runtime.sourceRequests.byVerb },
        handlerKube: { ...handlerKube.byVerb },
        // `batches`: the SendMessageBatch calls the forwarder makes, batching as it does in a cluster.
        forwarder: runtime
          .forwarderStats()
          .reduce((n, f) => ({ events: n.events + f.events, statusOnly: n.statusOnly + f.statusOnly, batches: n.batches + f.batches }), {
            events: 0,
            statusOnly: 0,
            batches: 0,
          }),
      });
      const before = snapshot();
      const t0 = performance.now();
      const churn = startChurn(churnOpts);
      await sleep(opts.minutes * 60_000);
      const done: ChurnCounts = await churn.stop();
      const minutes = (performance.now() - t0) / 60_000;
      // What the window's changes cause is counted once the pipeline has taken them in (bounded: a pipeline
      // that cannot keep up shows as a long settle).
      const settleStart = performance.now();
      await Promise.race([runtime.settled(), sleep(120_000)]);
      const settleSeconds = (performance.now() - settleStart) / 1000;
      const after = snapshot();

      const queue = (name: string) => {
        const a = after.queues[name]!;
        const b = before.queues[name]!;
        return {
          messages: Number(((a.sent - b.sent) / minutes).toFixed(1)),
          bytes: Math.round((a.bytes - b.bytes) / minutes),
          batches: Number(((a.batches - b.batches) / minutes).toFixed(1)),
          deadLettered: a.deadLettered - b.deadLettered,
        };
      };
      const verbs = (a: Counter, b: Counter) => perMinute(minus(a, b), minutes);
      return {
        bench: 'pipeline-churn',
        nodes: opts.nodes,
        pods: opts.pods,
        parents: opts.parents,
        podChangesPerMinute: opts.podChangesPerMinute,
        specChangesPerMinute: opts.specChangesPerMinute,
        minutes: Number(minutes.toFixed(2)),
        settleSeconds: Number(settleSeconds.toFixed(1)),
        churn: done,
        perMinute: {
          forwarder: {
            watchEvents: Number(((after.forwarder.events - before.forwarder.events) / minutes).toFixed(1)),
            statusOnlyDropped: Number(((after.forwarder.statusOnly - before.forwarder.statusOnly) / minutes).toFixed(1)),
            sendMessageBatchCalls: Number(((after.forwarder.batches - before.forwarder.batches) / minutes).toFixed(1)),
          },
          sqs: Object.fromEntries([...runtime.queues.keys()].map((name) => [name === 'router' ? 'events (router)' : name, queue(name)])),
          lambdaInvocations: verbs(after.invocations, before.invocations),
          lambdaHandlerMs: Object.fromEntries(
            Object.entries(minus(after.handlerMs, before.handlerMs)).map(([k, v]) => [k, Math.round(v / minutes)]),
          ),
          dynamodbCalls: verbs(after.dynamodb, before.dynamodb),
          dynamodbCapacityUnits: verbs(after.capacity, before.capacity),
          dynamodbCapacityUnitsByCall: verbs(after.capacityByCommand, before.capacityByCommand),
          kubeRequests: {
            forwarder: verbs(after.forwarderKube, before.forwarderKube),
            handlers: verbs(after.handlerKube, before.handlerKube),
          },
        },
      };
    } finally {
      await runtime.stop();
    }
  } finally {
    await cp.stop();
  }
}
