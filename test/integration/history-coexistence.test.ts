// Controller history beside kube-controller-manager's StatefulSet controller, which keeps its own history of
// every StatefulSet (docs/controllers/history.md#coexistence): a policy for the kind does not fight it unless told to coexist.
import { forgetPolicies, historySource, listPolicies, policyFor, revisionPolicies } from '../../functions/history/policies.ts';
import { reportPolicy } from '../../functions/history/report.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { historyCommand } from '../../cli/history.ts';
import { parsePolicy } from '../../shared/history/policy.ts';
import { HASH_LABEL, PARENT_LABEL, type ControllerRevision } from '../../shared/history/revisions.ts';
import { Resources, gvr, gvrString, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf, type SyncKey } from '../../shared/ownership/index.ts';
import { GC_CONTROLLERS, startTestControlPlane, type TestControlPlane } from '../testbed/control-plane.ts';
import { STATEFULSET_POLICY } from '../testbed/policies.ts';
import { eventually, testCluster, testState, uniqueName } from '../testbed/index.ts';
import { statefulSet } from '../../local/fixtures.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const CLUSTER = 'kcm';

let cp: TestControlPlane;
let admin: KubeClient;
let kube: KubeClient;

beforeAll(async () => {
  cp = await startTestControlPlane({ apiservers: 1, controllers: ['statefulset-controller', ...GC_CONTROLLERS] });
  process.stderr.write(`[control plane] 1 apiserver and kube-controller-manager (statefulset-controller) ready in ${cp.startedInMs} ms\n`);
  admin = cp.client('admin');
  kube = cp.client('outrigger');
}, 180_000);

afterAll(async () => {
  await cp?.stop();
});

test('a StatefulSet policy reports ForeignHistory and writes nothing; opted in with foreignHistory: Coexist, both histories are kept; outrigger history shows the in-tree one read-only', async () => {
  const ns = uniqueName('coexist');
  await admin.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const sts = await admin.create<KubeObject>(statefulSets, statefulSet('web', ns, 'registry.example/app:1'));
  const revisions = async () => (await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns })).items;
  // The in-tree controller's revision: controlled by the StatefulSet, its hash label, none of Outrigger's.
  const inTree = await eventually(async () => (await revisions()).find((r) => controllerOf(r)?.uid === sts.metadata.uid));
  expect(inTree.metadata.labels?.[HASH_LABEL]).toBeDefined();
  expect(inTree.metadata.labels?.[PARENT_LABEL]).toBeUndefined();

  await applyManifests(admin, STATEFULSET_POLICY);
  const report = await reportPolicy(kube, CLUSTER, 'statefulsets');
  expect(report).toMatchObject({
    ready: false,
    reason: 'ForeignHistory',
    message: expect.stringContaining(`${ns}/${inTree.metadata.name}`),
  });
  const reported = await kube.get(revisionPolicies, { name: 'statefulsets' });
  expect((reported.status as { conditions: unknown[] }).conditions).toEqual([
    expect.objectContaining({ type: 'Ready', status: 'False', reason: 'ForeignHistory' }),
  ]);
  // Not in effect: not watched, not routed, no parent synced.
  forgetPolicies(CLUSTER);
  expect(policyFor(await listPolicies(kube, CLUSTER), 'apps', 'StatefulSet')).toBeUndefined();
  expect((await historySource.watches(testCluster(CLUSTER), kube)).map(gvrString)).not.toContain(gvrString(statefulSets));

  // A sync that comes anyway (a request queued before the check) writes nothing.
  const key: SyncKey = { cluster: CLUSTER, group: 'apps', kind: 'StatefulSet', namespace: ns, name: 'web', uid: sts.metadata.uid! };
  const state = testState();
  const refused = parsePolicy(reported);
  expect(await syncHistory({ kube, state, holder: uniqueName('h') }, refused, key, ['StatefulSet/kcm/x/1/added'])).toMatchObject({
    outcome: 'skipped',
    reason: expect.stringMatching(/another controller keeps this parent's history/),
  });
  expect((await revisions()).map((r) => r.metadata.name)).toEqual([inTree.metadata.name]);

  // `outrigger history` (as the admin, a user) shows the in-tree revision, read-only.
  const shown = await historyCommand(admin, 'statefulset/web', ns);
  expect(shown).toContain('no revisions');
  expect(shown).toMatch(new RegExp(`kept by another controller \\(read-only[^\\n]*\\n[^\\n]*\\n1\\s+${inTree.metadata.name}`));

  // Opted in: Ready, and Outrigger's history beside the in-tree one, which is left as it is.
  await admin.patch(revisionPolicies, { name: 'statefulsets' }, { spec: { foreignHistory: 'Coexist' } }, 'merge');
  expect(await reportPolicy(kube, CLUSTER, 'statefulsets')).toMatchObject({ ready: true, reason: 'Valid' });
  forgetPolicies(CLUSTER);
  const coexisting = policyFor(await listPolicies(kube, CLUSTER), 'apps', 'StatefulSet')!;
  expect(coexisting.spec.foreignHistory).toBe('Coexist');
  expect(await syncHistory({ kube, state, holder: uniqueName('h') }, coexisting, key, ['StatefulSet/kcm/x/2/added'])).toMatchObject({
    outcome: 'created',
    number: 1,
  });
  const after = await revisions();
  expect(after.filter((r) => r.metadata.labels?.[PARENT_LABEL] === 'web')).toHaveLength(1);
  const still = after.find((r) => r.metadata.name === inTree.metadata.name) as (KubeObject & { revision: number }) | undefined;
  expect(still?.metadata.resourceVersion).toBe(inTree.metadata.resourceVersion);
}, 120_000);
