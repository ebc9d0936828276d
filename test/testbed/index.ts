// What integration tests use to reach the test bed. Tests act as the `outrigger` identity (the project's
// own RBAC role) unless they are setting the scene, which the `admin` identity does.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect, gvr, Resources, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { openState, type State } from '../../shared/state/index.ts';
import type { TestCluster } from '../../local/apiserver.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';
import { CreateQueueCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { localSqsClient } from '../../local/elasticmq.ts';
import type { Runtime, RuntimeOptions } from '../../runtime/local.ts';

/** What the global setup hands to the test workers: the cluster's addresses and credentials, and DynamoDB Local's. */
export type TestbedInfo = Pick<TestCluster, 'server' | 'kubeconfigs' | 'tokens' | 'caFile' | 'etcdUrl'> & {
  dynamodbEndpoint: string;
  /** ElasticMQ: an SQS-compatible server on loopback. */
  sqsEndpoint: string;
  tableName: string;
  /**
   * The container engine the global setup started (local/container-engine.ts): its DOCKER_HOST, or why it could not
   * start (the files that need it fail with that reason; the others run).
   */
  containerEngine: { host: string } | { error: string };
};

/** DOCKER_HOST of the bed's container engine; throws why there is none. */
export function containerEngineHost(): string {
  const engine = testbed().containerEngine;
  if ('error' in engine) throw new Error(`the test bed has no container engine: ${engine.error}`);
  return engine.host;
}

export function testbed(): TestbedInfo {
  const file = process.env.OUTRIGGER_TESTBED;
  if (!file) throw new Error('OUTRIGGER_TESTBED is not set: run integration tests through jest (npm test)');
  return JSON.parse(readFileSync(file, 'utf8')) as TestbedInfo;
}

export function adminClient(): KubeClient {
  return connect({ kind: 'kubeconfig', path: testbed().kubeconfigs.admin });
}

export function outriggerClient(opts: Parameters<typeof connect>[1] = {}): KubeClient {
  return connect({ kind: 'kubeconfig', path: testbed().kubeconfigs.outrigger }, opts);
}

export function testState(opts: { now?: () => number } = {}): State {
  const bed = testbed();
  return openState({ tableName: bed.tableName, endpoint: bed.dynamodbEndpoint, ...opts });
}

/** A fresh id, for namespaces and cluster ids, so tests sharing the bed never see each other's objects. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export async function createNamespace(prefix = 'test'): Promise<string> {
  const name = uniqueName(prefix);
  await adminClient().create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return name;
}

/**
 * Waits until `client` may do each of `checks` (a SelfSubjectAccessReview as it): the apiserver's RBAC
 * authorizer reads Roles and bindings from an informer, so a grant just made may not be in effect for a moment,
 * longer on a busy machine, and a request in between is refused as if it had never been made.
 */
export async function grantsInEffect(
  client: KubeClient,
  checks: ReadonlyArray<{ verb: string; group?: string; resource: string; namespace?: string; name?: string }>,
): Promise<void> {
  const reviews = gvr('authorization.k8s.io', 'v1', 'selfsubjectaccessreviews');
  for (const c of checks) {
    await eventually(async () => {
      const review = await client.create<KubeObject>(reviews, {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        metadata: {},
        spec: { resourceAttributes: { group: c.group ?? '', ...c } },
      });
      return (review.status as { allowed?: boolean } | undefined)?.allowed === true;
    });
  }
}

/** The storage migrator's identity: the controllers' role and the migrator's (list and update on everything). */
export function migratorClient(): KubeClient {
  return connect({ kind: 'kubeconfig', path: testbed().kubeconfigs.migrator });
}

/** An SQS client for the test bed's ElasticMQ, and a fresh FIFO queue (with its URL) for one test. */
export async function testQueue(prefix: string): Promise<{ sqs: SQSClient; url: string }> {
  const sqs = localSqsClient(testbed().sqsEndpoint);
  const out = await sqs.send(new CreateQueueCommand({ QueueName: `${uniqueName(prefix)}.fifo`, Attributes: { FifoQueue: 'true' } }));
  return { sqs, url: out.QueueUrl! };
}

/** Polls `probe` until it gives a value other than undefined or false, and returns it; throws after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The local runtime against the test bed, as the `outrigger` identity, running only the named functions, with
 * a cluster id and state directory of its own. Loaded on demand: most test files never start one.
 */
export async function startTestRuntime(prefix: string, names: readonly string[], opts: Partial<RuntimeOptions> = {}): Promise<Runtime> {
  const [{ mkdtemp }, { tmpdir }, { join }, { startRuntime }, { functions }] = await Promise.all([
    import('node:fs/promises'),
    import('node:os'),
    import('node:path'),
    import('../../runtime/local.ts'),
    import('../../functions/index.ts'),
  ]);
  return startRuntime({
    kubeconfig: testbed().kubeconfigs.outrigger,
    clusterId: uniqueName(prefix),
    stateDir: await mkdtemp(join(tmpdir(), `outrigger-${prefix}-`)),
    functions: functions.filter((f) => names.includes(f.name)),
    // The test bed runs one kube-apiserver.
    oneApiserver: true,
    ...opts,
  });
}

/** A cluster's configuration as the functions have it, reaching the test bed as the `outrigger` identity. */
export function testCluster(id: string): ClusterConfig {
  return { id, access: { kind: 'kubeconfig', path: testbed().kubeconfigs.outrigger } };
}

/**
 * Deletes the MapControllers whose hooks call `url` (a test file's hook server, before it closes): their parents'
 * passes would fail from then on, and a later local runtime's resync, or its watch of a cluster-scoped parent,
 * would keep retrying them and never settle.
 */
export async function deleteMapControllersCalling(url: string): Promise<void> {
  const { mapControllers } = await import('../../functions/map/controllers.ts');
  const admin = adminClient();
  for (const mc of await admin.listAll(mapControllers)) {
    if (!JSON.stringify(mc.spec ?? {}).includes(url)) continue;
    // Outrigger's finalizer (a finalize hook's) waits for a runtime that may be gone: the test's parents go with the bed.
    if (mc.metadata.finalizers?.length)
      await admin.patch(mapControllers, { name: mc.metadata.name! }, { metadata: { finalizers: null } }, 'merge').catch(() => undefined);
    await admin.delete(mapControllers, { name: mc.metadata.name! }).catch(() => undefined);
  }
}
