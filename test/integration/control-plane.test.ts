// The wider bed proves itself: several apiservers on one etcd, each with its own identity lease, behind a load
// balancer; a rolling upgrade for real (one apiserver restarted as the previous minor, so two apiservers serve
// different storage versions of one resource at once); kube-controller-manager's garbage collector applying
// the deletion rules of docs/controllers/ownership-and-routing.md#with-the-garbage-collector to the revisions Outrigger owns; PVCs that can be deleted; and etcd compaction
// expiring a list's continue token.
import { policyFor, listPolicies, forgetPolicies } from '../../functions/history/policies.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { PARENT_LABEL, type ControllerRevision } from '../../shared/history/revisions.ts';
import { Resources, discoverStorageVersions, gvr, isKubeError, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf, type SyncKey } from '../../shared/ownership/index.ts';
import { EMULATE_PREVIOUS_MINOR } from '../../local/apiserver.ts';
import { GC_CONTROLLERS, startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { compactEtcd, recordCompaction } from '../testbed/etcd.ts';
import { STATEFULSET_POLICY } from '../testbed/policies.ts';
import { eventually, testState, uniqueName } from '../testbed/index.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const configMaps = gvr('', 'v1', 'configmaps');
const pvcs = gvr('', 'v1', 'persistentvolumeclaims');
const leases = gvr('coordination.k8s.io', 'v1', 'leases');

let cp: TestControlPlane;
let admin: KubeClient;

beforeAll(async () => {
  cp = await startTestControlPlane({ apiservers: 2, controllers: GC_CONTROLLERS });
  process.stderr.write(`[control plane] 2 apiservers and kube-controller-manager ready in ${cp.startedInMs} ms\n`);
  admin = cp.client('admin');
}, 180_000);

afterAll(async () => {
  await cp?.stop();
});

async function namespace(prefix: string): Promise<string> {
  const name = uniqueName(prefix);
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return name;
}

/** storageVersionHash by `group/resource`, as one apiserver's discovery serves it. */
async function hashes(client: KubeClient): Promise<Map<string, string>> {
  const found = await discoverStorageVersions(client);
  return new Map(found.resources.map((r) => [`${r.group}/${r.resource}`, r.storageVersionHash]));
}

describe('a control plane of two apiservers', () => {
  test('each apiserver holds an identity lease of its own; the load balancer serves while one is down', async () => {
    const identities = await admin.list<KubeObject>(leases, {
      namespace: 'kube-system',
      labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver',
    });
    expect(identities.items.map((l) => l.metadata.labels?.['kubernetes.io/hostname']).sort()).toEqual(['apiserver-1', 'apiserver-2']);

    await cp.stopApiserver('apiserver-1');
    try {
      // Fresh clients make fresh connections: each must land on the one that still serves.
      for (let i = 0; i < 4; i += 1) await expect(cp.client('admin').list(configMaps, { namespace: 'default' })).resolves.toBeDefined();
    } finally {
      await cp.startApiserver('apiserver-1');
    }
    expect((await cp.status()).every((a) => a.serving)).toBe(true);
  });

  test('a rolling upgrade: while one apiserver runs as the previous minor, the two disagree on storage versions', async () => {
    const before = await hashes(cp.clientOf('apiserver-1', 'admin'));
    await cp.restartApiserver('apiserver-2', EMULATE_PREVIOUS_MINOR);
    try {
      const [upgraded, previous] = await Promise.all([
        hashes(cp.clientOf('apiserver-1', 'admin')),
        hashes(cp.clientOf('apiserver-2', 'admin')),
      ]);
      const differing = [...upgraded.keys()].filter((k) => previous.has(k) && previous.get(k) !== upgraded.get(k)).sort();
      process.stderr.write(`[control plane] storageVersionHash differs under --emulated-version=1.34 for: ${differing.join(', ')}\n`);
      expect(differing).toEqual([
        'resource.k8s.io/deviceclasses',
        'resource.k8s.io/resourceclaims',
        'resource.k8s.io/resourceclaimtemplates',
        'resource.k8s.io/resourceslices',
      ]);
      expect(upgraded).toEqual(before);
    } finally {
      // The rollout completes: both on the new release again, and they agree.
      await cp.restartApiserver('apiserver-2');
    }
    expect(await hashes(cp.clientOf('apiserver-2', 'admin'))).toEqual(before);
  }, 120_000);
});

describe("kube-controller-manager's garbage collector and Outrigger's ControllerRefs", () => {
  let kube: KubeClient;
  const cluster = uniqueName('gc');
  const state = testState();

  beforeAll(async () => {
    await applyManifests(admin, STATEFULSET_POLICY);
    kube = cp.client('outrigger');
    forgetPolicies(cluster);
  });

  async function createSts(ns: string, name: string, image: string): Promise<KubeObject> {
    return admin.create(statefulSets, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name, namespace: ns },
      spec: {
        serviceName: name,
        replicas: 0,
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image }] } },
      },
    });
  }

  async function sync(parent: KubeObject) {
    const policy = policyFor(await listPolicies(kube, cluster), 'apps', 'StatefulSet')!;
    const key: SyncKey = {
      cluster,
      group: 'apps',
      kind: 'StatefulSet',
      namespace: parent.metadata.namespace,
      name: parent.metadata.name!,
      uid: parent.metadata.uid!,
    };
    return syncHistory({ kube, state, holder: uniqueName('h') }, policy, key, ['ControllerRevision/it/x/1/added']);
  }

  async function revisions(ns: string, parent: string): Promise<ControllerRevision[]> {
    return (
      await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns, labelSelector: `${PARENT_LABEL}=${parent}` })
    ).items;
  }

  async function twoRevisions(ns: string, name: string): Promise<KubeObject> {
    const sts = await createSts(ns, name, 'registry.example/app:1');
    await sync(sts);
    const changed = await admin.patch(
      statefulSets,
      { name, namespace: ns },
      { spec: { template: { spec: { containers: [{ name: 'c', image: 'registry.example/app:2' }] } } } },
      'merge',
    );
    await sync(changed);
    expect(await revisions(ns, name)).toHaveLength(2);
    return changed;
  }

  test('a cascading delete removes the parent and its revisions', async () => {
    const ns = await namespace('gc');
    await twoRevisions(ns, 'web');
    await admin.delete(statefulSets, { name: 'web', namespace: ns });
    await eventually(async () => (await revisions(ns, 'web')).length === 0, 30_000);
  });

  test('--cascade=orphan leaves the revisions without an owner, and a new parent of the same selector adopts them', async () => {
    const ns = await namespace('gc');
    const old = await twoRevisions(ns, 'web');
    await admin.delete(statefulSets, { name: 'web', namespace: ns }, { propagationPolicy: 'Orphan' });
    const orphans = await eventually(async () => {
      const revs = await revisions(ns, 'web');
      return revs.length === 2 && revs.every((r) => !controllerOf(r)) ? revs : undefined;
    }, 30_000);
    expect(orphans).toHaveLength(2);
    await eventually(async () => !(await admin.find(statefulSets, { name: 'web', namespace: ns })), 30_000);

    const successor = await createSts(ns, 'web', 'registry.example/app:2');
    expect(successor.metadata.uid).not.toBe(old.metadata.uid);
    await sync(successor);
    const adopted = await revisions(ns, 'web');
    expect(adopted.map((r) => controllerOf(r)?.uid)).toEqual([successor.metadata.uid, successor.metadata.uid]);
  }, 90_000);

  test('foreground deletion waits on revisions that block their owner', async () => {
    const ns = await namespace('gc');
    await twoRevisions(ns, 'web');
    const [held] = await revisions(ns, 'web');
    // A finalizer of the test's keeps one revision from going, so the parent must stay until it is released.
    await admin.patch(
      Resources.controllerRevisions,
      { name: held!.metadata.name!, namespace: ns },
      { metadata: { finalizers: ['example.com/hold'] } },
      'merge',
    );
    await admin.delete(statefulSets, { name: 'web', namespace: ns }, { propagationPolicy: 'Foreground' });
    await eventually(async () => (await revisions(ns, 'web')).every((r) => r.metadata.deletionTimestamp), 30_000);
    await new Promise((r) => setTimeout(r, 2_000));
    const waiting = await admin.find(statefulSets, { name: 'web', namespace: ns });
    expect(waiting?.metadata.finalizers).toContain('foregroundDeletion');
    await admin.patch(
      Resources.controllerRevisions,
      { name: held!.metadata.name!, namespace: ns },
      { metadata: { finalizers: null } },
      'merge',
    );
    await eventually(async () => !(await admin.find(statefulSets, { name: 'web', namespace: ns })), 30_000);
    expect(await revisions(ns, 'web')).toEqual([]);
  }, 90_000);

  test('a PersistentVolumeClaim can be deleted (its protection finalizer is removed)', async () => {
    const ns = await namespace('pvc');
    await admin.create(pvcs, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'data', namespace: ns },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
    await admin.delete(pvcs, { name: 'data', namespace: ns });
    await eventually(async () => !(await admin.find(pvcs, { name: 'data', namespace: ns })), 30_000);
  });
});

describe('etcd compaction', () => {
  test("a paged list's continue token expires with 410 Gone once etcd is compacted past it", async () => {
    const ns = await namespace('compact');
    for (let i = 0; i < 3; i += 1)
      await admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `c${i}`, namespace: ns } });
    const first = await admin.list(configMaps, { namespace: ns, limit: 1 });
    expect(first.metadata.continue).toBeTruthy();
    // Move etcd's revision on and compact up to now; once the apiserver learns of it, the token's snapshot is gone.
    await admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'later', namespace: ns } });
    const revision = await compactEtcd(undefined, cp.etcdUrl);
    await recordCompaction(revision, cp.etcdUrl);
    const expired = await eventually(
      () =>
        admin.list(configMaps, { namespace: ns, limit: 1, continue: first.metadata.continue }).then(
          () => undefined,
          (err: unknown) => (isKubeError(err, 'Gone') ? err : Promise.reject(err)),
        ),
      40_000,
    );
    // The answer carries a token to go on from (an inconsistent list, which a migration may use).
    expect(expired.continueToken).toBeTruthy();
  });
});
