// The local runtime scoped to one namespace (`outrigger run --namespace`, docs/getting-started/local.md#one-namespace)
// on a shared cluster: only its schedules find the parents (no forwarder, no router), and nothing of theirs is
// written in another namespace. A file of its own: the map function keeps its Lambda client for the life of the
// module, so this runtime's Lambda endpoint must be the first one the file's map function sees.
import { readFile } from 'node:fs/promises';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { adminClient, createNamespace, eventually, outriggerClient, startTestRuntime, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant } from '../testbed/rbac.ts';

const schedules = gvr('snapshot.outrigger.dev', 'v1', 'snapshotschedules');
const snapshots = gvr('snapshot.storage.k8s.io', 'v1', 'volumesnapshots');
const pvcs = gvr('', 'v1', 'persistentvolumeclaims');

beforeAll(async () => {
  const admin = adminClient();
  const dir = new URL('../../examples/snapshot-schedule/', import.meta.url);
  for (const f of ['crds.yaml', 'rbac.yaml']) await applyManifests(admin, await readFile(new URL(f, dir), 'utf8'));
}, 60_000);

describe('trust boundary: a runtime scoped to one namespace (outrigger run --namespace)', () => {
  test('its resyncs write no revision and no map output in another namespace; what cannot be scoped (storage migration) does not run', async () => {
    const admin = adminClient();
    const kube = outriggerClient();
    await applyManifests(admin, await readFile(new URL('../../examples/snapshot-schedule/controller.yaml', import.meta.url), 'utf8'));
    // A kind of the test's own with a RevisionPolicy: no other file's resync lists it.
    const group = `${uniqueName('scoped')}.outrigger.test`;
    await applyManifests(
      admin,
      `${openCrd(group, 'Part', 'parts')}---\n${controllersGrant(`outrigger-parts-${group}`, [`{ apiGroups: ["${group}"], resources: ["parts"], verbs: ["get", "list", "watch"] }`])}`,
    );
    const parts = gvr(group, 'v1', 'parts');
    await eventually(async () => {
      forgetDiscovery(kube);
      return kube
        .list(parts)
        .then(() => true)
        .catch(() => false);
    });
    const policyName = uniqueName('parts');
    await applyManifests(
      admin,
      `apiVersion: outrigger.dev/v1alpha1\nkind: RevisionPolicy\nmetadata: { name: ${policyName} }\nspec:\n  target: { apiVersion: ${group}/v1, kind: Part }\n  targetState: [spec.template]\n`,
    );
    const mine = await createNamespace('scoped-a');
    const theirs = await createNamespace('scoped-b');
    for (const ns of [mine, theirs]) {
      await admin.create(parts, {
        apiVersion: `${group}/v1`,
        kind: 'Part',
        metadata: { name: 'p', namespace: ns },
        spec: { template: { v: 1 } },
      });
      await admin.create(pvcs, {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: 'db-0', namespace: ns, labels: { app: 'db' } },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      } as KubeObject);
      await admin.create(schedules, {
        apiVersion: 'snapshot.outrigger.dev/v1',
        kind: 'SnapshotSchedule',
        metadata: { name: 'nightly', namespace: ns },
        spec: { snapshotInterval: '1h', snapshotTTL: '1d', selector: { matchLabels: { app: 'db' } } },
      } as KubeObject);
    }
    const revisionsIn = async (ns: string) => (await admin.list(gvr('apps', 'v1', 'controllerrevisions'), { namespace: ns })).items;
    const snapshotsIn = async (ns: string) => (await admin.list(snapshots, { namespace: ns })).items;
    // Only the schedules find the parents: no forwarder, no router.
    const logged: string[] = [];
    const runtime = await startTestRuntime(
      'scoped',
      ['history-resync', 'history', 'map-resync', 'map', 'storage-poll', 'storage', 'migrator'],
      {
        namespace: mine,
        log: (m) => logged.push(m),
      },
    );
    try {
      await runtime.runScheduled('history-resync');
      await runtime.runScheduled('map-resync');
      await eventually(async () => (await revisionsIn(mine)).length === 1 && (await snapshotsIn(mine)).length === 1, 30_000).catch(
        async (err: unknown) => {
          throw new Error(
            `${String(err)}: ${(await Promise.all([revisionsIn(mine), snapshotsIn(mine)])).map((l) => l.length).join(' revisions, ')} snapshots; the runtime said:\n${logged.slice(-30).join('\n')}`,
          );
        },
      );
      await runtime.settled();
      expect(await revisionsIn(theirs)).toEqual([]);
      expect(await snapshotsIn(theirs)).toEqual([]);
      expect(runtime.queues.has('storage')).toBe(false);
      expect(logged).toEqual(expect.arrayContaining([expect.stringMatching(/storage migration .* not run with --namespace/)]));
    } finally {
      await runtime.stop();
      await admin.delete(gvr('outrigger.dev', 'v1alpha1', 'revisionpolicies'), { name: policyName }).catch(() => undefined);
      await admin.delete(gvr('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), { name: `parts.${group}` }).catch(() => undefined);
    }
  }, 120_000);
});
