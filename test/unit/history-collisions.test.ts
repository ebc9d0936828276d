// Revision creation's collision loop on the in-memory fake (test/fakes/kube.ts): a name held by other data moves
// to the next collision count, a name held by this sync's own earlier write is taken as it is (labels and number
// mended, never its data), a name freed in between is tried again, and a run of names all held by other data
// gives up naming the parent. The apiserver's answers to the same cases are in test/integration/history.test.ts.
import { CoexistSelectorError, createRevision, MAX_COLLISIONS, RevisionNamesTakenError } from '../../shared/history/create-revision.ts';
import { kubectlLabels } from '../../functions/history/revisions.ts';
import { parsePolicy, type RevisionPolicy } from '../../shared/history/policy.ts';
import { revisionHash, revisionName, type JsonObject } from '../../shared/history/data.ts';
import type { ControllerRevision } from '../../shared/history/revisions.ts';
import { Resources, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import { newControllerRef } from '../../shared/ownership/index.ts';
import { FakeKube } from '../fakes/kube.ts';

const statefulSets: ResolvedResource = { group: 'apps', version: 'v1', resource: 'statefulsets', kind: 'StatefulSet', namespaced: true };
const revisions = Resources.controllerRevisions;
const data: JsonObject = { spec: { template: { spec: { containers: [{ name: 'c', image: 'app:1' }] } } } };

function scene() {
  const kube = new FakeKube();
  const [stored] = kube.seed<KubeObject>(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: 'ns' },
  });
  const parent = { ...stored!, apiVersion: 'apps/v1', kind: 'StatefulSet' };
  const nameAt = (count: number) => revisionName('web', revisionHash(data, count));
  const squat = (count: number, squatted: JsonObject = { other: count }, owner: KubeObject = parent) =>
    kube.seed<ControllerRevision>(revisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: nameAt(count), namespace: 'ns', ownerReferences: [newControllerRef(owner)] },
      data: squatted,
      revision: 1,
    });
  return { kube, parent, nameAt, squat };
}

describe("createRevision's collision loop", () => {
  test('a free name: one create, at collision count 0', async () => {
    const { kube, parent, nameAt } = scene();
    const r = await createRevision(kube, statefulSets, parent, { data, number: 1 });
    expect(r.metadata.name).toBe(nameAt(0));
    expect(kube.stats.byVerb).toEqual({ create: 1 });
  });

  test('names held by other data move on to the next count; the revision is made at the first free one', async () => {
    const { kube, parent, nameAt, squat } = scene();
    squat(0);
    squat(1);
    const r = await createRevision(kube, statefulSets, parent, { data, number: 3 });
    expect(r.metadata.name).toBe(nameAt(2));
    expect(r.data).toEqual(data);
    // The squatters are untouched.
    expect(kube.peek(revisions, { name: nameAt(0), namespace: 'ns' })!.data).toEqual({ other: 0 });
  });

  test("the name held by this sync's own earlier write (its answer lost): taken as it is, its number raised, its data never written", async () => {
    const { kube, parent, nameAt, squat } = scene();
    const [earlier] = squat(0, data);
    const r = await createRevision(kube, statefulSets, parent, { data, number: 4 });
    expect(r.metadata).toMatchObject({ name: nameAt(0), uid: earlier!.metadata.uid });
    expect(r.revision).toBe(4);
    expect(kube.stats.byVerb).toEqual({ create: 1, get: 1, 'patch/merge': 1 });
  });

  test('the same data under another parent is a collision, not ours', async () => {
    const { kube, parent, nameAt, squat } = scene();
    const [other] = kube.seed<KubeObject>(statefulSets, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'web2', namespace: 'ns' },
    });
    squat(0, data, { ...other!, apiVersion: 'apps/v1', kind: 'StatefulSet' });
    expect((await createRevision(kube, statefulSets, parent, { data, number: 1 })).metadata.name).toBe(nameAt(1));
  });

  test('a name freed between the create that collided and the read: the same name is tried again', async () => {
    const { kube, parent, nameAt, squat } = scene();
    squat(0);
    kube.beforeRequest = async (verb, _r, ref) => {
      if (verb === 'get' && ref?.name === nameAt(0)) {
        kube.beforeRequest = undefined;
        await kube.delete(revisions, { name: nameAt(0), namespace: 'ns' });
      }
    };
    expect((await createRevision(kube, statefulSets, parent, { data, number: 1 })).metadata.name).toBe(nameAt(0));
  });

  test('every name a revision could take held by other data: gives up, naming the parent, after MAX_COLLISIONS creates', async () => {
    const { kube, parent, squat } = scene();
    for (let i = 0; i < MAX_COLLISIONS; i += 1) squat(i);
    await expect(createRevision(kube, statefulSets, parent, { data, number: 1 })).rejects.toThrow(RevisionNamesTakenError);
    await expect(createRevision(kube, statefulSets, parent, { data, number: 1 })).rejects.toThrow(
      /StatefulSet ns\/web: 10 revision names in a row/,
    );
    expect(kube.stats.byVerb.create).toBe(2 * MAX_COLLISIONS);
  });
});

describe("beside another controller's history (reference: owner, docs/controllers/history.md#coexistence)", () => {
  test("the revision is owned by a plain ownerReference and carries only the labels it is given and Outrigger's", async () => {
    const { kube, parent } = scene();
    const withSelector = { ...parent, spec: { selector: { matchLabels: { app: 'web' } } } };
    const r = await createRevision(kube, statefulSets, withSelector, { data, number: 1, reference: 'owner' });
    expect(r.metadata.ownerReferences).toEqual([{ ...newControllerRef(parent), controller: false }]);
    expect(Object.keys(r.metadata.labels ?? {}).sort()).toEqual([
      'controller.kubernetes.io/hash',
      'outrigger.dev/parent',
      'outrigger.dev/parent-kind',
    ]);
  });

  test("nothing is written where the parent's own selector matches the revision's labels", async () => {
    const { kube, parent } = scene();
    const wide = { ...parent, spec: { selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['cache'] }] } } };
    await expect(createRevision(kube, statefulSets, wide, { data, number: 1, reference: 'owner' })).rejects.toThrow(CoexistSelectorError);
    await expect(createRevision(kube, statefulSets, wide, { data, number: 1, reference: 'owner' })).rejects.toThrow(
      /StatefulSet ns\/web: its spec.selector matches the labels of Outrigger's revisions/,
    );
    expect((await kube.list(revisions, { namespace: 'ns' })).items).toEqual([]);
    // By ControllerRef (no other controller's history beside it), the same parent gets its revision.
    expect((await createRevision(kube, statefulSets, wide, { data, number: 1 })).metadata.ownerReferences?.[0]?.controller).toBe(true);
  });
});

describe("kubectl's labels", () => {
  const policy = (spec: Partial<RevisionPolicy['spec']>): RevisionPolicy =>
    parsePolicy({
      apiVersion: 'outrigger.dev/v1alpha1',
      kind: 'RevisionPolicy',
      metadata: { name: 'p' },
      spec: { target: { apiVersion: 'apps/v1', kind: 'StatefulSet' }, targetState: ['spec.template'], ...spec },
    });
  const parent: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web' },
    spec: { selector: { matchLabels: { app: 'web' } } },
  };
  const templated: JsonObject = { spec: { template: { metadata: { labels: { app: 'web', tier: 'x' } }, $patch: 'replace' } } };

  test("are the template's by default, and none beside another controller's history or in revisionKey mode", () => {
    expect(kubectlLabels(policy({}), parent, templated)).toEqual({ app: 'web', tier: 'x' });
    expect(kubectlLabels(policy({ foreignHistory: 'Coexist' }), parent, templated)).toEqual({});
    expect(
      kubectlLabels(policy({ mode: 'revisionKey', revisionKey: { label: 'k', rolloutCompleteCondition: 'Available' } }), parent, templated),
    ).toEqual({});
  });
});
