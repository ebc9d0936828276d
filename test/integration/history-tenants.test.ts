// Teams sharing a cluster, one of them running a controller of its own that keeps its parents' history
// (docs/controllers/history.md#coexistence): its revisions make Outrigger leave that team's parents alone, and say
// so, but never put the kind's policy out of effect for everyone else.
import { forgetPolicies, listPolicies, policyFor, revisionPolicies } from '../../functions/history/policies.ts';
import { reportPolicy } from '../../functions/history/report.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { statefulSet } from '../../local/fixtures.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { Resources, gvr, type KubeObject } from '../../shared/kube/index.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { statefulSetPolicy } from '../testbed/policies.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const CLUSTER = 'it';

test("trust boundary: a tenant's own history of its parent does not stop the policy in other namespaces", async () => {
  await statefulSetPolicy(outriggerClient());
  const tenantNs = await createNamespace('tenant');
  const otherNs = await createNamespace('other');
  // The tenant may write StatefulSets and ControllerRevisions in its namespace, as its own controller does.
  await applyManifests(
    adminClient(),
    `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: own-history, namespace: ${tenantNs} }
rules: [{ apiGroups: [apps], resources: [statefulsets, controllerrevisions], verbs: [get, list, create, delete] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: own-history, namespace: ${tenantNs} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: own-history }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: team-a }]
`,
  );
  const tenant = adminClient().as({ user: 'team-a' });
  const theirs = await tenant.create<KubeObject>(statefulSets, statefulSet('db', tenantNs, 'registry.example/db:1'));
  const own = 'db-own-history';
  await tenant.create(Resources.controllerRevisions, {
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: {
      name: own,
      namespace: tenantNs,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: theirs.metadata.uid!, controller: true }],
    },
    revision: 1,
    data: {},
  });
  const kube = outriggerClient();
  const key = (o: KubeObject): SyncKey => ({
    cluster: CLUSTER,
    group: 'apps',
    kind: 'StatefulSet',
    namespace: o.metadata.namespace!,
    name: o.metadata.name!,
    uid: o.metadata.uid!,
  });
  const deps = { kube, state: testState(), holder: uniqueName('h') };
  try {
    // The policy stays in effect, and says whose history it leaves alone.
    expect(await reportPolicy(kube, CLUSTER, 'statefulsets')).toMatchObject({ ready: true });
    const { status } = await adminClient().get(revisionPolicies, { name: 'statefulsets' });
    expect((status as { conditions: unknown[] }).conditions).toContainEqual(
      expect.objectContaining({ type: 'ForeignHistory', status: 'True', message: expect.stringContaining(`${tenantNs}/${own}`) }),
    );
    forgetPolicies(CLUSTER);
    const policy = policyFor(await listPolicies(kube, CLUSTER), 'apps', 'StatefulSet');
    expect(policy).toBeDefined();

    // Another team's StatefulSet gets its history; the tenant's is left to its own controller.
    const web = await adminClient().create<KubeObject>(statefulSets, statefulSet('web', otherNs, 'registry.example/web:1'));
    expect(await syncHistory(deps, policy!, key(web), ['StatefulSet/it/x/1/added'])).toMatchObject({ outcome: 'created', number: 1 });
    expect(await syncHistory(deps, policy!, key(theirs), ['StatefulSet/it/x/2/added'])).toMatchObject({
      outcome: 'skipped',
      reason: expect.stringMatching(/another controller keeps this parent's history/),
    });
    const theirRevisions = await kube.list(Resources.controllerRevisions, { namespace: tenantNs });
    expect(theirRevisions.items.map((r) => r.metadata.name)).toEqual([own]);
  } finally {
    // Gone, and the policy checked again: the shared bed's other files use it.
    await tenant.delete(Resources.controllerRevisions, { name: own, namespace: tenantNs });
    await reportPolicy(kube, CLUSTER, 'statefulsets');
  }
}, 60_000);
