// Ownership against the real apiserver, as the outrigger identity: the selector matcher agrees with the
// apiserver's own filtering; parents of two kinds racing for the same orphans end with one owner each and
// never trade them afterwards; a parent being deleted adopts nothing; a child recreated under the same name
// is never captured; events route per the routing rules (docs/controllers/ownership-and-routing.md#the-router).
import fc from 'fast-check';
import { Resources, gvr, type KubeObject } from '../../shared/kube/index.ts';
import {
  BatchResolver,
  claim,
  compileSelector,
  controllerOf,
  dedupeKeys,
  matches,
  newControllerRef,
  routeEvent,
  selectorString,
  type ControllerKind,
  type LabelSelector,
  type LabelSelectorRequirement,
} from '../../shared/ownership/index.ts';
import { PARENT_KIND_LABEL } from '../../shared/history/revisions.ts';
import { adminClient, createNamespace, outriggerClient } from '../testbed/index.ts';

const configMaps = gvr('', 'v1', 'configmaps');
const statefulSets = gvr('apps', 'v1', 'statefulsets');
const daemonSets = gvr('apps', 'v1', 'daemonsets');

const controllers: ControllerKind[] = [
  {
    resource: statefulSets,
    kind: 'StatefulSet',
    namespaced: true,
    selectorOf: (p) => (p.spec as { selector?: LabelSelector }).selector,
    target: 'history',
  },
  {
    resource: daemonSets,
    kind: 'DaemonSet',
    namespaced: true,
    selectorOf: (p) => (p.spec as { selector?: LabelSelector }).selector,
    target: 'history',
  },
];

function podTemplate(labels: Record<string, string>) {
  return { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'registry.example/app:1' }] } };
}

async function createParent(
  kind: 'StatefulSet' | 'DaemonSet',
  namespace: string,
  name: string,
  labels: Record<string, string>,
  extra: Partial<KubeObject['metadata']> = {},
): Promise<KubeObject> {
  const spec = {
    selector: { matchLabels: labels },
    template: podTemplate(labels),
    ...(kind === 'StatefulSet' ? { serviceName: name, replicas: 0 } : {}),
  };
  return adminClient().create(kind === 'StatefulSet' ? statefulSets : daemonSets, {
    apiVersion: 'apps/v1',
    kind,
    metadata: { name, namespace, ...extra },
    spec,
  });
}

function revision(namespace: string, name: string, labels: Record<string, string>): KubeObject {
  return { apiVersion: 'apps/v1', kind: 'ControllerRevision', metadata: { name, namespace, labels }, data: {}, revision: 1 };
}

/**
 * Labels that mark a claimed revision as Outrigger's: without them, a revision a StatefulSet or DaemonSet controls
 * is another controller's history, and every file's policy for the kind on the shared bed reports ForeignHistory
 * while it exists (docs/controllers/history.md#coexistence).
 */
const outriggers = (labels: Record<string, string>) => ({ ...labels, [PARENT_KIND_LABEL]: 'ownership-test' });

describe('label selectors agree with the apiserver', () => {
  test('for random objects and random selectors', async () => {
    const ns = await createNamespace('selector');
    const admin = adminClient();
    const keys = ['a', 'b', 'c'];
    const values = ['x', 'y', 'z'];
    const labelSets = fc.sample(fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 3 }), {
      numRuns: 40,
      seed: 42,
    });
    const objects = await Promise.all(
      labelSets.map((labels, i) =>
        admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `o-${i}`, namespace: ns, labels } }),
      ),
    );
    const requirement: fc.Arbitrary<LabelSelectorRequirement> = fc.oneof(
      fc.record({
        key: fc.constantFrom(...keys),
        operator: fc.constantFrom('In' as const, 'NotIn' as const),
        values: fc.uniqueArray(fc.constantFrom(...values), { minLength: 1, maxLength: 3 }),
      }),
      fc.record({ key: fc.constantFrom(...keys), operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const) }),
    );
    const selector: fc.Arbitrary<LabelSelector> = fc.record(
      {
        matchLabels: fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 2 }),
        matchExpressions: fc.array(requirement, { maxLength: 3 }),
      },
      { requiredKeys: [] },
    );
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(selector, async (sel) => {
        const compiled = compileSelector(sel);
        const ours = objects
          .filter((o) => matches(compiled, o.metadata.labels))
          .map((o) => o.metadata.name)
          .sort();
        const server = await admin.list(configMaps, { namespace: ns, labelSelector: selectorString(compiled) });
        expect(ours).toEqual(server.items.map((o) => o.metadata.name).sort());
        compared += 1;
      }),
      { numRuns: 150, seed: 7 },
    );
    expect(compared).toBe(150);
    // The missing selector matches nothing (and is never sent to the apiserver).
    expect(objects.filter((o) => matches(compileSelector(null), o.metadata.labels))).toEqual([]);
  });
});

describe('claiming on the real apiserver', () => {
  const kube = outriggerClient();
  const ctxFor = (parentResource: typeof statefulSets) => ({ kube, parentResource, childResource: Resources.controllerRevisions });

  test('two parents of different kinds racing for the same orphans end with one owner per object, and keep it over 100 more events', async () => {
    const ns = await createNamespace('race');
    const labels = { app: 'shared' };
    const sts = await createParent('StatefulSet', ns, 'web', labels);
    const ds = await createParent('DaemonSet', ns, 'agent', labels);
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => kube.create(Resources.controllerRevisions, revision(ns, `rev-${i}`, outriggers(labels)))),
    );
    const selector = compileSelector({ matchLabels: labels });
    const list = async () => (await kube.list(Resources.controllerRevisions, { namespace: ns })).items;

    // Several rounds of both parents claiming at once from the same (partly stale) view.
    for (let round = 0; round < 3; round += 1) {
      const view = await list();
      await Promise.all([claim(ctxFor(statefulSets), sts, selector, view), claim(ctxFor(daemonSets), ds, selector, view)]);
    }
    const ownerOf = async () =>
      new Map(
        (await list()).map((r) => [r.metadata.name!, r.metadata.ownerReferences?.filter((o) => o.controller).map((o) => o.uid) ?? []]),
      );
    const after = await ownerOf();
    expect(after.size).toBe(20);
    for (const owners of after.values()) {
      expect(owners).toHaveLength(1);
      expect([sts.metadata.uid, ds.metadata.uid]).toContain(owners[0]);
    }

    // 100 further events (label edits that keep matching), each routed and claimed: no owner changes hands.
    const resolver = () => new BatchResolver(kube, 'it', controllers);
    for (let i = 0; i < 100; i += 1) {
      const name = `rev-${i % 20}`;
      const before = await kube.get(Resources.controllerRevisions, { name, namespace: ns });
      const updated = await kube.patch(
        Resources.controllerRevisions,
        { name, namespace: ns },
        { metadata: { labels: { touch: String(i) } } },
        'merge',
      );
      const r = resolver();
      const keys = dedupeKeys(
        (await Promise.all(routeEvent('modified', updated, before).map((s) => r.resolve(s)))).flat().map((k) => k.key),
      );
      expect(keys.map((k) => k.uid)).toEqual([controllerOf(updated)!.uid]);
      const view = await list();
      for (const key of keys) {
        const p = key.kind === 'StatefulSet' ? sts : ds;
        await claim(ctxFor(key.kind === 'StatefulSet' ? statefulSets : daemonSets), p, selector, view);
      }
    }
    expect(await ownerOf()).toEqual(after);
  }, 60_000);

  test('a parent being deleted adopts nothing, even when the event that triggered the sync is stale', async () => {
    const ns = await createNamespace('deleting');
    const labels = { app: 'going' };
    const sts = await createParent('StatefulSet', ns, 'old', labels, { finalizers: ['outrigger.test/hold'] });
    await adminClient().delete(statefulSets, { name: 'old', namespace: ns });
    await kube.create(Resources.controllerRevisions, revision(ns, 'orphan', labels));
    const view = (await kube.list(Resources.controllerRevisions, { namespace: ns })).items;
    // `sts` is the object as an old event saw it: no deletionTimestamp. The claim re-reads it first.
    const result = await claim(ctxFor(statefulSets), sts, compileSelector({ matchLabels: labels }), view);
    expect(result.adopted).toEqual([]);
    expect(result.parentGone).toMatch(/is being deleted/);
    expect(controllerOf(await kube.get(Resources.controllerRevisions, { name: 'orphan', namespace: ns }))).toBeUndefined();
    await adminClient().patch(statefulSets, { name: 'old', namespace: ns }, { metadata: { finalizers: null } }, 'merge');
  });

  test('a child deleted and recreated under the same name during an adoption is not adopted', async () => {
    const ns = await createNamespace('recreate');
    const labels = { app: 'r' };
    const sts = await createParent('StatefulSet', ns, 'web', labels);
    await kube.create(Resources.controllerRevisions, revision(ns, 'child', labels));
    const staleView = (await kube.list(Resources.controllerRevisions, { namespace: ns })).items;
    await kube.delete(Resources.controllerRevisions, { name: 'child', namespace: ns });
    const recreated = await kube.create(Resources.controllerRevisions, revision(ns, 'child', labels));
    const result = await claim(ctxFor(statefulSets), sts, compileSelector({ matchLabels: labels }), staleView);
    expect(result.adopted).toEqual([]);
    expect(result.lost.map((c) => c.metadata.name)).toEqual(['child']);
    const now = await kube.get(Resources.controllerRevisions, { name: 'child', namespace: ns });
    expect(now.metadata.uid).toBe(recreated.metadata.uid);
    expect(controllerOf(now)).toBeUndefined();
  });

  test('a child that stops matching is released; one owned by another is never touched', async () => {
    const ns = await createNamespace('release');
    const sts = await createParent('StatefulSet', ns, 'web', { app: 'w' });
    const other = await createParent('DaemonSet', ns, 'other', { app: 'o' });
    const mine = await kube.create<KubeObject>(Resources.controllerRevisions, {
      ...revision(ns, 'mine', { app: 'moved' }),
      metadata: { name: 'mine', namespace: ns, labels: outriggers({ app: 'moved' }), ownerReferences: [newControllerRef(sts)] },
    });
    const theirs = await kube.create<KubeObject>(Resources.controllerRevisions, {
      ...revision(ns, 'theirs', { app: 'w' }),
      metadata: { name: 'theirs', namespace: ns, labels: outriggers({ app: 'w' }), ownerReferences: [newControllerRef(other)] },
    });
    const result = await claim(ctxFor(statefulSets), sts, compileSelector({ matchLabels: { app: 'w' } }), [mine, theirs]);
    expect(result.released.map((c) => c.metadata.name)).toEqual(['mine']);
    expect(result.owned).toEqual([]);
    expect(controllerOf(await kube.get(Resources.controllerRevisions, { name: 'mine', namespace: ns }))).toBeUndefined();
    const theirsNow = await kube.get(Resources.controllerRevisions, { name: 'theirs', namespace: ns });
    expect(theirsNow.metadata.resourceVersion).toBe(theirs.metadata.resourceVersion);
  });
});

describe('routing events to controllers (docs/controllers/ownership-and-routing.md#the-router), resolved on the real apiserver', () => {
  test('one case per rule, plus a ControllerRef whose uid does not match', async () => {
    const kube = outriggerClient();
    const ns = await createNamespace('route');
    const labels = { app: 'route' };
    const sts = await createParent('StatefulSet', ns, 'web', labels);
    const ds = await createParent('DaemonSet', ns, 'agent', labels);
    await createParent('DaemonSet', ns, 'unrelated', { app: 'else' });
    const owned = revision(ns, 'c', labels);
    owned.metadata.uid = 'child-uid';
    owned.metadata.resourceVersion = '1';
    owned.metadata.ownerReferences = [newControllerRef(sts)];
    const orphan: KubeObject = { ...owned, metadata: { ...owned.metadata, ownerReferences: [] } };
    const impostor: KubeObject = {
      ...owned,
      metadata: { ...owned.metadata, ownerReferences: [{ ...newControllerRef(sts), uid: 'not-the-real-uid' }] },
    };
    const foreign: KubeObject = {
      ...owned,
      metadata: {
        ...owned.metadata,
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'd', uid: 'd-uid', controller: true }],
      },
    };
    const relabelled: KubeObject = { ...orphan, metadata: { ...orphan.metadata, labels: { app: 'route', extra: '1' } } };

    const resolver = new BatchResolver(kube, 'it', controllers);
    const route = async (...args: Parameters<typeof routeEvent>) =>
      dedupeKeys((await Promise.all(routeEvent(...args).map((s) => resolver.resolve(s)))).flat().map((k) => k.key)).map(
        (k) => `${k.kind}/${k.name}`,
      );

    expect(await route('added', owned)).toEqual(['StatefulSet/web']);
    expect(await route('modified', owned, owned)).toEqual(['StatefulSet/web']);
    expect(await route('deleted', owned)).toEqual(['StatefulSet/web']);
    expect(await route('modified', orphan, owned)).toEqual(['StatefulSet/web', 'DaemonSet/agent']);
    expect(await route('added', orphan)).toEqual(['StatefulSet/web', 'DaemonSet/agent']);
    expect(await route('deleted', orphan)).toEqual([]);
    expect(await route('modified', relabelled, orphan)).toEqual(['StatefulSet/web', 'DaemonSet/agent']);
    expect(await route('modified', orphan, orphan)).toEqual([]);
    expect(await route('added', impostor)).toEqual([]);
    expect(await route('added', foreign)).toEqual([]);
    // Cost: one GET for the parent, one list per candidate kind and namespace, whatever the number of events.
    expect(resolver.stats).toEqual({ gets: 1, lists: 2, invalidSelectors: 0 });
    expect(ds.metadata.uid).toBeTruthy();
  });
});
