// The ServiceAccount boundary for CompositeController and DecoratorController
// (docs/operations/security.md#serviceaccounts-a-definition-names): a definition runs only as an account that names
// it, and a pass does only what that account may.
import { clusterCache } from '../../functions/cluster-cache.ts';
import { actingAs, listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { syncDefinition } from '../../functions/composite/sync.ts';
import type { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { adminClient, createNamespace, outriggerClient } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite-identity.outrigger.test';
const widgets = gvr(GROUP, 'v1', 'widgets');
const NS = 'outrigger-composite-identity';
const definition = (name: string, account: string) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${name} }
spec:
  serviceAccount: { namespace: ${NS}, name: ${account} }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: widgets }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { webhook: { url: "https://127.0.0.1:1/sync" } } }
---`;

const cache = clusterCache<CompositeSet>(0);
async function settled(want: (s: CompositeSet) => boolean): Promise<CompositeSet> {
  const kube = outriggerClient();
  for (let i = 0; ; i += 1) {
    forgetDiscovery(kube);
    const set = await listCompositeSet(kube, 'it', cache);
    if (want(set) || i > 100) return set;
    await new Promise((r) => setTimeout(r, 200));
  }
}

afterAll(async () => {
  for (const name of ['id-unconsented', 'id-listonly', 'id-readonly'])
    await adminClient()
      .delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name })
      .catch(() => undefined);
});

describe('the ServiceAccount boundary (CompositeController)', () => {
  test('an account that does not name the definition is not used: Ready=False ServiceAccountNotConsenting', async () => {
    await applyManifests(
      adminClient(),
      `${openCrd(GROUP, 'Widget', 'widgets')}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(NS, 'other', [`{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["list"] }`], 'mapcontroller/*')}
---
${definition('id-unconsented', 'other')}`,
    );
    const set = await settled((s) => s.invalid.some((i) => i.name === 'id-unconsented'));
    expect(set.invalid.find((i) => i.name === 'id-unconsented')).toMatchObject({ reason: 'ServiceAccountNotConsenting' });
    expect(set.composites.map((c) => c.name)).not.toContain('id-unconsented');
  });

  // Each pass reads its parent with a get as the account (docs/controllers/compositecontroller.md): an account that
  // may only list the parent kind would fail every pass, so the definition does not run.
  test('an account that may list the parent kind but not get it is not used: Ready=False Forbidden, naming the verb', async () => {
    await applyManifests(
      adminClient(),
      `${impersonatedAccount(
        NS,
        'lister',
        [`{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["list", "patch"] }`],
        'compositecontroller/id-listonly',
      )}
---
${definition('id-listonly', 'lister')}`,
    );
    const set = await settled((s) => s.invalid.some((i) => i.name === 'id-listonly'));
    expect(set.invalid.find((i) => i.name === 'id-listonly')).toMatchObject({
      reason: 'Forbidden',
      error: expect.stringContaining(`ServiceAccount ${NS}/lister may not get widgets`),
    });
    expect(set.composites.map((c) => c.name)).not.toContain('id-listonly');
    await adminClient().delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name: 'id-listonly' });
  });

  test("a pass does only what the account may: without create on ConfigMaps, the child is the parent's Forbidden problem", async () => {
    await applyManifests(
      adminClient(),
      `${impersonatedAccount(
        NS,
        'reader',
        [
          `{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["get", "list", "patch"] }`,
          `{ apiGroups: ["${GROUP}"], resources: ["widgets/status"], verbs: ["patch"] }`,
          `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list"] }`,
        ],
        'compositecontroller/id-readonly',
      )}
---
${definition('id-readonly', 'reader')}`,
    );
    const set = await settled((s) => s.composites.some((c) => c.name === 'id-readonly'));
    const cc = set.composites.find((c) => c.name === 'id-readonly')!;
    const ns = await createNamespace('cc-identity');
    const parent = await adminClient().create(widgets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Widget',
      metadata: { name: 'w', namespace: ns },
      spec: {},
    } as KubeObject);
    // A hook stand-in that answers one ConfigMap: the write is the account's, which may not create it.
    const hooks = {
      call: () => Promise.resolve({ children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: {} }] }),
    };
    const result = await syncDefinition({ kube: actingAs(outriggerClient(), cc), hooks: hooks as unknown as Hooks }, cc, {
      cluster: 'it',
      group: GROUP,
      kind: 'Widget',
      namespace: ns,
      name: 'w',
      uid: parent.metadata.uid ?? '',
    });
    expect(result.problems).toEqual([expect.objectContaining({ reason: 'Forbidden' })]);
    expect((await adminClient().listAll(gvr('', 'v1', 'configmaps'), { namespace: ns })).map((c) => c.metadata.name)).not.toContain('c');
    const status = (await adminClient().get(widgets, { name: 'w', namespace: ns })).status as { conditions?: Array<{ reason: string }> };
    expect(status.conditions?.[0]?.reason).toBe('Forbidden');
  });
});
