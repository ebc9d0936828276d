// Seed 001's own target: revisionKey mode on the real LeaderWorkerSet CRD (fetched from the sigs.k8s.io/lws
// module, test/testbed/lws.ts). The scene is what the LWS controller leaves: a leader StatefulSet it controls,
// labelled with the revision key, whose leader pods carry the key too, and status.hpaPodSelector, the string
// selector of the leader pods that its scale subresource publishes. Only what the LWS controls and is not
// being deleted counts toward its current key (docs/controllers/history.md#keyed-revisions-revisionkey-mode).
import { forgetPolicies, listPolicies, policyFor } from '../../functions/history/policies.ts';
import { revisionForKey } from '../../functions/history/revision-key.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { revisionHash, targetState, type JsonObject } from '../../shared/history/data.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { Resources, forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { newControllerRef, type SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testState } from '../testbed/index.ts';
import { lwsCrd } from '../testbed/lws.ts';
import { controllersGrant } from '../testbed/rbac.ts';

const GROUP = 'leaderworkerset.x-k8s.io';
const KEY = 'leaderworkerset.sigs.k8s.io/template-revision-hash';
const NAME = 'leaderworkerset.sigs.k8s.io/name';
const INDEX = 'leaderworkerset.sigs.k8s.io/worker-index';
const STATE = ['spec.leaderWorkerTemplate', 'spec.networkConfig'];
const lwsResource = gvr(GROUP, 'v1', 'leaderworkersets');
const statefulSets = gvr('apps', 'v1', 'statefulsets');
const HOLD = 'test.outrigger.dev/hold';

const kube = outriggerClient();
const state = testState();
const admin = adminClient();

beforeAll(async () => {
  await applyManifests(admin, await lwsCrd());
  await applyManifests(
    admin,
    `${controllersGrant('outrigger-lws', [`{ apiGroups: [${GROUP}], resources: [leaderworkersets], verbs: [get, list, watch] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: leaderworkersets }
spec:
  target: { apiVersion: ${GROUP}/v1, kind: LeaderWorkerSet }
  targetState: [${STATE.join(', ')}]
  mode: revisionKey
  revisionKey: { label: ${KEY}, rolloutCompleteCondition: Available }
  generated: { apiVersion: v1, kind: Pod, selectorPath: status.hpaPodSelector }
`,
  );
  forgetDiscovery(kube);
  forgetPolicies();
}, 180_000);

const podTemplate = (image: string) => ({ metadata: { labels: { app: 'serve' } }, spec: { containers: [{ name: 'c', image }] } });

/** A LeaderWorkerSet, with the status its controller writes first (the leader pods' selector). */
async function createLws(ns: string, name: string, image: string): Promise<KubeObject> {
  await admin
    .create(Resources.serviceAccounts, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: ns } })
    .catch(() => undefined);
  await admin.create(lwsResource, {
    apiVersion: `${GROUP}/v1`,
    kind: 'LeaderWorkerSet',
    metadata: { name, namespace: ns },
    spec: { replicas: 1, leaderWorkerTemplate: { size: 1, workerTemplate: podTemplate(image) } },
  });
  return admin.patch(
    lwsResource,
    { name, namespace: ns, subresource: 'status' },
    { status: { hpaPodSelector: `${NAME}=${name},${INDEX}=0` } },
    'merge',
  );
}

/** The leader StatefulSet the LWS controller makes (controlled by the LWS, the key on it), and its leader pod. */
async function leaders(lws: KubeObject, key: string, opts: { podKey?: string; terminating?: boolean } = {}): Promise<void> {
  const { name, namespace } = lws.metadata as { name: string; namespace: string };
  const podLabels = { [NAME]: name, [INDEX]: '0' };
  const sts = await admin.create(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, namespace, labels: { [NAME]: name, [KEY]: key }, ownerReferences: [newControllerRef(lws)] },
    spec: {
      replicas: 0,
      serviceName: name,
      selector: { matchLabels: podLabels },
      template: { ...podTemplate('x'), metadata: { labels: { ...podLabels, [KEY]: key } } },
    },
  });
  await leaderPod(sts, `${name}-0`, opts.podKey ?? key, opts.terminating);
}

async function leaderPod(sts: KubeObject, podName: string, key: string, terminating = false, lwsName = sts.metadata.name!): Promise<void> {
  const { namespace } = sts.metadata as { namespace: string };
  await admin.create(Resources.pods, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: podName,
      namespace,
      labels: { [NAME]: lwsName, [INDEX]: '0', [KEY]: key },
      ownerReferences: [newControllerRef(sts)],
      ...(terminating ? { finalizers: [HOLD] } : {}),
    },
    spec: { containers: [{ name: 'c', image: 'x' }] },
  });
  if (terminating) await admin.delete(Resources.pods, { name: podName, namespace });
}

async function release(ns: string, pod: string): Promise<void> {
  await admin.patch(Resources.pods, { name: pod, namespace: ns }, { metadata: { finalizers: null } }, 'merge');
}

const keyOf = (o: KubeObject): SyncKey => ({
  cluster: 'lws',
  group: GROUP,
  kind: 'LeaderWorkerSet',
  namespace: o.metadata.namespace,
  name: o.metadata.name!,
  uid: o.metadata.uid!,
});
const hashKey = (o: KubeObject) => revisionHash(targetState(o as unknown as JsonObject, STATE), 0);

/** The policy, once in effect: until the CRD just applied is served, its kind does not resolve. */
async function policy() {
  return eventually(async () => {
    const found = policyFor(await listPolicies(kube, 'lws'), GROUP, 'LeaderWorkerSet');
    if (!found) {
      forgetDiscovery(kube);
      forgetPolicies();
    }
    return found;
  });
}

async function sync(o: KubeObject) {
  return syncHistory({ kube, state, holder: 'lws' }, await policy(), keyOf(o), ['ControllerRevision/x']);
}

/** `<revision>:<key>` of each revision the LWS owns. */
async function keys(o: KubeObject): Promise<string[]> {
  const list = await kube.list(Resources.controllerRevisions, {
    namespace: o.metadata.namespace,
    labelSelector: `outrigger.dev/parent=${o.metadata.name}`,
  });
  return list.items
    .filter((r) => r.metadata.ownerReferences?.some((ref) => ref.uid === o.metadata.uid))
    .map((r) => `${(r as unknown as { revision: number }).revision}:${r.metadata.labels?.[KEY]}`)
    .sort();
}

test('an upgrade keeps the leaders key: it gets a revision of its own, the revision of another key is never relabelled, and nothing rolls', async () => {
  const ns = await createNamespace('lwsup');
  // History was first taken before the leaders existed: the state is recorded under its hash.
  const lws = await createLws(ns, 'web', 'app:1');
  expect(await sync(lws)).toMatchObject({ outcome: 'created', number: 1 });
  expect(await keys(lws)).toEqual([`1:${hashKey(lws)}`]);
  // The LWS controller then made its leaders with the key it computed before revisions existed.
  await leaders(lws, 'legacy-key');
  expect(await sync(lws)).toMatchObject({ outcome: 'created', number: 2 });
  expect(await keys(lws)).toEqual([`1:${hashKey(lws)}`, '2:legacy-key']);
  const p = await policy();
  expect((await revisionForKey(kube, p, lws, 'legacy-key'))?.revision).toBe(2);
  expect((await revisionForKey(kube, p, lws, hashKey(lws)))?.revision).toBe(1);
  expect(await sync(lws)).toMatchObject({ outcome: 'unchanged', number: 2 });
  // Nothing rolls: the leaders keep their key.
  expect((await admin.get(statefulSets, { name: 'web', namespace: ns })).metadata.labels?.[KEY]).toBe('legacy-key');
});

test("a LWS deleted and created again under the same name never takes the old one's key", async () => {
  const ns = await createNamespace('lwsre');
  const old = await createLws(ns, 'web', 'app:1');
  await leaders(old, 'old-key');
  expect(await sync(old)).toMatchObject({ outcome: 'created', number: 1 });
  expect(await keys(old)).toEqual(['1:old-key']);
  // Deleted; its leaders remain for a while (the garbage collector has not got to them: none runs here).
  await admin.delete(lwsResource, { name: 'web', namespace: ns });
  const renewed = await createLws(ns, 'web', 'app:1');
  expect(renewed.metadata.uid).not.toBe(old.metadata.uid);
  // The same selector string selects the old leader pod; it is not the new LWS's.
  expect(await sync(renewed)).toMatchObject({ outcome: 'created', number: 1 });
  expect(await keys(renewed)).toEqual([`1:${hashKey(renewed)}`]);
  expect(await revisionForKey(kube, await policy(), renewed, 'old-key')).toBeUndefined();
});

test("a leader being deleted does not count: a terminating pod's key is not the current key", async () => {
  const ns = await createNamespace('lwsterm');
  const lws = await createLws(ns, 'web', 'app:1');
  // The leader pod with a stale key is on its way out (held here by a finalizer), under the LWS's own leaders.
  await leaders(lws, hashKey(lws), { podKey: 'stale-key', terminating: true });
  try {
    expect(await sync(lws)).toMatchObject({ outcome: 'created', number: 1 });
    expect(await keys(lws)).toEqual([`1:${hashKey(lws)}`]);
  } finally {
    await release(ns, 'web-0');
  }
});

test("two LWS whose leader pods' labels overlap: neither reads the other's key", async () => {
  const ns = await createNamespace('lwstwo');
  const api = await createLws(ns, 'api', 'app:1');
  const web = await createLws(ns, 'web', 'app:1');
  await leaders(api, 'api-key');
  await leaders(web, 'web-key');
  // A pod of api's leaders carrying web's labels (relabelled by hand, say): web's selector selects it, but it
  // is not web's.
  await leaderPod(await admin.get(statefulSets, { name: 'api', namespace: ns }), 'api-1', 'api-key', false, 'web');
  expect(await sync(web)).toMatchObject({ outcome: 'created', number: 1 });
  expect(await sync(api)).toMatchObject({ outcome: 'created', number: 1 });
  expect(await keys(web)).toEqual(['1:web-key']);
  expect(await keys(api)).toEqual(['1:api-key']);
  const p = await policy();
  expect(await revisionForKey(kube, p, web, 'api-key')).toBeUndefined();
  expect(await revisionForKey(kube, p, api, 'web-key')).toBeUndefined();
});
