// The history shell's branches (functions/history/sync.ts) on the in-memory fakes: created, unchanged, rollback,
// adoption, the coexistence refusal, truncation after a change, a parent missing, replaced or being deleted, the
// record's answer and a stale record, a lease held by another or about to expire, and the Warning a failure a
// retry will not mend leaves on the parent. The apiserver's and DynamoDB's own answers to the same cases are in
// test/integration/history*.test.ts.
import { syncHistory, type HistoryDeps } from '../../functions/history/sync.ts';
import { parentLabels, revisionHash, revisionName, type Json, type JsonObject } from '../../shared/history/data.ts';
import { parsePolicy, type RevisionPolicy } from '../../shared/history/policy.ts';
import { HASH_LABEL, sortRevisions, type ControllerRevision } from '../../shared/history/revisions.ts';
import type { KnownRevision } from '../../shared/history/record.ts';
import { gvr, KubeError, Resources, type ResolvedResource, type Stored } from '../../shared/kube/index.ts';
import { newControllerRef, type SyncKey } from '../../shared/ownership/index.ts';
import { statefulSet } from '../../local/fixtures.ts';
import { FakeKube } from '../fakes/kube.ts';
import { FakeLeases } from '../fakes/leases.ts';

const statefulSets: ResolvedResource = { group: 'apps', version: 'v1', resource: 'statefulsets', kind: 'StatefulSet', namespaced: true };
const revisions = Resources.controllerRevisions;
const events = gvr('events.k8s.io', 'v1', 'events');

const policyWith = (spec: Record<string, unknown> = {}): RevisionPolicy =>
  parsePolicy({
    metadata: { name: 'statefulsets', uid: 'p-1' },
    spec: {
      target: { apiVersion: 'apps/v1', kind: 'StatefulSet' },
      targetState: ['spec.template'],
      revisionHistoryLimit: 10,
      statusRevisionPaths: ['status.currentRevision', 'status.updateRevision'],
      ...spec,
    },
  });

function scene(policy = policyWith()) {
  const kube = new FakeKube();
  const leases = new FakeLeases();
  const [parent] = kube.seed(statefulSets, statefulSet('web', 'ns', 'app:1'));
  const key = (p: Stored = parent!): SyncKey => ({
    cluster: 'unit',
    group: 'apps',
    kind: 'StatefulSet',
    namespace: p.metadata.namespace,
    name: p.metadata.name,
    uid: p.metadata.uid,
  });
  const truncated: Array<{ revisions: string[]; quiet: boolean }> = [];
  const deps = (extra: Partial<HistoryDeps> = {}): HistoryDeps => ({ kube, state: { leases }, holder: 'unit', ...extra });
  /** A sync as a change to one of the parent's revisions asks for it: no event's object, the parent read. */
  const sync = (extra: Partial<HistoryDeps> = {}, p: Stored = parent!) =>
    syncHistory(deps(extra), policy, key(p), ['ControllerRevision/unit/x/1/added']);
  /** A sync as the parent's own event asks for it, with the event's object. */
  const ownEvent = (p: Stored, extra: Partial<HistoryDeps> = {}) =>
    syncHistory(deps(extra), policy, key(p), [`StatefulSet/unit/${p.metadata.uid}/${p.metadata.resourceVersion}/modified`], p);
  const setImage = (image: string) =>
    kube.touch(statefulSets, { name: 'web', namespace: 'ns' }, (o) => {
      (o as unknown as { spec: { template: unknown } }).spec.template = (
        statefulSet('web', 'ns', image).spec as { template: unknown }
      ).template;
    });
  const history = async () =>
    sortRevisions((await kube.list<ControllerRevision>(revisions, { namespace: 'ns' })).items).map((r) => ({
      name: r.metadata.name,
      number: r.revision,
      image: (r.data as { spec: { template: { spec: { containers: Array<{ image: string }> } } } }).spec.template.spec.containers[0]!.image,
    }));
  const eventReasons = async () => (await kube.list(events, { namespace: 'ns' })).items.map((e) => (e as { reason?: string }).reason);
  const truncate: HistoryDeps['truncate'] = async (revs: KnownRevision[], quiet: boolean) => {
    truncated.push({ revisions: revs.map((r) => r.metadata.name ?? ''), quiet });
    // Deletes all but the latest and one more, as a limit of 1 would.
    const oldest = [...revs].sort((a, b) => Number(a.revision) - Number(b.revision)).slice(0, -2);
    for (const r of oldest) await kube.delete(revisions, { name: r.metadata.name ?? '', namespace: 'ns' });
    return { deleted: oldest.map((r) => r.metadata.name ?? ''), gone: [] };
  };
  /** A revision another controller keeps of the parent: controlled by it, with `labels` and none of Outrigger's. */
  const othersRevision = (name: string, labels: Record<string, string>) =>
    kube.seed<ControllerRevision>(revisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name, namespace: 'ns', labels, ownerReferences: [newControllerRef(parent!)] },
      data: {},
      revision: 1,
    });
  return { kube, leases, parent: parent!, key, sync, ownEvent, setImage, history, eventReasons, truncate, truncated, othersRevision };
}

describe('the history shell on the fakes', () => {
  test('the first sync creates revision 1, owned by the parent and labelled for it, and says so in an Event', async () => {
    const s = scene();
    expect(await s.sync()).toMatchObject({ outcome: 'created', number: 1 });
    const [rev] = (await s.kube.list<ControllerRevision>(revisions, { namespace: 'ns' })).items;
    expect(rev!.metadata.ownerReferences).toEqual([newControllerRef(s.parent)]);
    expect(rev!.metadata.labels).toMatchObject(parentLabels(s.parent));
    expect(await s.eventReasons()).toEqual(['RevisionCreated']);
    // The record is left on the lease for the next sync.
    expect((await s.leases.get('unit', `history/${s.parent.metadata.uid}`))?.memo).toMatchObject({ number: 1 });
  });

  test('an unchanged target state writes nothing and records no Event', async () => {
    const s = scene();
    await s.sync();
    s.kube.stats.reset();
    expect(await s.sync()).toMatchObject({ outcome: 'unchanged', number: 1 });
    expect(Object.keys(s.kube.stats.byVerb).filter((v) => v !== 'get' && v !== 'list' && v !== 'list/metadata')).toEqual([]);
    expect(await s.eventReasons()).toEqual(['RevisionCreated']);
  });

  test('a change makes revision 2; going back is a rollback: revision 1 gets number 3, its data untouched', async () => {
    const s = scene();
    const first = await s.sync();
    s.setImage('app:2');
    expect(await s.sync()).toMatchObject({ outcome: 'created', number: 2 });
    s.setImage('app:1');
    expect(await s.sync()).toMatchObject({ outcome: 'rollback', number: 3, revision: (first as { revision: string }).revision });
    expect(await s.history()).toEqual([
      { name: expect.any(String), number: 2, image: 'app:2' },
      { name: (first as { revision: string }).revision, number: 3, image: 'app:1' },
    ]);
    expect(await s.eventReasons()).toEqual(['RevisionCreated', 'RevisionCreated', 'RolledBack']);
  });

  test("the parent's own event: its object stands in for a read, and the record then answers with no write", async () => {
    const s = scene();
    await s.ownEvent(s.parent);
    const labelled = s.kube.touch(statefulSets, { name: 'web', namespace: 'ns' }, (o) => {
      o.metadata.labels = { touched: 'yes' };
    });
    s.kube.stats.reset();
    expect(await s.ownEvent(labelled)).toMatchObject({ outcome: 'cached', number: 1 });
    expect(s.kube.stats.byVerb).toEqual({});
  });

  test("a stale record: the revision a rollback would reuse was deleted behind the record's back, so the sync lists and makes it again", async () => {
    const s = scene();
    const first = (await s.ownEvent(s.parent)) as { revision: string };
    const changed = s.setImage('app:2');
    await s.ownEvent(changed);
    await s.kube.delete(revisions, { name: first.revision, namespace: 'ns' });
    const back = s.setImage('app:1');
    expect(await s.ownEvent(back)).toMatchObject({ outcome: 'created', number: 3, revision: first.revision });
    expect((await s.history()).map((r) => r.image)).toEqual(['app:2', 'app:1']);
  });

  test('an orphan revision of this data carrying the parent label is adopted, not duplicated', async () => {
    const s = scene();
    const data = { spec: { template: (statefulSet('web', 'ns', 'app:1').spec as { template: Json }).template } } as JsonObject;
    const name = revisionName('web', revisionHash(data, 0));
    s.kube.seed<ControllerRevision>(revisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name, namespace: 'ns', labels: { ...parentLabels(s.parent), [HASH_LABEL]: revisionHash(data, 0) } },
      data,
      revision: 1,
    });
    expect(await s.sync()).toMatchObject({ outcome: 'unchanged', revision: name, number: 1 });
    expect(s.kube.peek(revisions, { name, namespace: 'ns' })!.metadata.ownerReferences).toEqual([newControllerRef(s.parent)]);
    expect(await s.history()).toHaveLength(1);
  });

  test("another controller's history of the parent: refused with no write, unless the policy coexists with it", async () => {
    for (const foreignHistory of [undefined, 'Coexist']) {
      const s = scene(policyWith(foreignHistory ? { foreignHistory } : {}));
      s.othersRevision('web-kcm', { app: 'web', [HASH_LABEL]: 'kcm' });
      const outcome = await s.sync();
      // Coexisting, Outrigger keeps its own history beside the other, numbered from 1; the other's is untouched.
      if (foreignHistory) {
        expect(outcome).toMatchObject({ outcome: 'created', number: 1 });
        expect(s.kube.peek(revisions, { name: 'web-kcm', namespace: 'ns' })!.metadata.labels).toEqual({ app: 'web', [HASH_LABEL]: 'kcm' });
      } else {
        expect(outcome).toMatchObject({ outcome: 'skipped', reason: expect.stringContaining('another controller keeps') });
        expect((await s.kube.list(revisions, { namespace: 'ns' })).items).toHaveLength(1);
      }
    }
  });

  test("another controller's revision that no selector of the parent's matches (LWS labels its own by name and key only) is its history all the same; coexisting, Outrigger's has a plain reference and its own labels", async () => {
    for (const foreignHistory of [undefined, 'Coexist']) {
      const s = scene(policyWith(foreignHistory ? { foreignHistory } : {}));
      s.othersRevision('web-own-1', { 'example.com/name': 'web' });
      const outcome = await s.sync();
      if (!foreignHistory) {
        expect(outcome).toMatchObject({ outcome: 'skipped', reason: expect.stringContaining('(revision web-own-1)') });
        continue;
      }
      expect(outcome).toMatchObject({ outcome: 'created', number: 1 });
      const ours = (await s.kube.list<ControllerRevision>(revisions, { namespace: 'ns' })).items.find(
        (r) => r.metadata.name !== 'web-own-1',
      )!;
      expect(ours.metadata.ownerReferences).toEqual([{ ...newControllerRef(s.parent), controller: false }]);
      expect(Object.keys(ours.metadata.labels ?? {}).sort()).toEqual([HASH_LABEL, ...Object.keys(parentLabels(s.parent))].sort());
      // The next sync counts it as the parent's: no adoption, no second revision.
      expect(await s.sync()).toMatchObject({ outcome: 'unchanged', number: 1 });
      expect(s.kube.peek(revisions, { name: ours.metadata.name!, namespace: 'ns' })!.metadata.resourceVersion).toBe(
        ours.metadata.resourceVersion,
      );
    }
  });

  test('a change beyond the limit truncates under the lease, and one Event says both; the record keeps what is left', async () => {
    const s = scene(policyWith({ revisionHistoryLimit: 1 }));
    await s.sync({ truncate: s.truncate });
    s.setImage('app:2');
    // The latest and one more are within the limit: no truncation yet.
    expect(await s.sync({ truncate: s.truncate })).toEqual({ outcome: 'created', number: 2, revision: expect.any(String) });
    s.setImage('app:3');
    expect(await s.sync({ truncate: s.truncate })).toMatchObject({ outcome: 'created', number: 3, truncate: true });
    expect(s.truncated).toEqual([{ revisions: expect.any(Array), quiet: true }]);
    expect(s.truncated[0]!.revisions).toHaveLength(3);
    expect((await s.history()).map((r) => r.number)).toEqual([2, 3]);
    const notes = (await s.kube.list(events, { namespace: 'ns' })).items.map((e) => (e as { note?: string }).note);
    expect(notes[2]).toMatch(/^Created revision 3: .*; deleted 1 revision\(s\) beyond the history limit/);
    const left = await s.leases.get('unit', `history/${s.parent.metadata.uid}`, { parts: true });
    expect(Object.keys(left?.parts ?? {})).toHaveLength(2);
  });

  test('a parent gone, replaced or being deleted is skipped, with no lease taken and no write', async () => {
    const gone = scene();
    await gone.kube.delete(statefulSets, { name: 'web', namespace: 'ns' });
    expect(await gone.sync()).toMatchObject({ outcome: 'skipped', reason: expect.stringContaining('no longer exists') });

    const replaced = scene();
    const stale = replaced.parent;
    await replaced.kube.delete(statefulSets, { name: 'web', namespace: 'ns' });
    replaced.kube.seed(statefulSets, statefulSet('web', 'ns', 'app:1'));
    expect(await replaced.sync({}, stale)).toMatchObject({ outcome: 'skipped', reason: expect.stringContaining('was replaced') });

    const deleting = scene();
    deleting.kube.touch(statefulSets, { name: 'web', namespace: 'ns' }, (o) => {
      // A finalizer holds the deletion, as a foreground deletion's would.
      o.metadata.finalizers = ['example.com/hold'];
      o.metadata.deletionTimestamp = new Date().toISOString();
    });
    expect(await deleting.sync()).toMatchObject({ outcome: 'skipped', reason: 'the parent is being deleted' });

    for (const s of [gone, replaced, deleting]) {
      expect(s.leases.calls.acquire).toBeUndefined();
      expect(await s.history()).toEqual([]);
    }
  });

  test('a lease another sync holds: the sync fails to be retried, having written nothing', async () => {
    const s = scene();
    s.leases.put({ cluster: 'unit', name: `history/${s.parent.metadata.uid}`, holder: 'other', term: 1, expiresAt: Date.now() + 60_000 });
    await expect(s.sync()).rejects.toThrow(/held its lease/);
    expect(await s.history()).toEqual([]);
  });

  test('a lease about to expire: no revision is written, and the lease is left with no record', async () => {
    const s = scene();
    let now = Date.now();
    const leases = new FakeLeases(() => now);
    // The lease is taken, then its clock jumps past the margin while the revisions are listed, before the write.
    s.kube.beforeRequest = (verb, r) => {
      if (verb === 'list' && r.resource === 'controllerrevisions') now += 80_000;
    };
    await expect(syncHistory({ kube: s.kube, state: { leases }, holder: 'unit' }, policyWith(), s.key(), ['x'])).rejects.toThrow(
      /about to expire/,
    );
    expect(await s.history()).toEqual([]);
    expect((await leases.get('unit', `history/${s.parent.metadata.uid}`))?.memo).toBeUndefined();
  });

  test('a refusal a retry will not mend (Forbidden) shows on the parent as a SyncFailed Warning, and the sync fails', async () => {
    const s = scene();
    s.kube.beforeRequest = (verb, r) => {
      if (verb === 'create' && r.resource === 'controllerrevisions')
        throw new KubeError('Forbidden', '403 Forbidden: controllerrevisions is forbidden', { status: 403 });
    };
    await expect(s.sync()).rejects.toThrow(/forbidden/);
    const [warning] = (await s.kube.list(events, { namespace: 'ns' })).items as Array<{ type?: string; reason?: string }>;
    expect(warning).toMatchObject({ type: 'Warning', reason: 'SyncFailed' });
  });

  test("a policy naming a ServiceAccount reads the parent as that account; revisions and Events are written as Outrigger's own", async () => {
    const s = scene(policyWith({ serviceAccount: { namespace: 'ns', name: 'reader' } }));
    const seen: string[] = [];
    s.kube.beforeRequest = (verb, r, _ref, as) => void seen.push(`${verb} ${r.resource} as ${as ?? 'outrigger'}`);
    await s.sync();
    expect(seen).toContain('get statefulsets as system:serviceaccount:ns:reader');
    expect(seen.filter((x) => x.includes('controllerrevisions') || x.includes('events')).every((x) => x.endsWith('as outrigger'))).toBe(
      true,
    );
  });

  test('a cluster-scoped target cannot have a history: the sync says so', async () => {
    const s = scene(policyWith({ target: { apiVersion: 'v1', kind: 'Namespace' } }));
    await expect(s.sync()).rejects.toThrow(/Namespace is cluster-scoped/);
  });
});
