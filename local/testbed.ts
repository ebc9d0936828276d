// Brings up what Outrigger runs against on one machine: the local kube-apiserver (unless a real cluster is
// given) with the project's RBAC installed, and DynamoDB Local with Outrigger's table. The test setup and the
// local runtime both start here, so they run against the same thing.
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '../shared/kube/index.ts';
import { applyManifests } from '../shared/kube/apply.ts';
import { ensureTable, openState } from '../shared/state/index.ts';
import { startTestCluster, type TestCluster } from './apiserver.ts';
import { startDynamoDBLocal, type DynamoDBLocal } from './dynamodb.ts';
import { startElasticMQ, type ElasticMQ } from './elasticmq.ts';
import { projectRoot } from './paths.ts';
import type { Log } from './process.ts';

export const DEFAULT_TABLE = 'outrigger';

export interface Testbed {
  cluster: TestCluster | undefined;
  dynamodb: DynamoDBLocal;
  /** An SQS-compatible server, when asked for (`withQueues`). */
  sqs: ElasticMQ | undefined;
  tableName: string;
  stop(): Promise<void>;
}

/** The manifests every cluster Outrigger manages must have: its CRDs, its RBAC, then its admission policy. */
export async function clusterManifests(): Promise<string> {
  const crdDir = join(projectRoot, 'cluster', 'crds');
  const crds = (await readdir(crdDir)).filter((f) => f.endsWith('.yaml')).sort();
  const docs = await Promise.all(
    [...crds.map((f) => join(crdDir, f)), ...['rbac.yaml', 'admission.yaml'].map((f) => join(projectRoot, 'cluster', f))].map((f) =>
      readFile(f, 'utf8'),
    ),
  );
  return docs.join('\n---\n');
}

export async function startTestbed(opts: { withCluster: boolean; withQueues?: boolean; log?: Log; tableName?: string }): Promise<Testbed> {
  const log = opts.log ?? (() => {});
  const tableName = opts.tableName ?? DEFAULT_TABLE;
  // Both may need a first-time build or download; they do not depend on each other.
  const [cluster, dynamodb, sqs] = await Promise.all([
    opts.withCluster ? startTestCluster({ log }) : Promise.resolve(undefined),
    startDynamoDBLocal({ log }),
    opts.withQueues ? startElasticMQ({ log }) : Promise.resolve(undefined),
  ]);
  const stop = async () => {
    await Promise.allSettled([cluster?.stop(), dynamodb.stop(), sqs?.stop()]);
  };
  try {
    if (cluster) {
      const admin = connect({ kind: 'kubeconfig', path: cluster.kubeconfigs.admin });
      await applyManifests(admin, await clusterManifests());
    }
    await ensureTable(openState({ tableName, endpoint: dynamodb.endpoint }));
  } catch (err) {
    await stop();
    throw err;
  }
  return { cluster, dynamodb, sqs, tableName, stop };
}
