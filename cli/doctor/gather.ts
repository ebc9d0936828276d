// `outrigger doctor`'s reads: for each cluster, what findings.ts judges. Reads only (gets, one GetQueueAttributes
// per dead-letter queue, the EKS describes and lists), so it is safe against a production cluster; every object is
// compared with the manifest the checkout ships (cluster/, deploy/forwarder/base).
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { load, loadAll } from 'js-yaml';
import { functions, syncTargetsIn } from '../../functions/index.ts';
import { storagePlan, unsafeStorage, type ClusterConfig } from '../../shared/clusters.ts';
import { gvr, Resources, type GVR, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { EVENTS_QUEUE, type QueueUrls } from '../../shared/lambda/queues.ts';
import { MIGRATION_GROUP, MIGRATION_VERSION, migratorRole, type StorageState } from '../../shared/storage/index.ts';
import { gatherEks, type EksApi } from './eks.ts';
import type { ClusterFacts, DeadLetterQueue, EksFacts, ForwarderFacts, StorageReporterFacts } from './findings.ts';
import type { Shipped } from './shipped.ts';

const rbac = (resource: string) => gvr('rbac.authorization.k8s.io', 'v1', resource);
const RESOURCES: Record<string, GVR> = {
  ClusterRole: rbac('clusterroles'),
  ClusterRoleBinding: rbac('clusterrolebindings'),
  Role: rbac('roles'),
  RoleBinding: rbac('rolebindings'),
  ServiceAccount: Resources.serviceAccounts,
  CustomResourceDefinition: Resources.customResourceDefinitions,
  ValidatingAdmissionPolicy: gvr('admissionregistration.k8s.io', 'v1', 'validatingadmissionpolicies'),
  ValidatingAdmissionPolicyBinding: gvr('admissionregistration.k8s.io', 'v1', 'validatingadmissionpolicybindings'),
};
const deployments = gvr('apps', 'v1', 'deployments');
const configMaps = gvr('', 'v1', 'configmaps');
const secrets = gvr('', 'v1', 'secrets');
/** The Secret the forwarder's Deployment mounts its key from (deploy/forwarder/base/deployment.yaml). */
export const FORWARDER_KEY_SECRET = 'outrigger-forwarder-key';

/** The manifests the checkout ships, each object with its file (relative to the checkout, as fixes name it). */
export interface Manifests {
  crds: Array<{ file: string; object: KubeObject }>;
  rbac: Array<{ file: string; object: KubeObject }>;
  /** The admission policy on the ServiceAccounts definitions name, and its binding. */
  admission: Array<{ file: string; object: KubeObject }>;
  forwarder: {
    namespace: string;
    /** ServiceAccount and RBAC, in the base's namespace. */
    objects: Array<{ file: string; object: KubeObject }>;
    lease: string;
    checkpoint: string;
  };
}

async function objectsOf(root: string, file: string): Promise<Array<{ file: string; object: KubeObject }>> {
  const docs = loadAll(await readFile(join(root, file), 'utf8')) as unknown[];
  return docs.filter((d): d is KubeObject => typeof d === 'object' && d !== null).map((object) => ({ file, object }));
}

export async function readManifests(root: string): Promise<Manifests> {
  const crdFiles = (await readdir(join(root, 'cluster', 'crds'))).filter((f) => f.endsWith('.yaml')).sort();
  const crds = (await Promise.all(crdFiles.map((f) => objectsOf(root, join('cluster', 'crds', f))))).flat();
  const base = join('deploy', 'forwarder', 'base');
  const kustomization = load(await readFile(join(root, base, 'kustomization.yaml'), 'utf8')) as {
    namespace: string;
    configMapGenerator: Array<{ literals?: string[] }>;
  };
  const literal = (name: string) => {
    const line = kustomization.configMapGenerator.flatMap((g) => g.literals ?? []).find((l) => l.startsWith(`${name}=`));
    if (!line) throw new Error(`${base}/kustomization.yaml sets no ${name}`);
    return line.slice(name.length + 1);
  };
  return {
    crds,
    rbac: await objectsOf(root, join('cluster', 'rbac.yaml')),
    admission: await objectsOf(root, join('cluster', 'admission.yaml')),
    forwarder: {
      namespace: kustomization.namespace,
      objects: [...(await objectsOf(root, join(base, 'serviceaccount.yaml'))), ...(await objectsOf(root, join(base, 'rbac.yaml')))],
      lease: literal('OUTRIGGER_LEADER_ELECTION_LEASE'),
      checkpoint: literal('OUTRIGGER_CHECKPOINT_CONFIGMAP'),
    },
  };
}

/** The base's objects as an overlay installs them in `namespace` (its ServiceAccount subjects follow, as the overlay patches them). */
function inNamespace(o: KubeObject, namespace: string): KubeObject {
  const namespaced = o.kind !== 'ClusterRole' && o.kind !== 'ClusterRoleBinding';
  const subjects = (o as { subjects?: Array<{ kind: string; namespace?: string }> }).subjects;
  return {
    ...o,
    metadata: { ...o.metadata, ...(namespaced ? { namespace } : {}) },
    ...(subjects ? { subjects: subjects.map((s) => (s.kind === 'ServiceAccount' ? { ...s, namespace } : s)) } : {}),
  } as KubeObject;
}

async function installed(kube: KubeClient, m: { file: string; object: KubeObject }): Promise<Shipped> {
  const r = RESOURCES[m.object.kind ?? ''];
  if (!r) throw new Error(`${m.file}: the doctor does not check ${m.object.kind} objects`);
  return { ...m, installed: await kube.find(r, { name: m.object.metadata.name ?? '', namespace: m.object.metadata.namespace }) };
}

/** The latest write to an object: the newest managedFields time (its creation when it has none). */
function lastWritten(o: KubeObject): string | undefined {
  const fields = (o.metadata.managedFields ?? []) as Array<{ time?: string }>;
  const times = fields.map((f) => f.time).filter((t): t is string => typeof t === 'string');
  return times.sort().at(-1) ?? o.metadata.creationTimestamp ?? undefined;
}

async function forwarderFacts(kube: KubeClient, m: Manifests['forwarder'], namespace: string): Promise<ForwarderFacts> {
  type Deployment = KubeObject & { spec?: { replicas?: number }; status?: { readyReplicas?: number } };
  type Lease = KubeObject & { spec?: { holderIdentity?: string; renewTime?: string } };
  const [objects, deployment, lease, checkpoint, keySecret] = await Promise.all([
    Promise.all(m.objects.map((o) => installed(kube, { file: o.file, object: inNamespace(o.object, namespace) }))),
    kube.find<Deployment>(deployments, { name: 'outrigger-forwarder', namespace }),
    kube.find<Lease>(Resources.leases, { name: m.lease, namespace }),
    kube.find(configMaps, { name: m.checkpoint, namespace }),
    kube.find<KubeObject & { data?: Record<string, string> }>(secrets, { name: FORWARDER_KEY_SECRET, namespace }),
  ]);
  const key = keySecret?.data?.key;
  return {
    namespace,
    objects,
    leaseName: m.lease,
    checkpointName: m.checkpoint,
    deployment: deployment && { replicas: deployment.spec?.replicas ?? 1, readyReplicas: deployment.status?.readyReplicas ?? 0 },
    lease: lease?.spec,
    checkpointWrittenAt: checkpoint && lastWritten(checkpoint),
    // Only whether it looks like a key: its value is not printed.
    key: !keySecret ? 'absent' : key && /^[0-9a-f]{64}$/.test(Buffer.from(key, 'base64').toString('utf8').trim()) ? 'present' : 'malformed',
  };
}

/**
 * A cluster's queues: the events queue and one per sync target (infra: one per function with `sync`), of the
 * controllers that run in it when its configuration is known (storage migration off: no storage or migrator queue).
 */
export function clusterQueues(config?: ClusterConfig): string[] {
  return [EVENTS_QUEUE, ...(config ? syncTargetsIn(config) : functions.flatMap((f) => (f.sync ? [f.sync.target] : [])))];
}

async function deadLetters(sqs: SQSClient, urls: QueueUrls, cluster: string, config?: ClusterConfig): Promise<DeadLetterQueue[]> {
  return Promise.all(
    clusterQueues(config).map(async (queue): Promise<DeadLetterQueue> => {
      const url = urls.url(cluster, queue, true);
      const name = urls.name(cluster, queue, true);
      try {
        const { Attributes: a = {} } = await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: url,
            AttributeNames: [
              'QueueArn',
              'ApproximateNumberOfMessages',
              'ApproximateNumberOfMessagesNotVisible',
              'ApproximateNumberOfMessagesDelayed',
            ],
          }),
        );
        const messages = ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed']
          .map((k) => Number(a[k as keyof typeof a] ?? 0))
          .reduce((x, y) => x + y, 0);
        const arn = a.QueueArn;
        return { name, url, arn, sourceArn: arn?.replace(/-dlq\.fifo$/, '.fifo'), messages };
      } catch (err) {
        return {
          name,
          url,
          arn: undefined,
          sourceArn: undefined,
          messages: undefined,
          error: `${(err as Error).name}: ${(err as Error).message}`,
        };
      }
    }),
  );
}

export interface ClusterTarget {
  id: string;
  /** Its entry in the cluster configuration, when one was given. */
  config: ClusterConfig | undefined;
  kube: KubeClient;
  /** `kubectl` as fixes run it for this cluster (its --kubeconfig and --context). */
  kubectl: string;
}

export interface GatherOptions {
  manifests: Manifests;
  /** The deployment's queue URL prefix (OUTRIGGER_QUEUE_URL_PREFIX's form), or why the queues are not checked. */
  queues: { urls: QueueUrls; sqs: SQSClient; endpoint?: string | undefined } | { skipped: string };
  eks: (region: string) => EksApi;
  expected: (cluster: string) => EksFacts['expected'];
  forwarderNamespace?: string | undefined;
  overlayArgs: string;
  now?: () => Date;
}

export async function gatherCluster(t: ClusterTarget, o: GatherOptions): Promise<ClusterFacts> {
  const storage = t.config?.storage;
  const namespace = o.forwarderNamespace ?? o.manifests.forwarder.namespace;
  const access = t.config?.access;
  const eks: Promise<ClusterFacts['eks']> =
    access?.kind === 'eks'
      ? gatherEks(
          o.eks(access.region),
          { clusterName: access.clusterName, region: access.region, forwarderNamespace: namespace },
          o.expected(t.id),
        )
      : Promise.resolve({
          skipped: access
            ? `not an EKS cluster: its configuration's access is ${access.kind}`
            : 'not known to be an EKS cluster: no cluster configuration names it (pass --clusters)',
        });
  const queues = 'skipped' in o.queues ? Promise.resolve(o.queues) : deadLetters(o.queues.sqs, o.queues.urls, t.id, t.config);
  const facts = {
    cluster: t.id,
    kubectl: t.kubectl,
    overlayArgs: o.overlayArgs,
    storage: storage?.enabled !== false && (storage?.migrations ?? 'outrigger') === 'outrigger',
    deadLetters: await queues,
    sqsEndpoint: 'skipped' in o.queues ? undefined : o.queues.endpoint,
    eks: await eks,
  };
  let version: string;
  try {
    version = (await t.kube.getPath<{ gitVersion: string }>('/version')).gitVersion;
  } catch (err) {
    return { ...facts, now: (o.now ?? (() => new Date()))(), apiserver: { error: (err as Error).message } };
  }
  const [crds, rbacObjects, narrowedMigratorRole, admission, forwarder, storageReporters] = await Promise.all([
    Promise.all(o.manifests.crds.map((m) => installed(t.kube, m))),
    Promise.all(o.manifests.rbac.map((m) => installed(t.kube, m))),
    facts.storage ? narrowedRole(t.kube) : undefined,
    Promise.all(o.manifests.admission.map((m) => installed(t.kube, m))),
    forwarderFacts(t.kube, o.manifests.forwarder, namespace),
    t.config && storage?.enabled !== false ? storageReporterFacts(t.kube, t.config) : undefined,
  ]);
  return {
    ...facts,
    now: (o.now ?? (() => new Date()))(),
    apiserver: { version },
    crds,
    rbac: rbacObjects,
    ...(narrowedMigratorRole ? { narrowedMigratorRole } : {}),
    admission,
    forwarder,
    ...(storageReporters ? { storageReporters } : {}),
  };
}

/** What `outrigger migrator-role` would print for the cluster, when its StorageStates can be read and it has any. */
async function narrowedRole(kube: KubeClient): Promise<KubeObject | undefined> {
  const states = await kube.listAll<StorageState>(gvr(MIGRATION_GROUP, MIGRATION_VERSION, 'storagestates')).catch(() => []);
  return states.length ? migratorRole(states) : undefined;
}

/** The configuration's reporters and the apiservers the cluster runs, as their identity leases show. */
async function storageReporterFacts(kube: KubeClient, config: ClusterConfig): Promise<StorageReporterFacts> {
  const plan = storagePlan(config);
  let apiservers: StorageReporterFacts['apiservers'];
  try {
    const leases = await kube.listAll(Resources.leases, {
      namespace: 'kube-system',
      labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver',
    });
    apiservers = leases.length;
  } catch (err) {
    apiservers = { error: (err as Error).message };
  }
  return { unsafe: unsafeStorage(config), reporters: plan.reporters.length, samples: plan.samples, apiservers };
}
