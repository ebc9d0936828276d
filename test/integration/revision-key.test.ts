// Seed 001 (KEP-238) revisionKey mode, on a custom resource as the parent (an LWS-like "Widget"), with the
// read access granted the way docs/controllers/history.md#kinds-of-your-own tells a platform team to.
import { forgetPolicies, listPolicies, policyFor } from '../../functions/history/policies.ts';
import { revisionForKey } from '../../functions/history/revision-key.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { truncateHistory } from '../../functions/history/truncate.ts';
import { revisionHash, targetState, type JsonObject } from '../../shared/history/data.ts';
import { Resources, forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { newControllerRef, type SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, outriggerClient, testState } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant } from '../testbed/rbac.ts';

const KEY = 'example.com/revision-key';
const widgets = gvr('test.outrigger.dev', 'v1', 'widgets');
const SETUP = `
${openCrd('test.outrigger.dev', 'Widget', 'widgets')}---
${controllersGrant('outrigger-widgets', [`{ apiGroups: [test.outrigger.dev], resources: [widgets], verbs: [get, list, watch] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: widgets }
spec:
  target: { apiVersion: test.outrigger.dev/v1, kind: Widget }
  targetState: [spec.template, spec.networkConfig]
  mode: revisionKey
  revisionKey: { label: ${KEY}, rolloutCompleteCondition: Available }
  generated: { apiVersion: v1, kind: Pod }
`;

const kube = outriggerClient();
const state = testState();

beforeAll(async () => {
  await applyManifests(adminClient(), SETUP);
  forgetDiscovery(kube);
  forgetPolicies();
});

const template = (image: string) => ({ metadata: { labels: { app: 'w' } }, spec: { containers: [{ name: 'c', image }] } });
const keyOf = (o: KubeObject): SyncKey => ({
  cluster: 'it',
  group: 'test.outrigger.dev',
  kind: 'Widget',
  namespace: o.metadata.namespace,
  name: o.metadata.name!,
  uid: o.metadata.uid!,
});

async function sync(o: KubeObject) {
  const policy = policyFor(await listPolicies(kube, 'it'), 'test.outrigger.dev', 'Widget')!;
  return syncHistory({ kube, state, holder: 'rk' }, policy, keyOf(o), ['ControllerRevision/x']);
}

async function keys(ns: string): Promise<string[]> {
  const list = await kube.list(Resources.controllerRevisions, { namespace: ns });
  return list.items.map((r) => `${(r as unknown as { revision: number }).revision}:${r.metadata.labels?.[KEY]}`).sort();
}

// Controlled by the widget: only what the parent controls counts toward its current key.
async function leaderPod(owner: KubeObject, name: string, key: string) {
  const admin = adminClient();
  const ns = owner.metadata.namespace!;
  await admin
    .create(Resources.serviceAccounts, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: ns } })
    .catch(() => undefined);
  return admin.create(Resources.pods, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { app: 'w', [KEY]: key }, ownerReferences: [newControllerRef(owner)] },
    spec: { containers: [{ name: 'c', image: 'x' }] },
  });
}

test('the three cases of KEP-238, lookup by key, and cleanup once the rollout is done', async () => {
  const ns = await createNamespace('rkey');
  const admin = adminClient();
  const policy = policyFor(await listPolicies(kube, 'it'), 'test.outrigger.dev', 'Widget')!;

  // Case 1, upgrade: the leader already carries a key from before history existed; it is adopted as is.
  let w = await admin.create(widgets, {
    apiVersion: 'test.outrigger.dev/v1',
    kind: 'Widget',
    metadata: { name: 'lws', namespace: ns },
    spec: { replicas: 2, selector: { matchLabels: { app: 'w' } }, template: template('app:1') },
  });
  await leaderPod(w, 'lws', 'legacy-key');
  expect(await sync(w)).toMatchObject({ outcome: 'created', number: 1 });
  expect(await keys(ns)).toEqual(['1:legacy-key']);
  expect((await revisionForKey(kube, policy, w, 'legacy-key'))?.revision).toBe(1);
  expect(await sync(w)).toMatchObject({ outcome: 'unchanged', number: 1 });

  // Scaling is not part of the target state: nothing happens.
  w = await admin.patch(widgets, { name: 'lws', namespace: ns }, { spec: { replicas: 5 } }, 'merge');
  expect(await sync(w)).toMatchObject({ outcome: 'unchanged' });

  // Case 3, update: compared semantically with the current key's revision; a new revision keyed by its hash.
  w = await admin.patch(widgets, { name: 'lws', namespace: ns }, { spec: { template: template('app:2') } }, 'merge');
  const newKey = revisionHash(targetState(w as unknown as JsonObject, ['spec.template', 'spec.networkConfig']), 0);
  expect(await sync(w)).toMatchObject({ outcome: 'created', number: 2 });
  expect(await keys(ns)).toEqual(['1:legacy-key', `2:${newKey}`]);
  expect(await sync(w)).toMatchObject({ outcome: 'unchanged', number: 2 }); // redelivery during the rollout

  // A worker still runs the old key: even once the rollout reads as done, its revision stays.
  await leaderPod(w, 'lws-worker', 'legacy-key');
  // Not done yet: nothing is deleted.
  expect((await truncateHistory({ kube }, policy, keyOf(w))).deleted).toEqual([]);
  // The parent's controller rolls the leader to the new key and reports the rollout done.
  await admin.patch(Resources.pods, { name: 'lws', namespace: ns }, { metadata: { labels: { [KEY]: newKey } } }, 'merge');
  w = await admin.patch(
    widgets,
    { name: 'lws', namespace: ns, subresource: 'status' },
    { status: { conditions: [{ type: 'Available', status: 'True' }] } },
    'merge',
  );
  expect((await truncateHistory({ kube }, policy, keyOf(w))).deleted).toEqual([]);
  expect(await keys(ns)).toEqual(['1:legacy-key', `2:${newKey}`]);
  await admin.delete(Resources.pods, { name: 'lws-worker', namespace: ns });
  expect((await truncateHistory({ kube }, policy, keyOf(w))).deleted).toHaveLength(1);
  expect(await keys(ns)).toEqual([`2:${newKey}`]);

  // Case 2, a new object with no generated object yet: keyed by its hash.
  const w2 = await admin.create(widgets, {
    apiVersion: 'test.outrigger.dev/v1',
    kind: 'Widget',
    metadata: { name: 'fresh', namespace: ns },
    spec: { selector: { matchLabels: { app: 'none' } }, template: template('app:9') },
  });
  expect(await sync(w2)).toMatchObject({ outcome: 'created', number: 1 });
  const fresh = (await kube.list(Resources.controllerRevisions, { namespace: ns, labelSelector: 'outrigger.dev/parent=fresh' })).items[0]!;
  expect(fresh.metadata.labels?.[KEY]).toBe(
    revisionHash(targetState(w2 as unknown as JsonObject, ['spec.template', 'spec.networkConfig']), 0),
  );
});
