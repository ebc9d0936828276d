// The claim's conflict loop on the in-memory fake: a Conflict on adoption or release is retried against the
// object as it is now, decided again by the same rules, and given up after three attempts. The apiserver's own
// answers to the same races are in test/integration/ownership.test.ts.
import { isKubeError, Resources, type KubeObject, type Stored } from '../../shared/kube/index.ts';
import { claim, compileSelector, controllerOf, newControllerRef, newOwnerRef, type ClaimContext } from '../../shared/ownership/index.ts';
import { FakeKube } from '../fakes/kube.ts';

const statefulSets = { group: 'apps', version: 'v1', resource: 'statefulsets' };
const revisions = Resources.controllerRevisions;
const selector = compileSelector({ matchLabels: { app: 'web' } });

function scene() {
  const kube = new FakeKube();
  const ctx: ClaimContext = { kube, parentResource: statefulSets, childResource: revisions };
  const [parent] = kube.seed<KubeObject>(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: 'ns' },
  });
  const [other] = kube.seed<KubeObject>(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'other', namespace: 'ns' },
  });
  const withKind = (p: Stored) => ({ ...p, apiVersion: 'apps/v1', kind: 'StatefulSet' });
  const child = (name: string, labels: Record<string, string>, owner?: Stored) =>
    kube.seed<KubeObject>(revisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name, namespace: 'ns', labels, ...(owner ? { ownerReferences: [newControllerRef(withKind(owner))] } : {}) },
    })[0]!;
  return { kube, ctx, parent: withKind(parent!), other: withKind(other!), child };
}

describe('claim: the conflict loop', () => {
  test('an adoption that meets a Conflict re-reads the child and adopts it as it is now', async () => {
    const { kube, ctx, parent, child } = scene();
    const stale = child('web-1', { app: 'web' });
    kube.touch(revisions, { name: 'web-1', namespace: 'ns' }, (o) => (o.metadata.annotations = { note: 'changed meanwhile' }));
    const result = await claim(ctx, parent, selector, [stale]);
    expect(result.adopted.map((o) => o.metadata.name)).toEqual(['web-1']);
    expect(result.lost).toEqual([]);
    const now = kube.peek(revisions, { name: 'web-1', namespace: 'ns' })!;
    expect(controllerOf(now)?.uid).toBe(parent.metadata.uid);
    expect(now.metadata.annotations).toEqual({ note: 'changed meanwhile' });
    expect(kube.stats.byVerb['patch/merge']).toBe(2);
  });

  test('an adoption another controller won meanwhile is lost, and its ControllerRef is left as it is', async () => {
    const { kube, ctx, parent, other, child } = scene();
    const stale = child('web-1', { app: 'web' });
    kube.touch(revisions, { name: 'web-1', namespace: 'ns' }, (o) => (o.metadata.ownerReferences = [newControllerRef(other)]));
    const result = await claim(ctx, parent, selector, [stale]);
    expect(result.adopted).toEqual([]);
    expect(result.lost.map((o) => o.metadata.name)).toEqual(['web-1']);
    expect(controllerOf(kube.peek(revisions, { name: 'web-1', namespace: 'ns' })!)?.uid).toBe(other.metadata.uid);
    expect(kube.stats.byVerb['patch/merge']).toBe(1);
  });

  test('a release that meets a Conflict re-reads the child and releases it', async () => {
    const { kube, ctx, parent, child } = scene();
    const stale = child('web-1', { app: 'db' }, parent);
    kube.touch(revisions, { name: 'web-1', namespace: 'ns' }, (o) => (o.metadata.labels = { app: 'cache' }));
    const result = await claim(ctx, parent, selector, [stale]);
    expect(result.released.map((o) => o.metadata.name)).toEqual(['web-1']);
    const now = kube.peek(revisions, { name: 'web-1', namespace: 'ns' })!;
    expect(controllerOf(now)).toBeUndefined();
    expect(now.metadata.labels).toEqual({ app: 'cache' });
    expect(kube.stats.byVerb['patch/merge']).toBe(2);
  });

  test('a child that matches again by the time of the re-read is kept, not released', async () => {
    const { kube, ctx, parent, child } = scene();
    const stale = child('web-1', { app: 'db' }, parent);
    kube.touch(revisions, { name: 'web-1', namespace: 'ns' }, (o) => (o.metadata.labels = { app: 'web' }));
    const result = await claim(ctx, parent, selector, [stale]);
    expect(result.released).toEqual([]);
    expect(result.owned.map((o) => o.metadata.name)).toEqual(['web-1']);
    expect(controllerOf(kube.peek(revisions, { name: 'web-1', namespace: 'ns' })!)?.uid).toBe(parent.metadata.uid);
  });

  test('a child recreated under the same name is not captured: the uid in the patch makes it Invalid, and it is lost', async () => {
    const { kube, ctx, parent, child } = scene();
    const stale = child('web-1', { app: 'web' });
    await kube.delete(revisions, { name: 'web-1', namespace: 'ns' });
    child('web-1', { app: 'web' });
    const result = await claim(ctx, parent, selector, [stale]);
    expect(result.lost.map((o) => o.metadata.name)).toEqual(['web-1']);
    expect(controllerOf(kube.peek(revisions, { name: 'web-1', namespace: 'ns' })!)).toBeUndefined();
  });

  test('a child changed before every attempt is given up after three patches, with the Conflict', async () => {
    const { kube, ctx, parent, child } = scene();
    const stale = child('web-1', { app: 'web' });
    let n = 0;
    kube.beforeRequest = (verb) => {
      if (verb === 'patch/merge')
        kube.touch(revisions, { name: 'web-1', namespace: 'ns' }, (o) => (o.metadata.annotations = { n: String((n += 1)) }));
    };
    const failed = await claim(ctx, parent, selector, [stale]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isKubeError(failed, 'Conflict')).toBe(true);
    expect(kube.stats.byVerb['patch/merge']).toBe(3);
    expect(controllerOf(kube.peek(revisions, { name: 'web-1', namespace: 'ns' })!)).toBeUndefined();
  });
});

describe("claim by a plain ownerReference (reference: 'owner', docs/controllers/history.md#coexistence)", () => {
  test('an orphan is adopted with a plain reference; a child with one is owned as it is; one with a ControllerRef to the parent stays so', async () => {
    const { kube, ctx, parent, child } = scene();
    const orphan = child('web-1', { app: 'web' });
    const plain = kube.seed<KubeObject>(revisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: 'web-2', namespace: 'ns', labels: { app: 'web' }, ownerReferences: [newOwnerRef(parent)] },
    })[0]!;
    const controlled = child('web-3', { app: 'web' }, parent);
    const result = await claim(ctx, parent, selector, [orphan, plain, controlled], { reference: 'owner' });
    expect(result.adopted.map((o) => o.metadata.name)).toEqual(['web-1']);
    expect(result.owned.map((o) => o.metadata.name).sort()).toEqual(['web-1', 'web-2', 'web-3']);
    expect(kube.peek(revisions, { name: 'web-1', namespace: 'ns' })!.metadata.ownerReferences).toEqual([newOwnerRef(parent)]);
    expect(kube.stats.byVerb['patch/merge']).toBe(1);
  });

  test('by ControllerRef, a child with a plain reference to the parent is adopted: its plain reference is replaced, not repeated', async () => {
    const { kube, ctx, parent } = scene();
    const plain = kube.seed<KubeObject>(revisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: 'web-2', namespace: 'ns', labels: { app: 'web' }, ownerReferences: [newOwnerRef(parent)] },
    })[0]!;
    expect((await claim(ctx, parent, selector, [plain])).adopted).toHaveLength(1);
    expect(kube.peek(revisions, { name: 'web-2', namespace: 'ns' })!.metadata.ownerReferences).toEqual([newControllerRef(parent)]);
  });
});
