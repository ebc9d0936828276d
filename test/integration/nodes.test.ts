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
import { HASH_LABEL, PARENT_KIND_LABEL, PARENT_LABEL, type ControllerRevision } from '../../shared/history/revisions.ts';
import { controllerOf } from '../../shared/ownership/index.ts';
import { parentLabels } from '../../shared/history/data.ts';
import { reportPolicy } from '../../functions/history/report.ts';
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
}, 900_000); // a cold run may still be building kwok (test/testbed/prebuild.ts)

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
  const names = ['router', 'history'];
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

/** Outrigger's own revisions of a parent (not the in-tree controller's). */
async function outriggerRevisions(ns: string, kind: string, name: string): Promise<ControllerRevision[]> {
  return (await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns })).items.filter(
    (r) => r.metadata.labels?.[PARENT_LABEL] === name && r.metadata.labels?.[PARENT_KIND_LABEL] === `${kind.toLowerCase()}.apps`,
  );
}

/** Outrigger's own revisions of a parent, oldest first: number and image. */
async function outriggerHistory(ns: string, kind: string, name: string): Promise<string[]> {
  type Data = { spec?: { template?: { spec?: { containers?: { image: string }[] } } } };
  return (await outriggerRevisions(ns, kind, name))
    .sort((a, b) => a.revision - b.revision)
    .map((r) => `${r.revision}:${(r.data as Data | undefined)?.spec?.template?.spec?.containers?.[0]?.image ?? '?'}`);
}

/** The history once it has `length` revisions. */
const historyOf = (ns: string, kind: string, name: string, length: number) =>
  eventually(async () => {
    const h = await outriggerHistory(ns, kind, name);
    return h.length === length ? h : undefined;
  }, 60_000);

/**
 * Each of Outrigger's revisions as first seen (resourceVersion, ownerReferences, labels): every later look must
 * find it unchanged, so no other controller renumbered, relabelled, released, adopted or deleted it.
 */
type Seen = Map<string, { resourceVersion?: string | undefined; ownerReferences?: unknown; labels?: unknown }>;
async function expectUntouched(seen: Seen, revisions: readonly ControllerRevision[]): Promise<void> {
  const now = new Map(revisions.map((r) => [r.metadata.name!, r]));
  for (const [name, first] of seen) {
    const r = now.get(name);
    expect({
      name,
      resourceVersion: r?.metadata.resourceVersion,
      ownerReferences: r?.metadata.ownerReferences,
      labels: r?.metadata.labels,
    }).toEqual({
      name,
      ...first,
    });
  }
  for (const [name, r] of now)
    if (!seen.has(name))
      seen.set(name, {
        resourceVersion: r.metadata.resourceVersion,
        ownerReferences: r.metadata.ownerReferences,
        labels: r.metadata.labels,
      });
}

/** Outrigger's revisions beside another controller's: its own labels only, and a plain ownerReference to the parent. */
function expectCoexisting(revisions: readonly ControllerRevision[], parent: KubeObject): void {
  for (const r of revisions) {
    expect(Object.keys(r.metadata.labels ?? {}).sort()).toEqual([HASH_LABEL, PARENT_LABEL, PARENT_KIND_LABEL]);
    expect(r.metadata.ownerReferences).toEqual([expect.objectContaining({ uid: parent.metadata.uid, controller: false })]);
  }
}

/** The in-tree controller's revisions of a parent: controlled by it, without Outrigger's labels; oldest first. */
async function inTreeRevisions(ns: string, parent: KubeObject): Promise<ControllerRevision[]> {
  return (await admin.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns })).items
    .filter((r) => controllerOf(r)?.uid === parent.metadata.uid && r.metadata.labels?.[PARENT_LABEL] === undefined)
    .sort((a, b) => a.revision - b.revision);
}

type SetStatus = {
  currentRevision?: string;
  updateRevision?: string;
  readyReplicas?: number;
  updatedReplicas?: number;
  observedGeneration?: number;
};

/** The StatefulSet at rest on the in-tree controller's revision of its template: its status and the pods' revision agree. */
async function statefulSetAtRest(ns: string, name: string): Promise<{ sts: KubeObject; status: SetStatus; running: Pod[] }> {
  return eventually(async () => {
    const sts = await admin.get(statefulSets, { name, namespace: ns });
    const status = sts.status as SetStatus;
    if (status.currentRevision !== status.updateRevision || status.readyReplicas !== 3 || status.updatedReplicas !== 3) return undefined;
    const running = await pods(ns);
    if (running.length !== 3 || running.some((p) => hashOf(p) !== status.updateRevision)) return undefined;
    return { sts, status, running };
  }, 120_000);
}

/** A change of the set's own annotations (no template, no generation), then one the controller reports synced. */
async function annotateThenSync(r: GVR, name: string, ns: string): Promise<void> {
  await admin.patch(r, { name, namespace: ns }, { metadata: { annotations: { 'example.com/note': 'annotation only' } } }, 'merge');
  // The controller syncs each key's changes in order: once it reports the later one, it has seen the annotation.
  const changed = await admin.patch(r, { name, namespace: ns }, { spec: { revisionHistoryLimit: 9 } }, 'merge');
  await eventually(async () => {
    const o = await admin.get(r, { name, namespace: ns });
    return (o.status as SetStatus).observedGeneration === changed.metadata.generation;
  }, 60_000);
}

const uids = (ps: readonly Pod[]) => ps.map((p) => `${p.metadata.name} ${p.metadata.uid}`).sort();

test("a 3-replica StatefulSet in Coexist mode rolls two new images and takes an annotation without a restart; the StatefulSet controller rolls only onto its own revisions, and never touches Outrigger's", async () => {
  const ns = await namespace('sts');
  const runtime = await outrigger('sts', ns);
  const seen: Seen = new Map();
  try {
    await applyManifests(admin, STATEFULSET_POLICY + COEXIST);
    const created = await admin.create(statefulSets, withReplicas(statefulSet('web', ns, 'registry.example/app:1'), 3));
    await rolloutStatus('statefulset', 'web', ns);
    const first = await pods(ns);
    expect(first.map((p) => p.metadata.name).sort()).toEqual(['web-0', 'web-1', 'web-2']);
    for (const pod of first) {
      expect(pod.spec.nodeName).toMatch(/^node-\d$/);
      expect(pod.status?.phase).toBe('Running');
      expect(pod.status?.podIP).toBeDefined();
    }
    expect(await historyOf(ns, 'StatefulSet', 'web', 1)).toEqual(['1:registry.example/app:1']);
    await expectUntouched(seen, await outriggerRevisions(ns, 'StatefulSet', 'web'));

    // Two template changes, each rolled to completion onto the StatefulSet controller's own revision.
    for (const [n, image] of [
      [2, 'registry.example/app:2'],
      [3, 'registry.example/app:3'],
    ] as const) {
      await setImage(statefulSets, 'web', ns, image);
      expect(await rolloutStatus('statefulset', 'web', ns)).toMatch(/roll(ing update| out) complete/);
      expect((await historyOf(ns, 'StatefulSet', 'web', n)).at(-1)).toBe(`${n}:${image}`);
      const { status, running } = await statefulSetAtRest(ns, 'web');
      expect(running.map((p) => p.spec.containers[0]!.image)).toEqual(Array(3).fill(image));
      const theirs = await inTreeRevisions(ns, created);
      expect(theirs.map((r) => r.revision)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
      expect(theirs.at(-1)!.metadata.name).toBe(status.updateRevision);
      await expectUntouched(seen, await outriggerRevisions(ns, 'StatefulSet', 'web'));

      if (n === 2) {
        // An annotation-only change: no revision, and no pod replaced.
        await annotateThenSync(statefulSets, 'web', ns);
        await rolloutStatus('statefulset', 'web', ns);
        expect(uids((await statefulSetAtRest(ns, 'web')).running)).toEqual(uids(running));
        expect(await outriggerHistory(ns, 'StatefulSet', 'web')).toHaveLength(2);
      }
    }
    expect(await outriggerHistory(ns, 'StatefulSet', 'web')).toEqual([
      '1:registry.example/app:1',
      '2:registry.example/app:2',
      '3:registry.example/app:3',
    ]);
    const mine = await outriggerRevisions(ns, 'StatefulSet', 'web');
    expectCoexisting(mine, created);
    await expectUntouched(seen, mine);

    // Live: what the three running pods' revision label and the set's status name (the in-tree controller's), and nothing else.
    forgetPolicies();
    const policy = policyFor(await listPolicies(kube, runtime.clusterId), 'apps', 'StatefulSet')!;
    const { sts, status } = await statefulSetAtRest(ns, 'web');
    expect([...((await liveRevisions(kube, policy, sts)) ?? [])]).toEqual([status.updateRevision]);
  } finally {
    await runtime.stop();
  }
}, 400_000);

test("a DaemonSet in Coexist mode runs one pod on each of the 3 nodes, rolls two new images and takes an annotation without a restart; the DaemonSet controller never claims Outrigger's revisions", async () => {
  const ns = await namespace('ds');
  const runtime = await outrigger('ds', ns);
  const seen: Seen = new Map();
  try {
    await applyManifests(admin, DAEMONSET_POLICY + COEXIST);
    const created = await admin.create(daemonSets, daemonSet('agent', ns, 'registry.example/agent:1'));
    await rolloutStatus('daemonset', 'agent', ns);
    expect((await pods(ns)).map((p) => p.spec.nodeName).sort()).toEqual(['node-1', 'node-2', 'node-3']);
    expect(await historyOf(ns, 'DaemonSet', 'agent', 1)).toEqual(['1:registry.example/agent:1']);
    await expectUntouched(seen, await outriggerRevisions(ns, 'DaemonSet', 'agent'));

    /** The three pods, once each runs the image on the DaemonSet controller's latest revision. */
    const rolledTo = (image: string) =>
      eventually(async () => {
        const running = await pods(ns);
        const latest = (await inTreeRevisions(ns, created)).at(-1);
        const hash = latest?.metadata.labels?.['controller-revision-hash'];
        return running.length === 3 &&
          running.every((p) => p.spec.containers[0]!.image === image && hashOf(p) === hash && !p.metadata.deletionTimestamp)
          ? running
          : undefined;
      }, 120_000);

    for (const [n, image] of [
      [2, 'registry.example/agent:2'],
      [3, 'registry.example/agent:3'],
    ] as const) {
      await setImage(daemonSets, 'agent', ns, image);
      expect(await rolloutStatus('daemonset', 'agent', ns)).toContain('successfully rolled out');
      const running = await rolledTo(image);
      expect(running.map((p) => p.spec.nodeName).sort()).toEqual(['node-1', 'node-2', 'node-3']);
      expect((await historyOf(ns, 'DaemonSet', 'agent', n)).at(-1)).toBe(`${n}:${image}`);
      expect((await inTreeRevisions(ns, created)).map((r) => r.revision)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
      await expectUntouched(seen, await outriggerRevisions(ns, 'DaemonSet', 'agent'));

      if (n === 2) {
        await annotateThenSync(daemonSets, 'agent', ns);
        await rolloutStatus('daemonset', 'agent', ns);
        expect(uids(await rolledTo(image))).toEqual(uids(running));
        expect(await outriggerHistory(ns, 'DaemonSet', 'agent')).toHaveLength(2);
      }
    }
    const mine = await outriggerRevisions(ns, 'DaemonSet', 'agent');
    expectCoexisting(mine, created);
    await expectUntouched(seen, mine);
  } finally {
    await runtime.stop();
  }
}, 400_000);

// H1 in docs/controllers/history.md#the-2026-11-26-history-reviews-findings-and-where-each-stands: with the template's labels and the set's ControllerRef, Outrigger's baseline revision of a
// running set was listed by the StatefulSet controller, sorted last and became the update revision, which replaced
// every pod with no spec change. Beside it, Outrigger's revisions now carry only its own labels and a plain ownerReference.
test('a RevisionPolicy on StatefulSets in Coexist mode leaves a running 3-replica set as it is: no pod replaced, the update revision still the current one', async () => {
  const ns = await namespace('h1');
  await admin.create(statefulSets, withReplicas(statefulSet('db', ns, 'registry.example/db:1'), 3));
  await rolloutStatus('statefulset', 'db', ns);
  const before = await pods(ns);
  const runtime = await outrigger('h1', ns);
  try {
    await applyManifests(admin, STATEFULSET_POLICY + COEXIST);
    // Outrigger's baseline revision of the running set, then a change outside the template, which the
    // StatefulSet controller syncs (observedGeneration) with Outrigger's revision in the namespace.
    await eventually(async () => (await outriggerHistory(ns, 'StatefulSet', 'db')).length === 1, 60_000);
    const changed = await admin.patch(statefulSets, { name: 'db', namespace: ns }, { spec: { revisionHistoryLimit: 5 } }, 'merge');
    const synced = await eventually(async () => {
      const sts = await admin.get(statefulSets, { name: 'db', namespace: ns });
      return (sts.status as { observedGeneration?: number }).observedGeneration === changed.metadata.generation ? sts : undefined;
    }, 60_000);
    await rolloutStatus('statefulset', 'db', ns);
    const status = synced.status as { currentRevision: string; updateRevision: string };
    expect(status.updateRevision).toBe(status.currentRevision);
    expect(uids(await pods(ns))).toEqual(uids(before));
  } finally {
    await runtime.stop();
  }
}, 400_000);

// The documented LWS recipe (docs/controllers/history.md#keyed-revisions-revisionkey-mode) with LWS's own controller
// running, which keeps its own revisions of each LeaderWorkerSet (M2 in docs/controllers/history.md#the-2026-11-26-history-reviews-findings-and-where-each-stands): the policy reports them as
// another controller's history, and, told to coexist, keeps Outrigger's beside them without either touching the other's.
describe('LeaderWorkerSet with its own controller', () => {
  const GROUP = 'leaderworkerset.x-k8s.io';
  const KEY = 'leaderworkerset.sigs.k8s.io/template-revision-hash';
  const NAME_LABEL = 'leaderworkerset.sigs.k8s.io/name';
  const lwsResource = gvr(GROUP, 'v1', 'leaderworkersets');
  const recipe = (
    coexist: boolean,
  ) => `${controllersGrant('outrigger-lws', [`{ apiGroups: [${GROUP}], resources: [leaderworkersets], verbs: [get, list, watch] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: leaderworkersets }
spec:
  target: { apiVersion: ${GROUP}/v1, kind: LeaderWorkerSet }
  targetState: [spec.leaderWorkerTemplate, spec.networkConfig]
  mode: revisionKey
  revisionKey: { label: ${KEY}, rolloutCompleteCondition: Available }
  generated: { apiVersion: v1, kind: Pod, selectorPath: status.hpaPodSelector }
  foreignHistory: ${coexist ? 'Coexist' : 'Refuse'}
`;
  let lws: Awaited<ReturnType<typeof startLwsController>>;

  beforeAll(async () => {
    await applyManifests(admin, await lwsCrd());
    lws = await startLwsController(cp);
  }, 900_000); // a cold run may still be building LWS's manager (test/testbed/prebuild.ts)

  afterAll(async () => {
    await lws?.stop();
  });

  const available = (o: KubeObject) =>
    ((o.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? []).some(
      (c) => c.type === 'Available' && c.status === 'True',
    );
  const workerTemplate = (image: string) => ({ metadata: { labels: { app: 'serve' } }, spec: { containers: [{ name: 'c', image }] } });

  test("the recipe reports LWS's own history as ForeignHistory; told to coexist, an upgrade rolls every group onto the new template, Outrigger keeps its revisions under the keys the pods carry, and neither controller touches the other's revisions", async () => {
    const ns = await namespace('lws');
    const runtime = await outrigger('lws', ns);
    const mineSeen: Seen = new Map();
    const theirsSeen: Seen = new Map();
    try {
      const parent = await admin.create(lwsResource, {
        apiVersion: `${GROUP}/v1`,
        kind: 'LeaderWorkerSet',
        metadata: { name: 'serve', namespace: ns },
        spec: { replicas: 2, leaderWorkerTemplate: { size: 2, workerTemplate: workerTemplate('registry.example/serve:1') } },
      });
      await eventually(async () => available(await admin.get(lwsResource, { name: 'serve', namespace: ns })), 120_000);
      expect(await pods(ns)).toHaveLength(4);
      const all = async () => (await admin.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns })).items;
      // Outrigger's of the LeaderWorkerSet (the StatefulSet policy, still applied, keeps its leader StatefulSet's too).
      const own = parentLabels(parent);
      const mine = async () => (await all()).filter((r) => Object.entries(own).every(([k, v]) => r.metadata.labels?.[k] === v));
      const theirs = async () =>
        (await all()).filter((r) => controllerOf(r)?.uid === parent.metadata.uid && !r.metadata.labels?.[PARENT_LABEL]);
      const lwsOwn = await eventually(async () => (await theirs())[0]);
      expect(lwsOwn.metadata.labels?.[NAME_LABEL]).toBe('serve');
      expect(lwsOwn.metadata.labels?.[HASH_LABEL]).toBeUndefined();

      // Without Coexist: LWS's own history is another controller's, and Outrigger keeps none.
      await applyManifests(admin, recipe(false));
      expect(await reportPolicy(kube, runtime.clusterId, 'leaderworkersets')).toMatchObject({
        ready: false,
        reason: 'ForeignHistory',
        message: expect.stringContaining(`${ns}/${lwsOwn.metadata.name}`),
      });
      expect(await mine()).toEqual([]);

      await applyManifests(admin, recipe(true));
      await eventually(async () => (await mine()).length > 0, 60_000);
      await expectUntouched(mineSeen, await mine());
      await expectUntouched(theirsSeen, await theirs());

      await admin.patch(
        lwsResource,
        { name: 'serve', namespace: ns },
        { spec: { leaderWorkerTemplate: { workerTemplate: workerTemplate('registry.example/serve:2') } } },
        'merge',
      );
      const rolled = await eventually(async () => {
        const ps = await pods(ns);
        return ps.length === 4 &&
          ps.every((p) => p.spec.containers[0]!.image === 'registry.example/serve:2' && p.status?.phase === 'Running')
          ? ps
          : undefined;
      }, 180_000);
      await eventually(async () => available(await admin.get(lwsResource, { name: 'serve', namespace: ns })), 120_000);
      const key = rolled[0]!.metadata.labels?.[KEY];
      expect(new Set(rolled.map((p) => p.metadata.labels?.[KEY]))).toEqual(new Set([key]));
      // Outrigger's revision under the key the pods carry; LWS's own under it too, applied by LWS alone.
      await eventually(async () => (await mine()).some((r) => r.metadata.labels?.[KEY] === key), 60_000);
      await eventually(async () => (await theirs()).some((r) => r.metadata.labels?.[KEY] === key), 60_000);
      // LWS's controller found only its own revision for each key, and never listed Outrigger's.
      expect((await readFile(lws.log, 'utf8')).split('\n').filter((l) => l.includes('More than one revision'))).toEqual([]);
      const ours = await mine();
      for (const r of ours) {
        expect(r.metadata.labels?.[NAME_LABEL]).toBeUndefined();
        expect(r.metadata.ownerReferences).toEqual([expect.objectContaining({ uid: parent.metadata.uid, controller: false })]);
      }
      // Those still there are as first seen: nobody but their writer changes a revision (each truncates its own).
      const still = (seen: Seen, now: ControllerRevision[]) => new Map([...seen].filter(([n]) => now.some((r) => r.metadata.name === n)));
      await expectUntouched(still(mineSeen, ours), ours);
      const lwsNow = await theirs();
      for (const r of lwsNow) expect(r.metadata.labels?.[PARENT_KIND_LABEL]).toBeUndefined();
      await expectUntouched(still(theirsSeen, lwsNow), lwsNow);
    } finally {
      await runtime.stop();
    }
  }, 500_000);
});
