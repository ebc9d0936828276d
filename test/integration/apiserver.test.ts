// The apiserver facts Outrigger is built on, checked against the real kube-apiserver as the `outrigger`
// identity (the project's RBAC role), never against a fake.
import { KubeError, Resources, getResourceList, type KubeObject } from '../../shared/kube/index.ts';
import { adminClient, createNamespace, outriggerClient } from '../testbed/index.ts';

function revision(namespace: string, name: string, extra: Partial<KubeObject['metadata']> = {}): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: { name, namespace, labels: { app: 'demo' }, ...extra },
    data: { spec: { template: { spec: { containers: [{ name: 'c', image: 'nginx:1' }] } } } },
    revision: 1,
  };
}

function owner(name: string, uid: string) {
  return { apiVersion: 'apps/v1', kind: 'StatefulSet', name, uid, controller: true, blockOwnerDeletion: false };
}

describe('the real kube-apiserver, as the outrigger identity', () => {
  const kube = outriggerClient();
  let ns: string;
  beforeAll(async () => {
    ns = await createNamespace('apiserver');
  });

  test('creates a ControllerRevision', async () => {
    const created = await kube.create(Resources.controllerRevisions, revision(ns, 'web-1'));
    expect(created.metadata.uid).toBeTruthy();
    const read = await kube.get(Resources.controllerRevisions, { name: 'web-1', namespace: ns });
    expect(read.data).toEqual(revision(ns, 'web-1').data);
  });

  test("rejects a change to a ControllerRevision's data as Invalid", async () => {
    await kube.create(Resources.controllerRevisions, revision(ns, 'web-2'));
    const change = { data: { spec: { template: { spec: { containers: [{ name: 'c', image: 'nginx:2' }] } } } } };
    const err = await kube.patch(Resources.controllerRevisions, { name: 'web-2', namespace: ns }, change, 'merge').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeError);
    expect((err as KubeError).kind).toBe('Invalid');
    expect((err as KubeError).message).toMatch(/immutable/);
  });

  test('rejects an object with two controller ownerReferences as Invalid', async () => {
    const two = revision(ns, 'web-3', {
      ownerReferences: [owner('a', '00000000-0000-0000-0000-00000000000a'), owner('b', '00000000-0000-0000-0000-00000000000b')],
    });
    const err = await kube.create(Resources.controllerRevisions, two).catch((e: unknown) => e);
    expect((err as KubeError).kind).toBe('Invalid');
    expect((err as KubeError).message).toMatch(/controller/i);
  });

  test('answers a stale resourceVersion with Conflict', async () => {
    const created = await kube.create(Resources.controllerRevisions, revision(ns, 'web-4'));
    await kube.patch(Resources.controllerRevisions, { name: 'web-4', namespace: ns }, { metadata: { labels: { step: '1' } } }, 'merge');
    const stale = { metadata: { resourceVersion: created.metadata.resourceVersion, labels: { step: '2' } } };
    const err = await kube.patch(Resources.controllerRevisions, { name: 'web-4', namespace: ns }, stale, 'merge').catch((e: unknown) => e);
    expect((err as KubeError).kind).toBe('Conflict');
  });

  test('maps NotFound and AlreadyExists', async () => {
    await expect(kube.get(Resources.controllerRevisions, { name: 'absent', namespace: ns })).rejects.toMatchObject({
      kind: 'NotFound',
      status: 404,
    });
    await kube.create(Resources.controllerRevisions, revision(ns, 'web-5'));
    await expect(kube.create(Resources.controllerRevisions, revision(ns, 'web-5'))).rejects.toMatchObject({
      kind: 'AlreadyExists',
      status: 409,
    });
  });

  test('is held to its RBAC role: no PUT on revisions, no namespaces', async () => {
    const read = await kube.get(Resources.controllerRevisions, { name: 'web-1', namespace: ns });
    await expect(kube.replace(Resources.controllerRevisions, read)).rejects.toMatchObject({ kind: 'Forbidden' });
    await expect(kube.list(Resources.namespaces)).rejects.toMatchObject({ kind: 'Forbidden' });
  });

  test('filters by label selector on the server', async () => {
    await kube.create(Resources.controllerRevisions, revision(ns, 'other-1', { labels: { app: 'other' } }));
    const list = await kube.list(Resources.controllerRevisions, { namespace: ns, labelSelector: 'app=other' });
    expect(list.items.map((i) => i.metadata.name)).toEqual(['other-1']);
  });

  test('serves storageVersionHash in per-group discovery', async () => {
    const apps = await getResourceList(adminClient(), 'apps', 'v1');
    const revisions = apps.resources.find((r) => r.name === 'controllerrevisions');
    expect(revisions?.storageVersionHash).toMatch(/^[A-Za-z0-9+/]{11}=$/);
    expect(apps.resources.find((r) => r.name === 'statefulsets/status')?.storageVersionHash).toBeUndefined();
  });

  test('streams watch events', async () => {
    const controller = new AbortController();
    const seen: string[] = [];
    const list = await kube.list(Resources.controllerRevisions, { namespace: ns });
    const watching = kube.watch(
      Resources.controllerRevisions,
      { namespace: ns, resourceVersion: list.metadata.resourceVersion },
      (e) => {
        seen.push(`${e.type} ${e.object.metadata.name}`);
        if (seen.length === 2) controller.abort();
      },
      controller.signal,
    );
    await kube.create(Resources.controllerRevisions, revision(ns, 'watched'));
    await kube.delete(Resources.controllerRevisions, { name: 'watched', namespace: ns });
    await watching;
    expect(seen).toEqual(['ADDED watched', 'DELETED watched']);
  });

  test('deletes with a uid precondition only when the uid matches', async () => {
    const created = await kube.create(Resources.controllerRevisions, revision(ns, 'web-6'));
    await expect(
      kube.delete(
        Resources.controllerRevisions,
        { name: 'web-6', namespace: ns },
        { preconditions: { uid: '00000000-0000-0000-0000-000000000000' } },
      ),
    ).rejects.toMatchObject({ kind: 'Conflict' });
    await kube.delete(Resources.controllerRevisions, { name: 'web-6', namespace: ns }, { preconditions: { uid: created.metadata.uid! } });
    await expect(kube.get(Resources.controllerRevisions, { name: 'web-6', namespace: ns })).rejects.toMatchObject({ kind: 'NotFound' });
  });
});
