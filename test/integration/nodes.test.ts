// Workloads on real pods (docs/contributing/test-beds.md#nodes-and-pods): kube-controller-manager's default
// controllers, kube-scheduler and three nodes kwok plays the kubelet of, so a rolling update runs to its end as on
// a cluster, while Outrigger's history functions (the local runtime) keep the parents' history beside the in-tree
// controllers' own (foreignHistory: Coexist, docs/controllers/history.md#coexistence).
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { forgetPolicies, listPolicies, policyFor } from '../../functions/history/policies.ts';
import { liveRevisions } from '../../functions/history/truncate.ts';
import { kubectlBinary } from '../../local/apiserver.ts';
import { statefulSet } from '../../local/fixtures.ts';
import { PARENT_KIND_LABEL, PARENT_LABEL, type ControllerRevision } from '../../shared/history/revisions.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { Resources, gvr, type GVR, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { startRuntime, type Runtime } from '../../runtime/local.ts';
import { functions } from '../../functions/index.ts';
import { DEFAULT_CONTROLLERS, startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { eventually, uniqueName } from '../testbed/index.ts';
import { lwsCrd, startLwsController } from '../testbed/lws.ts';
import { DAEMONSET_POLICY, STATEFULSET_POLICY } from '../testbed/policies.ts';
import { controllersGrant } from '../testbed/rbac.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const daemonSets = gvr('apps', 'v1', 'daemonsets');
const run = promisify(execFile);
// Both kinds' in-tree controllers keep their own history here, so Outrigger keeps its own only when told to coexist.
const COEXIST = '  foreignHistory: Coexist\n';

let cp: TestControlPlane;
let admin: KubeClient;
let kube: KubeClient;

beforeAll(async () => {
  cp = await startTestControlPlane({ controllers: DEFAULT_CONTROLLERS, nodes: 3 });
  process.stderr.write(
    `[control plane] kube-controller-manager (every default controller), kube-scheduler and 3 kwok nodes ready in ${cp.startedInMs} ms\n`,
  );
  admin = cp.client('admin');
  kube = cp.client('outrigger');
}, 600_000);

afterAll(async () => {
  await cp?.stop();
});

/** `kubectl rollout status`, the project's kubectl against this bed: resolves once the rollout is complete. */
async function rolloutStatus(kind: string, name: string, namespace: string): Promise<string> {
  const { stdout } = await run(kubectlBinary, ['rollout', 'status', `${kind}/${name}`, '-n', namespace, '--timeout=150s'], {
    env: { ...process.env, KUBECONFIG: cp.kubeconfigs.admin },
  });
  return stdout;
}

async function namespace(prefix: string): Promise<string> {
  const ns = uniqueName(prefix);
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  return ns;
}

/** Outrigger's history functions (the local runtime, its own DynamoDB Local) against this bed, watching one namespace. */
async function outrigger(prefix: string, ns: string): Promise<Runtime> {
  const names = ['router', 'history', 'truncate'];
  return startRuntime({
    kubeconfig: cp.kubeconfigs.outrigger,
    namespace: ns,
    clusterId: uniqueName(prefix),
    stateDir: await mkdtemp(join(tmpdir(), `outrigger-${prefix}-`)),
    functions: functions.filter((f) => names.includes(f.name)),
    ...(process.env.OUTRIGGER_NODES_DEBUG ? { log: (m: string) => process.stderr.write(`[runtime] ${m}\n`) } : {}),
  });
}

function withReplicas(parent: KubeObject, replicas: number): KubeObject {
  return { ...parent, spec: { ...(parent.spec as Record<string, unknown>), replicas } };
}

function daemonSet(name: string, namespace: string, image: string): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name, namespace },
    spec: {
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image }] } },
    },
  };
}

const setImage = (r: GVR, name: string, ns: string, image: string) =>
  admin.patch(r, { name, namespace: ns }, { spec: { template: { spec: { containers: [{ name: 'c', image }] } } } }, 'strategic');

type Pod = KubeObject & { spec: { nodeName?: string; containers: { image: string }[] }; status?: { phase?: string; podIP?: string } };
const pods = async (ns: string) => (await admin.list<Pod>(Resources.pods, { namespace: ns })).items;
const hashOf = (o: KubeObject) => o.metadata.labels?.['controller-revision-hash'];

/** Outrigger's own revisions of a parent (not the in-tree controller's), oldest first: number and image. */
async function outriggerHistory(ns: string, kind: string, name: string): Promise<string[]> {
  const revisions = (await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns })).items.filter(
    (r) => r.metadata.labels?.[PARENT_LABEL] === name && r.metadata.labels?.[PARENT_KIND_LABEL] === `${kind.toLowerCase()}.apps`,
  );
  type Data = { spec?: { template?: { spec?: { containers?: { image: string }[] } } } };
  return revisions
    .sort((a, b) => a.revision - b.revision)
    .map((r) => `${r.revision}:${(r.data as Data | undefined)?.spec?.template?.spec?.containers?.[0]?.image ?? '?'}`);
}

test('a 3-replica StatefulSet runs on the nodes and rolls a new image to completion; Outrigger records both revisions and reads the live ones from the real pods', async () => {
  const ns = await namespace('sts');
  const runtime = await outrigger('sts', ns);
  try {
    await applyManifests(admin, STATEFULSET_POLICY + COEXIST);
    await admin.create(statefulSets, withReplicas(statefulSet('web', ns, 'registry.example/app:1'), 3));
    await rolloutStatus('statefulset', 'web', ns);
    const first = await pods(ns);
    expect(first.map((p) => p.metadata.name).sort()).toEqual(['web-0', 'web-1', 'web-2']);
    for (const pod of first) {
      expect(pod.spec.nodeName).toMatch(/^node-\d$/);
      expect(pod.status?.phase).toBe('Running');
      expect(pod.status?.podIP).toBeDefined();
    }
    await eventually(async () => (await outriggerHistory(ns, 'StatefulSet', 'web')).length === 1, 60_000);

    await setImage(statefulSets, 'web', ns, 'registry.example/app:2');
    expect(await rolloutStatus('statefulset', 'web', ns)).toMatch(/roll(ing update| out) complete/);
    const rolled = await pods(ns);
    expect(rolled.map((p) => p.spec.containers[0]!.image)).toEqual(Array(3).fill('registry.example/app:2'));
    expect(
      await eventually(
        async () =>
          (await outriggerHistory(ns, 'StatefulSet', 'web')).length === 2 ? outriggerHistory(ns, 'StatefulSet', 'web') : undefined,
        60_000,
      ),
    ).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);

    // Live: what the three running pods' revision label and the set's status name, and nothing else. Polled until
    // the set is at rest: under Coexist the StatefulSet controller may roll once more onto Outrigger's revision
    // (audit H1, issue 29; the test.failing test below).
    forgetPolicies();
    const policy = policyFor(await listPolicies(kube, runtime.clusterId), 'apps', 'StatefulSet')!;
    await eventually(async () => {
      const sts = await admin.get(statefulSets, { name: 'web', namespace: ns });
      const status = sts.status as { currentRevision?: string; updateRevision?: string; readyReplicas?: number };
      if (status.currentRevision !== status.updateRevision || status.readyReplicas !== 3) return undefined;
      const running = await pods(ns);
      if (running.length !== 3 || running.some((p) => hashOf(p) !== status.updateRevision)) return undefined;
      const live = await liveRevisions(kube, policy, sts);
      return live?.size === 1 && live.has(status.updateRevision!);
    }, 120_000);
  } finally {
    await runtime.stop();
  }
}, 400_000);

test('a DaemonSet runs one pod on each of the 3 nodes and rolls a new image to completion; Outrigger records both revisions', async () => {
  const ns = await namespace('ds');
  const runtime = await outrigger('ds', ns);
  try {
    await applyManifests(admin, DAEMONSET_POLICY + COEXIST);
    await admin.create(daemonSets, daemonSet('agent', ns, 'registry.example/agent:1'));
    await rolloutStatus('daemonset', 'agent', ns);
    expect((await pods(ns)).map((p) => p.spec.nodeName).sort()).toEqual(['node-1', 'node-2', 'node-3']);
    await eventually(async () => (await outriggerHistory(ns, 'DaemonSet', 'agent')).length === 1, 60_000);

    await setImage(daemonSets, 'agent', ns, 'registry.example/agent:2');
    expect(await rolloutStatus('daemonset', 'agent', ns)).toContain('successfully rolled out');
    const rolled = await pods(ns);
    expect(rolled.map((p) => `${p.spec.nodeName} ${p.spec.containers[0]!.image}`).sort()).toEqual([
      'node-1 registry.example/agent:2',
      'node-2 registry.example/agent:2',
      'node-3 registry.example/agent:2',
    ]);
    expect(
      await eventually(
        async () =>
          (await outriggerHistory(ns, 'DaemonSet', 'agent')).length === 2 ? outriggerHistory(ns, 'DaemonSet', 'agent') : undefined,
        60_000,
      ),
    ).toEqual(['1:registry.example/agent:1', '2:registry.example/agent:2']);
  } finally {
    await runtime.stop();
  }
}, 400_000);

// Audit H1 (issue 29): under Coexist, Outrigger's revision of the current template carries the template's labels
// and the set's ControllerRef, so the StatefulSet controller lists it with its own; sorting last, it becomes the
// update revision and every pod is replaced with no spec change. Failing until issue 29 is fixed: measured here,
// the set's updateRevision moves off its currentRevision right after Outrigger's baseline revision appears.
test.failing(
  'a RevisionPolicy on StatefulSets in Coexist mode leaves a running 3-replica set as it is: no pod replaced, the update revision still the current one',
  async () => {
    const ns = await namespace('h1');
    await admin.create(statefulSets, withReplicas(statefulSet('db', ns, 'registry.example/db:1'), 3));
    await rolloutStatus('statefulset', 'db', ns);
    const before = await pods(ns);
    const runtime = await outrigger('h1', ns);
    try {
      await applyManifests(admin, STATEFULSET_POLICY + COEXIST);
      // Outrigger's baseline revision of the running set, then a change outside the template, which the
      // StatefulSet controller syncs (observedGeneration) with Outrigger's revision among those it lists.
      await eventually(async () => (await outriggerHistory(ns, 'StatefulSet', 'db')).length === 1, 60_000);
      const changed = await admin.patch(statefulSets, { name: 'db', namespace: ns }, { spec: { revisionHistoryLimit: 5 } }, 'merge');
      const synced = await eventually(async () => {
        const sts = await admin.get(statefulSets, { name: 'db', namespace: ns });
        return (sts.status as { observedGeneration?: number }).observedGeneration === changed.metadata.generation ? sts : undefined;
      }, 60_000);
      await rolloutStatus('statefulset', 'db', ns);
      const status = synced.status as { currentRevision: string; updateRevision: string };
      expect(status.updateRevision).toBe(status.currentRevision);
      const after = await pods(ns);
      expect(after.map((p) => `${p.metadata.name} ${p.metadata.uid}`).sort()).toEqual(
        before.map((p) => `${p.metadata.name} ${p.metadata.uid}`).sort(),
      );
    } finally {
      await runtime.stop();
    }
  },
  400_000,
);

// The documented LWS recipe (docs/controllers/history.md#keyed-revisions-revisionkey-mode) with LWS's own controller
// running, which keeps its own revisions of each LeaderWorkerSet under the same labels (audit M2, issue 29).
describe('LeaderWorkerSet with its own controller', () => {
  const GROUP = 'leaderworkerset.x-k8s.io';
  const KEY = 'leaderworkerset.sigs.k8s.io/template-revision-hash';
  const lwsResource = gvr(GROUP, 'v1', 'leaderworkersets');
  let lws: Awaited<ReturnType<typeof startLwsController>>;

  beforeAll(async () => {
    await applyManifests(admin, await lwsCrd());
    lws = await startLwsController(cp);
    await applyManifests(
      admin,
      `${controllersGrant('outrigger-lws', [`{ apiGroups: [${GROUP}], resources: [leaderworkersets], verbs: [get, list, watch] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: leaderworkersets }
spec:
  target: { apiVersion: ${GROUP}/v1, kind: LeaderWorkerSet }
  targetState: [spec.leaderWorkerTemplate, spec.networkConfig]
  mode: revisionKey
  revisionKey: { label: ${KEY}, rolloutCompleteCondition: Available }
  generated: { apiVersion: v1, kind: Pod, selectorPath: status.hpaPodSelector }
`,
    );
  }, 300_000);

  afterAll(async () => {
    await lws?.stop();
  });

  const available = (o: KubeObject) =>
    ((o.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? []).some(
      (c) => c.type === 'Available' && c.status === 'True',
    );
  const workerTemplate = (image: string) => ({ metadata: { labels: { app: 'serve' } }, spec: { containers: [{ name: 'c', image }] } });

  // Failing until issue 29 is fixed (audit M2): LWS's controller lists Outrigger's revisions with its own, and
  // logged "More than one revision exists for the given template hash" 8 times in one upgrade here.
  test.failing(
    'an upgrade rolls every group onto the new template; Outrigger keeps its revisions under the keys the pods carry, and LWS neither reads nor deletes them',
    async () => {
      const ns = await namespace('lws');
      const runtime = await outrigger('lws', ns);
      try {
        await admin.create(lwsResource, {
          apiVersion: `${GROUP}/v1`,
          kind: 'LeaderWorkerSet',
          metadata: { name: 'serve', namespace: ns },
          spec: { replicas: 2, leaderWorkerTemplate: { size: 2, workerTemplate: workerTemplate('registry.example/serve:1') } },
        });
        await eventually(async () => available(await admin.get(lwsResource, { name: 'serve', namespace: ns })), 120_000);
        expect(await pods(ns)).toHaveLength(4);
        const mine = async () =>
          (await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns })).items.filter(
            (r) => r.metadata.labels?.[PARENT_LABEL] === 'serve',
          );
        await eventually(async () => (await mine()).length > 0, 60_000);

        await admin.patch(
          lwsResource,
          { name: 'serve', namespace: ns },
          { spec: { leaderWorkerTemplate: { workerTemplate: workerTemplate('registry.example/serve:2') } } },
          'merge',
        );
        const rolled = await eventually(async () => {
          const all = await pods(ns);
          return all.length === 4 &&
            all.every((p) => p.spec.containers[0]!.image === 'registry.example/serve:2' && p.status?.phase === 'Running')
            ? all
            : undefined;
        }, 180_000);
        await eventually(async () => available(await admin.get(lwsResource, { name: 'serve', namespace: ns })), 120_000);
        const key = rolled[0]!.metadata.labels?.[KEY];
        expect(new Set(rolled.map((p) => p.metadata.labels?.[KEY]))).toEqual(new Set([key]));
        // Outrigger's revision under the key the pods carry.
        await eventually(async () => (await mine()).some((r) => r.metadata.labels?.[KEY] === key), 60_000);
        // LWS's controller found only its own revision for each key.
        expect((await readFile(lws.log, 'utf8')).split('\n').filter((l) => l.includes('More than one revision'))).toEqual([]);
      } finally {
        await runtime.stop();
      }
    },
    500_000,
  );
});
