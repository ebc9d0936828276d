// The pipeline end to end with every function in its Lambda container (RuntimeOptions.lambdaContainers,
// docs/getting-started/local.md#functions-in-their-lambda-containers): the forwarder watches the bed's apiserver, and its
// envelopes go through the router's container to the history's container, which writes a StatefulSet's revisions;
// a MapController's parent gets its pass the same way, through the map function's container and the example's
// Lambda hooks. Each function is its bundle in the Lambda Node.js base image, invoked through the runtime API.
import { readFile } from 'node:fs/promises';
import { docker } from '../../local/container-engine.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { gvr, Resources, type KubeObject } from '../../shared/kube/index.ts';
import { PARENT_LABEL } from '../../shared/history/revisions.ts';
import { adminClient, containerEngineHost, createNamespace, eventually, outriggerClient, startTestRuntime } from '../testbed/index.ts';
import { statefulSetPolicy } from '../testbed/policies.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const schedules = gvr('snapshot.outrigger.dev', 'v1', 'snapshotschedules');
const snapshots = gvr('snapshot.storage.k8s.io', 'v1', 'volumesnapshots');
const pvcs = gvr('', 'v1', 'persistentvolumeclaims');

const template = (image: string) => ({ metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image }] } });

// 10 minutes: a cold machine builds the base image (minutes) while the other files run, and the runtime's start waits for it.
test('a StatefulSet change becomes a revision, and a MapController parent gets its snapshots, through the functions in their Lambda containers', async () => {
  containerEngineHost();
  const admin = adminClient();
  await statefulSetPolicy(outriggerClient());
  // The SnapshotSchedule example (examples/snapshot-schedule): its CRDs, the role its map function acts with, and its
  // MapController, whose hooks are Lambda handlers behind the runtime's local Lambda endpoint.
  const example = new URL('../../examples/snapshot-schedule/', import.meta.url);
  for (const f of ['crds.yaml', 'rbac.yaml', 'controller.yaml']) await applyManifests(admin, await readFile(new URL(f, example), 'utf8'));
  // The forwarder watches the example's kinds as Outrigger itself (as map.test.ts grants it).
  await applyManifests(
    admin,
    `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: outrigger-map-snapshot-schedule-test }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: outrigger-map-snapshot-schedule }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: "outrigger:controllers" }]
`,
  );
  const ns = await createNamespace('containers');
  const logs: string[] = [];
  const runtime = await startTestRuntime('containers', ['router', 'history', 'map'], {
    namespace: ns,
    lambdaContainers: true,
    log: (m) => logs.push(m),
  });
  try {
    // The functions run in containers of the Lambda image, not here.
    const running = (await docker('ps', '--format', '{{.Names}} {{.Image}}')).split('\n');
    for (const fn of ['router', 'history', 'map'])
      expect(running).toContainEqual(
        expect.stringMatching(new RegExp(`^outrigger-\\S+-${fn} public\\.ecr\\.aws/lambda/nodejs:24-x86_64$`)),
      );

    const revisions = async () =>
      (await admin.list(Resources.controllerRevisions, { namespace: ns, labelSelector: `${PARENT_LABEL}=web` })).items
        .map((r) => (r as KubeObject & { revision: number }).revision)
        .sort();
    await admin.create(statefulSets, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'web', namespace: ns },
      spec: { serviceName: 'web', replicas: 1, selector: { matchLabels: { app: 'web' } }, template: template('registry.example/web:1') },
    });
    await eventually(async () => (await revisions()).join() === '1', 60_000);
    await admin.patch(statefulSets, { name: 'web', namespace: ns }, { spec: { template: template('registry.example/web:2') } }, 'merge');
    await eventually(async () => (await revisions()).join() === '1,2', 60_000);

    await admin.create(schedules, {
      apiVersion: 'snapshot.outrigger.dev/v1',
      kind: 'SnapshotSchedule',
      metadata: { name: 'nightly', namespace: ns },
      spec: { snapshotInterval: '1h', snapshotTTL: '1d', selector: { matchLabels: { app: 'db' } } },
    } as KubeObject);
    await admin.create(pvcs, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'db-0', namespace: ns, labels: { app: 'db' } },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    } as KubeObject);
    const snapshotsOf = async (pvc: string) =>
      (await admin.listAll(snapshots, { namespace: ns })).filter(
        (s) => (s.spec as { source: { persistentVolumeClaimName: string } }).source.persistentVolumeClaimName === pvc,
      );
    await eventually(async () => (await snapshotsOf('db-0')).length === 1, 60_000);
    await runtime.settled();
    // Every batch went to a container and came back: none failed, nothing was dead-lettered.
    for (const fn of ['router', 'history', 'map'])
      expect(runtime.queues.get(fn)!.stats).toMatchObject({ failedReceives: 0, deadLettered: 0 });
  } catch (err) {
    // The runtime's log says which step of the pipeline stopped short.
    throw new Error(`${(err as Error).message}\n${logs.slice(-40).join('\n')}`);
  } finally {
    await runtime.stop();
  }
}, 600_000);
