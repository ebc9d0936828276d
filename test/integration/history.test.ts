// Controller history against the real apiserver (as the outrigger identity) and DynamoDB Local.
/* eslint-disable max-lines -- the history scenarios share the StatefulSet policy loaded once in beforeAll and the createSts, setImage, keyOf and sync helpers below */
import { forgetPolicies, listPolicies, policyFor, revisionPolicies } from '../../functions/history/policies.ts';
import { reportPolicy } from '../../functions/history/report.ts';
import type { SyncOutcome } from '../../functions/history/outcome.ts';
import { MAX_COLLISIONS } from '../../shared/history/create-revision.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { truncateHistory, truncateSynced } from '../../functions/history/truncate.ts';
import { events } from '../../shared/events/index.ts';
import { EVENT_BURST, EVENT_REFILL_MS } from '../../shared/events/allowance.ts';
import type { KnownRevision } from '../../shared/history/record.ts';
import { parentLabels, revisionHash, revisionName, type JsonObject } from '../../shared/history/data.ts';
import { semanticallyEqual } from '../../shared/json.ts';
import type { RevisionPolicy } from '../../shared/history/policy.ts';
import { HASH_LABEL, PARENT_LABEL, sortRevisions, type ControllerRevision } from '../../shared/history/revisions.ts';
import { Resources, connect, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf, newControllerRef, type SyncKey } from '../../shared/ownership/index.ts';
import { startFaultProxy } from '../testbed/fault-proxy.ts';
import { kubectl } from '../testbed/kubectl.ts';
import { DAEMONSET_POLICY, statefulSetPolicy } from '../testbed/policies.ts';
import {
  adminClient,
  createNamespace,
  eventually,
  outriggerClient,
  startTestRuntime,
  testState,
  testbed,
  uniqueName,
} from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant } from '../testbed/rbac.ts';
import { forgetDiscovery } from '../../shared/kube/index.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');

let policy: RevisionPolicy;
const kube = outriggerClient();
const state = testState();

beforeAll(async () => {
  policy = await statefulSetPolicy(kube);
});

function template(image: string, extra: Record<string, unknown> = {}) {
  return { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image, ...extra }] } };
}

async function createSts(
  ns: string,
  name = 'web',
  image = 'registry.example/app:1',
  annotations: Record<string, string> = {},
): Promise<KubeObject> {
  return adminClient().create(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, namespace: ns, annotations },
    spec: { serviceName: name, replicas: 1, selector: { matchLabels: { app: 'web' } }, template: template(image) },
  });
}

async function setImage(ns: string, name: string, image: string): Promise<KubeObject> {
  return adminClient().patch(statefulSets, { name, namespace: ns }, { spec: { template: template(image) } }, 'merge');
}

function keyOf(obj: KubeObject, cluster = 'it'): SyncKey {
  return {
    cluster,
    group: 'apps',
    kind: 'StatefulSet',
    namespace: obj.metadata.namespace,
    name: obj.metadata.name!,
    uid: obj.metadata.uid!,
  };
}

const parentCause = (obj: KubeObject) => [`StatefulSet/it/${obj.metadata.uid}/${obj.metadata.resourceVersion}/modified`];
const childCause = ['ControllerRevision/it/some-revision/1/added'];

async function sync(obj: KubeObject, causes = childCause, client: KubeClient = kube, observed?: KubeObject): Promise<SyncOutcome> {
  return syncHistory({ kube: client, state, holder: uniqueName('h') }, policy, keyOf(obj), causes, observed);
}

/** A sync request as the router makes it from the parent's own event: the cause, and the event's object. */
const ownEvent = (obj: KubeObject, client: KubeClient = kube) => sync(obj, parentCause(obj), client, obj);

/** History's deps with truncation right after the sync, from the parent the sync decided on, as the handler wires it. */
const withInlineTruncation = (client: KubeClient, key: SyncKey) => ({
  kube: client,
  state,
  holder: uniqueName('h'),
  truncate: async (revisions: KnownRevision[], quiet: boolean, seen: { generatedVersion?: string | undefined }, parent: KubeObject) =>
    truncateSynced({ kube: client }, policy, key, revisions, { quiet, seen, parent }).then((t) => ({
      deleted: t.deleted,
      gone: t.gone ?? [],
    })),
});

async function history(ns: string, name = 'web'): Promise<ControllerRevision[]> {
  const list = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
    namespace: ns,
    labelSelector: `${PARENT_LABEL}=${name}`,
  });
  return sortRevisions(list.items);
}

const summary = (revs: ControllerRevision[]) =>
  revs.map(
    (r) =>
      `${r.revision}:${(r.data as { spec: { template: { spec: { containers: Array<{ image: string }> } } } }).spec.template.spec.containers[0]!.image}`,
  );

describe('revision creation', () => {
  test('the first sync records revision 1: data replaces each path, named <parent>-<hash>, owned, selectable', async () => {
    const ns = await createNamespace('hist');
    const sts = await createSts(ns, 'web', 'registry.example/app:1', { 'kubernetes.io/change-cause': 'first deploy' });
    const out = await sync(sts);
    expect(out).toMatchObject({ outcome: 'created', number: 1 });
    const [rev] = await history(ns);
    const data = rev!.data as { spec: { template: Record<string, unknown> } };
    expect(data.spec.template.$patch).toBe('replace');
    expect(Object.keys(data)).toEqual(['spec']);
    expect(Object.keys(data.spec)).toEqual(['template']);
    const hash = rev!.metadata.labels![HASH_LABEL]!;
    expect(rev!.metadata.name).toBe(`web-${hash}`);
    expect(rev!.metadata.name).toBe(revisionName('web', revisionHash(rev!.data!, 0)));
    expect(rev!.metadata.labels).toMatchObject({ app: 'web', [PARENT_LABEL]: 'web' });
    expect(rev!.metadata.annotations?.['kubernetes.io/change-cause']).toBe('first deploy');
    expect(controllerOf(rev!)).toEqual({ ...newControllerRef(sts), blockOwnerDeletion: true, controller: true });
  });

  test('an unchanged target state costs one apiserver read and no write; scaling is not a revision', async () => {
    const ns = await createNamespace('hist');
    await createSts(ns);
    let sts = await kube.get(statefulSets, { name: 'web', namespace: ns });
    await sync(sts);
    sts = await adminClient().patch(statefulSets, { name: 'web', namespace: ns }, { spec: { replicas: 5 } }, 'merge');
    // A warm Lambda has resolved the target kind once already (discovery is cached per client).
    const counted = outriggerClient();
    await sync(sts, parentCause(sts), counted);
    counted.stats.reset();
    expect(await sync(sts, parentCause(sts), counted)).toMatchObject({ outcome: 'cached', number: 1 });
    expect(counted.stats.byVerb).toEqual({ get: 1 });
    const full = outriggerClient();
    expect(await sync(sts, childCause, full)).toMatchObject({ outcome: 'unchanged', number: 1 });
    expect(Object.keys(full.stats.byVerb).filter((v) => !['get', 'list', 'discovery'].includes(v))).toEqual([]);
    expect(await history(ns)).toHaveLength(1);
  });

  test("with its event's object, a label, annotation, status or replica change costs no apiserver request (docs/design/history-sync.md#cost)", async () => {
    const ns = await createNamespace('hist');
    let sts = await createSts(ns);
    await ownEvent(sts);
    const counted = outriggerClient();
    // A warm Lambda has resolved the target kind once already (discovery is cached per client).
    await ownEvent(sts, counted);
    const reads = { dynamodb: 0 };
    const leases = Object.create(state.leases) as typeof state.leases;
    leases.get = async (...a) => ((reads.dynamodb += 1), state.leases.get(...a));
    const countingState = { ...state, leases };
    const noop = (o: KubeObject) =>
      syncHistory({ kube: counted, state: countingState, holder: uniqueName('h') }, policy, keyOf(o), parentCause(o), o);
    counted.stats.reset();
    sts = await adminClient().patch(statefulSets, { name: 'web', namespace: ns }, { spec: { replicas: 5 } }, 'merge');
    expect(await noop(sts)).toMatchObject({ outcome: 'cached', number: 1 });
    sts = await adminClient().patch(
      statefulSets,
      { name: 'web', namespace: ns },
      { metadata: { labels: { tier: 'x' }, annotations: { note: 'y' } } },
      'merge',
    );
    expect(await noop(sts)).toMatchObject({ outcome: 'cached', number: 1 });
    sts = await adminClient().patch(
      statefulSets,
      { name: 'web', namespace: ns, subresource: 'status' },
      { status: { replicas: 0, observedGeneration: 9 } },
      'merge',
    );
    expect(await noop(sts)).toMatchObject({ outcome: 'cached', number: 1 });
    expect(counted.stats.total).toBe(0);
    expect(reads.dynamodb).toBe(3);
    // A change with its object: one read of the parent, which the revision is made from (the object is only a
    // trigger: docs/operations/security.md#events-are-triggers-not-state), and no list (the record holds the revisions).
    sts = await setImage(ns, 'web', 'registry.example/app:2');
    counted.stats.reset();
    expect(await noop(sts)).toMatchObject({ outcome: 'created', number: 2 });
    expect(counted.stats.byVerb).toEqual({ get: 1, create: 2 });
    expect(summary(await history(ns))).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);
  });

  test("from the record's revisions: a rollback is recognised without a list; a revision deleted behind the record's back is made again", async () => {
    const ns = await createNamespace('hist');
    let sts = await createSts(ns, 'web', 'registry.example/r:1');
    await ownEvent(sts);
    sts = await setImage(ns, 'web', 'registry.example/r:2');
    await ownEvent(sts);
    const counted = outriggerClient();
    await ownEvent(sts, counted);
    sts = await setImage(ns, 'web', 'registry.example/r:1');
    counted.stats.reset();
    expect(await ownEvent(sts, counted)).toMatchObject({ outcome: 'rollback', number: 3 });
    // The parent's read, the revision's number (a patch) and the RolledBack Event.
    expect(counted.stats.byVerb).toEqual({ get: 1, 'patch/merge': 1, create: 1 });
    expect(summary(await history(ns))).toEqual(['2:registry.example/r:2', '3:registry.example/r:1']);
    // r:2's revision deleted, its event never delivered: the record still holds it, the rollback to it finds it
    // gone, and the sync lists and makes it again.
    const [r2] = await history(ns);
    await adminClient().delete(Resources.controllerRevisions, { name: r2!.metadata.name!, namespace: ns });
    sts = await setImage(ns, 'web', 'registry.example/r:2');
    expect(await ownEvent(sts)).toMatchObject({ outcome: 'created', number: 4 });
    expect(summary(await history(ns))).toEqual(['3:registry.example/r:1', '4:registry.example/r:2']);
    sts = await setImage(ns, 'web', 'registry.example/r:1');
    expect(await ownEvent(sts)).toMatchObject({ outcome: 'rollback', number: 5 });
    expect(summary(await history(ns))).toEqual(['4:registry.example/r:2', '5:registry.example/r:1']);
  });

  test("an event's object older than the record is not taken for the parent's state: no revision from a stale delivery", async () => {
    const ns = await createNamespace('hist');
    const v1 = await createSts(ns, 'web', 'registry.example/s:1');
    await ownEvent(v1);
    const v2 = await setImage(ns, 'web', 'registry.example/s:2');
    await ownEvent(v2);
    // The first event again, late: its object holds s:1, which would read as a rollback.
    const counted = outriggerClient();
    expect(await ownEvent(v1, counted)).toMatchObject({ outcome: 'unchanged', number: 2 });
    expect(counted.stats.byVerb.get).toBeGreaterThan(0);
    expect(summary(await history(ns))).toEqual(['1:registry.example/s:1', '2:registry.example/s:2']);
  });

  test("the echo of a sync's own write, and truncation's deletes, cost no read; a deleted latest revision is made again", async () => {
    const ns = await createNamespace('hist');
    let sts = await createSts(ns, 'web', 'registry.example/e:1');
    await sync(sts);
    sts = await setImage(ns, 'web', 'registry.example/e:2');
    await sync(sts, parentCause(sts));
    const [older, latest] = await history(ns);
    const cause = (r: ControllerRevision, type: string) => `ControllerRevision/it/${r.metadata.uid}/${r.metadata.resourceVersion}/${type}`;
    const counted = outriggerClient();
    await sync(sts, parentCause(sts), counted);
    counted.stats.reset();
    // The revision the last sync created (its ADDED event), and an older one deleted: nothing to decide.
    expect(await sync(sts, [cause(latest!, 'added'), ...parentCause(sts)], counted)).toMatchObject({ outcome: 'cached', number: 2 });
    await kube.delete(Resources.controllerRevisions, { name: older!.metadata.name!, namespace: ns });
    expect(await sync(sts, [cause(older!, 'deleted')], counted)).toMatchObject({ outcome: 'cached', number: 2 });
    // One read, for the parent's event without its object; the echo and the delete alone cost none.
    expect(counted.stats.byVerb).toEqual({ get: 1 });
    counted.stats.reset();
    expect(await sync(sts, [cause(latest!, 'added')], counted)).toMatchObject({ outcome: 'cached', number: 2 });
    expect(counted.stats.total).toBe(0);
    // Someone else's change to a revision, or the latest one deleted: the full sync.
    expect(await sync(sts, [cause(older!, 'modified')], counted)).toMatchObject({ outcome: 'unchanged' });
    await kube.delete(Resources.controllerRevisions, { name: latest!.metadata.name!, namespace: ns });
    expect(await sync(sts, [cause(latest!, 'deleted')], counted)).toMatchObject({ outcome: 'created', number: 1 });
    expect(summary(await history(ns))).toEqual(['1:registry.example/e:2']);
  });

  test('a change makes revision 2; going back is a rollback: revision 1 gets number 3, its data untouched', async () => {
    const ns = await createNamespace('hist');
    let sts = await createSts(ns);
    await sync(sts);
    const [first] = await history(ns);
    sts = await setImage(ns, 'web', 'registry.example/app:2');
    expect(await sync(sts, parentCause(sts))).toMatchObject({ outcome: 'created', number: 2 });
    sts = await setImage(ns, 'web', 'registry.example/app:1');
    expect(await sync(sts, parentCause(sts))).toMatchObject({ outcome: 'rollback', number: 3, revision: first!.metadata.name });
    const revs = await history(ns);
    expect(summary(revs)).toEqual(['2:registry.example/app:2', '3:registry.example/app:1']);
    const again = revs.find((r) => r.metadata.name === first!.metadata.name)!;
    expect(again.data).toEqual(first!.data);
    expect(again.metadata.uid).toBe(first!.metadata.uid);
  });

  test('a serialization-only difference (creationTimestamp: null, key order) is not a revision (kubernetes #134773, lws #797)', async () => {
    const ns = await createNamespace('hist');
    const sts = await createSts(ns);
    const live = (sts.spec as { template: JsonObject }).template;
    // What an older controller stored: the same template with `creationTimestamp: null` and its keys in another
    // order. (No empty map: Go leaves an empty map field out, and `{}` written is a value: M4 in docs/controllers/history.md#the-2026-11-26-history-reviews-findings-and-where-each-stands.)
    const old: JsonObject = {
      spec: {
        template: {
          $patch: 'replace',
          spec: (live as { spec: JsonObject }).spec,
          metadata: { creationTimestamp: null, labels: { app: 'web' } },
        },
      },
    };
    expect(semanticallyEqual(old, { spec: { template: { ...live, $patch: 'replace' } } })).toBe(true);
    await kube.create<ControllerRevision>(Resources.controllerRevisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: 'web-oldctrl', namespace: ns, labels: parentLabels(sts), ownerReferences: [newControllerRef(sts)] },
      data: old,
      revision: 1,
    });
    expect(await sync(sts)).toMatchObject({ outcome: 'unchanged', revision: 'web-oldctrl', number: 1 });
    expect((await history(ns)).map((r) => r.metadata.name)).toEqual(['web-oldctrl']);
  });

  test('an empty selector added to an affinity term is a revision, and the sync of the same state after it is not (audit M4)', async () => {
    const ns = await createNamespace('hist');
    const sts = await createSts(ns);
    expect(await sync(sts)).toMatchObject({ outcome: 'created', number: 1 });
    // `namespaceSelector: {}` selects every namespace; absent, only the pod's own. The apiserver keeps it.
    const term = { topologyKey: 'zone', labelSelector: { matchLabels: { app: 'web' } } };
    const affinity = (t: JsonObject) => ({ podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [t] } });
    const withTerm = (t: JsonObject) => ({
      ...template('registry.example/app:1'),
      spec: { ...template('registry.example/app:1').spec, affinity: affinity(t) },
    });
    const patch = (t: JsonObject) =>
      adminClient().patch<KubeObject>(statefulSets, { name: 'web', namespace: ns }, { spec: { template: withTerm(t) } }, 'merge');
    const narrow = await patch(term);
    expect(await sync(narrow)).toMatchObject({ outcome: 'created', number: 2 });
    const wide = await patch({ ...term, namespaceSelector: {} });
    expect(JSON.stringify(wide.spec)).toContain('"namespaceSelector":{}');
    expect(await sync(wide)).toMatchObject({ outcome: 'created', number: 3 });
    expect(await sync(wide)).toMatchObject({ outcome: 'unchanged', number: 3 });
    // Back to the narrow term: a rollback to revision 2, not "unchanged".
    const back = await adminClient().patch<KubeObject>(
      statefulSets,
      { name: 'web', namespace: ns },
      [
        {
          op: 'remove',
          path: '/spec/template/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/0/namespaceSelector',
        },
      ],
      'json',
    );
    expect(await sync(back)).toMatchObject({ outcome: 'rollback', number: 4 });
  });

  test('an orphan revision carrying the parent label is adopted, not duplicated (upgrade path)', async () => {
    const ns = await createNamespace('hist');
    const sts = await createSts(ns);
    await sync(sts);
    const [rev] = await history(ns);
    await kube.patch(
      Resources.controllerRevisions,
      { name: rev!.metadata.name!, namespace: ns },
      { metadata: { ownerReferences: null } },
      'merge',
    );
    expect(await sync(sts)).toMatchObject({ outcome: 'unchanged', number: 1 });
    const [adopted] = await history(ns);
    expect(controllerOf(adopted!)?.uid).toBe(sts.metadata.uid);
  });

  test('a name collision moves to the next count, and the hash label matches the new name', async () => {
    const ns = await createNamespace('hist');
    const sts = await createSts(ns);
    const data = { spec: { template: { ...(sts.spec as { template: JsonObject }).template, $patch: 'replace' } } };
    // Someone else's revision already has the name this data hashes to at count 0.
    await adminClient().create(Resources.controllerRevisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: revisionName('web', revisionHash(data, 0)), namespace: ns },
      data: { other: true },
      revision: 1,
    });
    const out = await sync(sts);
    expect(out).toMatchObject({ outcome: 'created', revision: revisionName('web', revisionHash(data, 1)) });
    const [mine] = (await history(ns)).filter((r) => controllerOf(r)?.uid === sts.metadata.uid);
    expect(mine!.metadata.name!.endsWith(`-${mine!.metadata.labels![HASH_LABEL]}`)).toBe(true);
  });

  test('when every name a revision could take is held by other data, the sync fails and says so on the parent (a Warning event)', async () => {
    const ns = await createNamespace('hist');
    const sts = await createSts(ns);
    const data = { spec: { template: { ...(sts.spec as { template: JsonObject }).template, $patch: 'replace' } } };
    for (let count = 0; count < MAX_COLLISIONS; count += 1) {
      await adminClient().create(Resources.controllerRevisions, {
        apiVersion: 'apps/v1',
        kind: 'ControllerRevision',
        metadata: { name: revisionName('web', revisionHash(data, count)), namespace: ns },
        data: { other: count },
        revision: 1,
      });
    }
    await expect(sync(sts)).rejects.toThrow(/10 revision names in a row were taken/);
    expect(await kubectl('describe', 'statefulset', 'web', '-n', ns)).toMatch(
      /Warning\s+SyncFailed\s+.*revision names in a row were taken by other data/,
    );
  });

  test("a revision's data survives the apiserver's own re-encoding: a strategic merge patch of its metadata, as the garbage collector's orphaning sends, is accepted", async () => {
    const ns = await createNamespace('hist');
    // JavaScript's key order (name before image) and characters Go escapes (& < >) in the data.
    const sts = await createSts(ns, 'web', 'registry.example/app:1', {});
    await adminClient().patch(
      statefulSets,
      { name: 'web', namespace: ns },
      { spec: { template: template('registry.example/app:1', { args: ['run && <wait>'], env: [{ name: 'Z', value: '1' }] }) } },
      'merge',
    );
    await sync(await kube.get(statefulSets, { name: 'web', namespace: ns }), parentCause(sts));
    const [rev] = await history(ns);
    const before = rev!.data;
    const patched = await adminClient().patch<ControllerRevision>(
      Resources.controllerRevisions,
      { name: rev!.metadata.name!, namespace: ns },
      { metadata: { labels: { touched: 'yes' } } },
      'strategic',
    );
    expect(patched.metadata.labels?.touched).toBe('yes');
    expect(patched.data).toEqual(before);
  });
});

describe('review findings', () => {
  test('a revision of this data that the list did not select is reused with its labels and the next number', async () => {
    const ns = await createNamespace('hist');
    let sts = await createSts(ns);
    await sync(sts);
    sts = await setImage(ns, 'web', 'registry.example/app:2');
    const data = { spec: { template: { ...(sts.spec as { template: JsonObject }).template, $patch: 'replace' } } };
    // Ours and with this data, but without the parent labels (so no list selects it) and an old number.
    await kube.create<ControllerRevision>(Resources.controllerRevisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: revisionName('web', revisionHash(data, 0)), namespace: ns, ownerReferences: [newControllerRef(sts)] },
      data,
      revision: 0,
    });
    expect(await sync(sts)).toMatchObject({ outcome: 'created', number: 2 });
    expect(summary(await history(ns))).toEqual(['1:registry.example/app:1', '2:registry.example/app:2']);
  });

  test('a DaemonSet never adopts the orphaned history of a StatefulSet of the same name', async () => {
    const ns = await createNamespace('hist');
    const sts = await createSts(ns);
    await sync(sts);
    const [rev] = await history(ns);
    await kube.patch(
      Resources.controllerRevisions,
      { name: rev!.metadata.name!, namespace: ns },
      { metadata: { ownerReferences: null } },
      'merge',
    );
    await adminClient().create(gvr('apps', 'v1', 'daemonsets'), {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'web', namespace: ns },
      spec: { selector: { matchLabels: { app: 'web' } }, template: template('registry.example/ds:1') },
    });
    await applyManifests(adminClient(), DAEMONSET_POLICY);
    forgetPolicies();
    const dsPolicy = policyFor(await listPolicies(kube, 'it'), 'apps', 'DaemonSet')!;
    const ds = await kube.get(gvr('apps', 'v1', 'daemonsets'), { name: 'web', namespace: ns });
    await syncHistory({ kube, state, holder: 'ds' }, dsPolicy, { ...keyOf(ds), kind: 'DaemonSet' }, childCause);
    expect(controllerOf(await kube.get(Resources.controllerRevisions, { name: rev!.metadata.name!, namespace: ns }))).toBeUndefined();
  });

  test('truncation deletes nothing when the generated objects cannot be found (no readable selector)', async () => {
    const ns = await createNamespace('hist');
    let sts = await createSts(ns);
    for (const image of ['s:2', 's:3', 's:4']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      await sync(sts);
    }
    const blind: RevisionPolicy = {
      ...policy,
      spec: { ...policy.spec, revisionHistoryLimit: 0, generated: { ...policy.spec.generated!, selectorPath: 'spec.noSuchSelector' } },
    };
    const result = await truncateHistory({ kube }, blind, keyOf(sts));
    expect(result.deleted).toEqual([]);
    expect(result.skipped).toMatch(/no readable selector/);
  });
});

describe('reliability', () => {
  test('ten concurrent invocations for one parent make one revision; numbers strictly increase', async () => {
    const ns = await createNamespace('conc');
    let sts = await createSts(ns);
    for (const image of ['a:1', 'a:2', 'a:3']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      const outs = await Promise.all(Array.from({ length: 10 }, () => sync(sts)));
      expect(outs.filter((o) => o.outcome === 'created')).toHaveLength(1);
    }
    expect(summary(await history(ns))).toEqual(['1:registry.example/a:1', '2:registry.example/a:2', '3:registry.example/a:3']);
  }, 60_000);

  test('events delivered three times and out of order, each with its now stale object (signed or not), give the history of one clean run', async () => {
    const ns = await createNamespace('dup');
    let sts = await createSts(ns, 'web', 'registry.example/b:1');
    const deliveries: Array<() => Promise<SyncOutcome>> = [];
    for (const image of ['b:2', 'b:3', 'b:1']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      // Each change is delivered three more times, late and in reverse, as the router sends the parent's own event:
      // its cause and its object, which by then is an older state of the parent (once as the forwarder signed it).
      const snapshot = sts;
      for (const observedSigned of [false, true, false])
        deliveries.push(() =>
          syncHistory({ kube, state, holder: uniqueName('h') }, policy, keyOf(snapshot), parentCause(snapshot), snapshot, {
            observedSigned,
          }),
        );
      await ownEvent(snapshot);
    }
    const late = [];
    for (const d of deliveries.reverse()) late.push((await d()).outcome);
    // A stale object is never taken for the parent's state: b:2's or b:3's late event is no rollback to it.
    expect(late.filter((o) => o !== 'cached' && o !== 'unchanged')).toEqual([]);
    // One clean run: b:1 was never synced before the first change, so b:2 is revision 1 and b:1 a new revision 3.
    expect(summary(await history(ns))).toEqual(['1:registry.example/b:2', '2:registry.example/b:3', '3:registry.example/b:1']);
  }, 60_000);

  test("with the events' objects: concurrent, repeated and reordered deliveries give the history of one clean run", async () => {
    const ns = await createNamespace('dupobs');
    let sts = await createSts(ns, 'web', 'registry.example/o:1');
    const deliveries: Array<() => Promise<SyncOutcome>> = [];
    for (const image of ['o:2', 'o:3', 'o:1']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      const snapshot = sts;
      for (let i = 0; i < 3; i += 1) deliveries.push(() => ownEvent(snapshot));
      const outs = await Promise.all(Array.from({ length: 5 }, () => ownEvent(snapshot)));
      expect(outs.filter((o) => o.outcome === 'created' || o.outcome === 'rollback')).toHaveLength(1);
    }
    for (const d of deliveries.reverse()) await d();
    expect(summary(await history(ns))).toEqual(['1:registry.example/o:2', '2:registry.example/o:3', '3:registry.example/o:1']);
  }, 60_000);

  test('through a proxy that fails about 20% of requests, the history equals a clean run', async () => {
    const bed = testbed();
    const proxy = await startFaultProxy({
      target: bed.server,
      caFile: bed.caFile,
      token: bed.tokens.outrigger,
      faultRate: 0.2,
      hangMs: 500,
      seed: 11,
    });
    try {
      const flaky = connect(
        { kind: 'kubeconfig', path: proxy.kubeconfig },
        { timeoutMs: 300, retry: { retries: 8, minDelayMs: 5, maxDelayMs: 50 } },
      );
      const ns = await createNamespace('flaky');
      let sts = await createSts(ns, 'web', 'registry.example/c:1');
      const run = async (s: KubeObject) => {
        // A failed sync is redelivered, as SQS would.
        for (let attempt = 0; ; attempt += 1) {
          try {
            return await sync(s, childCause, flaky);
          } catch (err) {
            if (attempt > 5) throw err;
          }
        }
      };
      await run(sts);
      for (const image of ['c:2', 'c:3', 'c:1', 'c:4']) {
        sts = await setImage(ns, 'web', `registry.example/${image}`);
        await run(sts);
        await run(sts);
      }
      expect(summary(await history(ns))).toEqual([
        '2:registry.example/c:2',
        '3:registry.example/c:3',
        '4:registry.example/c:1',
        '5:registry.example/c:4',
      ]);
      expect(proxy.stats.injected['429'] + proxy.stats.injected['500'] + proxy.stats.injected.timeout).toBeGreaterThan(0);
    } finally {
      await proxy.close();
    }
  }, 90_000);
});

describe('truncation', () => {
  test('keeps at most the limit of non-live revisions, oldest deleted first, never a live one', async () => {
    const ns = await createNamespace('trunc');
    await adminClient().create(Resources.serviceAccounts, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default', namespace: ns },
    });
    let sts = await createSts(ns, 'web', 'registry.example/t:1');
    await adminClient().patch(
      statefulSets,
      { name: 'web', namespace: ns },
      { metadata: { annotations: { 'outrigger.dev/revision-history-limit': '2' } } },
      'merge',
    );
    await sync(sts);
    const [rev1] = await history(ns);
    // A pod still runs revision 1: it is live.
    await adminClient().create(Resources.pods, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web-0', namespace: ns, labels: { app: 'web', 'controller-revision-hash': rev1!.metadata.name! } },
      spec: { containers: [{ name: 'c', image: 'registry.example/t:1' }] },
    });
    for (const image of ['t:2', 't:3', 't:4', 't:5', 't:6']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      await sync(sts);
    }
    const before = await history(ns);
    expect(before).toHaveLength(6);
    const result = await truncateHistory({ kube }, policy, keyOf(sts));
    const after = await history(ns);
    // Live: revision 1 (the pod) and 6 (the latest); non-live kept: the newest two of 2..5.
    expect(summary(after)).toEqual([
      '1:registry.example/t:1',
      '4:registry.example/t:4',
      '5:registry.example/t:5',
      '6:registry.example/t:6',
    ]);
    expect(result.deleted).toHaveLength(2);
    // Idempotent: a second run deletes nothing.
    expect((await truncateHistory({ kube }, policy, keyOf(sts))).deleted).toEqual([]);

    // What was done shows on the StatefulSet, as stock kubectl describes it: one event per revision and one truncation.
    const described = await kubectl('describe', 'statefulset', 'web', '-n', ns);
    expect(described.match(/RevisionCreated/g)).toHaveLength(6);
    expect(described).toMatch(/Normal\s+Truncated\s+.*Deleted 2 revision\(s\) beyond the history limit/);
    expect(described).toContain(`Created revision 6: ${after.at(-1)!.metadata.name}`);
  }, 60_000);

  test("never deletes the revision holding the parent's target state, even before the sync has made it the latest (a rollback)", async () => {
    const ns = await createNamespace('trunc');
    let sts = await createSts(ns, 'web', 'registry.example/t:1');
    await adminClient().patch(
      statefulSets,
      { name: 'web', namespace: ns },
      { metadata: { annotations: { 'outrigger.dev/revision-history-limit': '0' } } },
      'merge',
    );
    await sync(sts);
    for (const image of ['t:2', 't:3']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      await sync(sts);
    }
    // Back to t:1; truncation runs first (a generated object was deleted, say).
    sts = await setImage(ns, 'web', 'registry.example/t:1');
    const result = await truncateHistory({ kube }, policy, keyOf(sts));
    expect(summary(await history(ns))).toEqual(['1:registry.example/t:1', '3:registry.example/t:3']);
    expect(result.deleted).toHaveLength(1);
    // The sync then recognises the rollback on the revision that was kept.
    expect(await sync(sts)).toMatchObject({ outcome: 'rollback', number: 4 });
    expect(summary(await history(ns))).toEqual(['3:registry.example/t:3', '4:registry.example/t:1']);
  }, 60_000);

  test('never deletes a revision another controller owns', async () => {
    const ns = await createNamespace('trunc');
    const sts = await createSts(ns);
    await adminClient().patch(
      statefulSets,
      { name: 'web', namespace: ns },
      { metadata: { annotations: { 'outrigger.dev/revision-history-limit': '0' } } },
      'merge',
    );
    const other = await createSts(ns, 'other');
    const foreign = await kube.create<ControllerRevision>(Resources.controllerRevisions, {
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name: 'foreign', namespace: ns, labels: parentLabels(sts), ownerReferences: [newControllerRef(other)] },
      data: {},
      revision: 0,
    });
    await sync(sts);
    await truncateHistory({ kube }, policy, keyOf(sts));
    expect((await kube.get(Resources.controllerRevisions, { name: 'foreign', namespace: ns })).metadata.uid).toBe(foreign.metadata.uid);
  });
});

describe('when truncation runs, and by which limit', () => {
  const LIMIT = 'outrigger.dev/revision-history-limit';

  test("the parent's own spec.revisionHistoryLimit is its limit when it has no annotation", async () => {
    const ns = await createNamespace('trunc');
    let sts: KubeObject = await adminClient().create<KubeObject>(statefulSets, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'web', namespace: ns },
      spec: {
        serviceName: 'web',
        replicas: 0,
        revisionHistoryLimit: 1,
        selector: { matchLabels: { app: 'web' } },
        template: template('registry.example/o:1'),
      },
    });
    await sync(sts);
    let last: SyncOutcome | undefined;
    for (const image of ['o:2', 'o:3', 'o:4']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      last = await sync(sts, parentCause(sts));
    }
    expect(last).toMatchObject({ outcome: 'created', number: 4, truncate: true });
    await truncateHistory({ kube }, policy, keyOf(sts));
    expect(summary(await history(ns))).toEqual(['3:registry.example/o:3', '4:registry.example/o:4']);
  });

  test("a lowered limit, and a revision the status stops naming, ask for truncation from the parent's own event; an unrelated change does not", async () => {
    const ns = await createNamespace('trunc');
    const admin = adminClient();
    let sts = await createSts(ns, 'web', 'registry.example/s:1', { [LIMIT]: '1' });
    await sync(sts);
    const [rev1] = await history(ns);
    sts = await admin.patch(
      statefulSets,
      { name: 'web', namespace: ns, subresource: 'status' },
      { status: { currentRevision: rev1!.metadata.name } },
      'merge',
    );
    for (const image of ['s:2', 's:3']) {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      await sync(sts, parentCause(sts));
    }
    await truncateHistory({ kube }, policy, keyOf(sts));
    // Revision 1 is live (the status names it), so 2 is the one non-live revision the limit keeps.
    expect(summary(await history(ns))).toEqual(['1:registry.example/s:1', '2:registry.example/s:2', '3:registry.example/s:3']);
    sts = await admin.patch(statefulSets, { name: 'web', namespace: ns }, { spec: { replicas: 4 } }, 'merge');
    expect(await sync(sts, parentCause(sts))).toEqual({ outcome: 'cached', revision: expect.any(String), number: 3 });

    sts = await admin.patch(
      statefulSets,
      { name: 'web', namespace: ns, subresource: 'status' },
      { status: { currentRevision: (await history(ns))[2]!.metadata.name } },
      'merge',
    );
    expect(await sync(sts, parentCause(sts))).toMatchObject({ outcome: 'unchanged', truncate: true });
    await truncateHistory({ kube }, policy, keyOf(sts));
    expect(summary(await history(ns))).toEqual(['2:registry.example/s:2', '3:registry.example/s:3']);

    sts = await admin.patch(statefulSets, { name: 'web', namespace: ns }, { metadata: { annotations: { [LIMIT]: '0' } } }, 'merge');
    expect(await sync(sts, parentCause(sts))).toMatchObject({ outcome: 'unchanged', truncate: true });
    await truncateHistory({ kube }, policy, keyOf(sts));
    expect(summary(await history(ns))).toEqual(['3:registry.example/s:3']);
    expect(await sync(sts, parentCause(sts))).toEqual({ outcome: 'cached', revision: expect.any(String), number: 3 });
  });

  test('the history handler truncates right after a change, from the revisions its sync listed and wrote, and says both in one Event (local runtime, no truncation function)', async () => {
    const ns = await createNamespace('trunc-inline');
    const runtime = await startTestRuntime('trunc-inline', ['router', 'history'], { namespace: ns });
    try {
      await adminClient().create(Resources.serviceAccounts, {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: 'default', namespace: ns },
      });
      await createSts(ns, 'web', 'registry.example/i:1', { [LIMIT]: '1' });
      await eventually(async () => (await history(ns)).length === 1);
      for (const [n, image] of [
        [2, 'i:2'],
        [3, 'i:3'],
        [4, 'i:4'],
        [5, 'i:5'],
      ] as const) {
        await setImage(ns, 'web', `registry.example/${image}`);
        await eventually(async () => (await history(ns)).some((r) => r.revision === n));
        // A pod still runs revision 2: it is live, and the truncations after it (which read the pods from the
        // apiserver's cache once one has listed them) keep it.
        if (n === 2) {
          const rev2 = (await history(ns)).find((r) => r.revision === 2)!;
          await adminClient().create(Resources.pods, {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: 'web-0', namespace: ns, labels: { app: 'web', 'controller-revision-hash': rev2.metadata.name! } },
            spec: { containers: [{ name: 'c', image: 'registry.example/i:2' }] },
          });
        }
      }
      // The latest, the live one and one more (the limit), with nothing consuming the truncation queue.
      const kept = ['2:registry.example/i:2', '4:registry.example/i:4', '5:registry.example/i:5'];
      await eventually(async () => summary(await history(ns)).join() === kept.join(), 15_000);
      expect(summary(await history(ns))).toEqual(kept);
      // One Event for each change and the truncation it made due.
      const described = await kubectl('describe', 'statefulset', 'web', '-n', ns);
      expect(described).toMatch(/Created revision 5: \S+; deleted 1 revision\(s\) beyond the history limit/);
      expect(described).not.toMatch(/Truncated/);
    } finally {
      await runtime.stop();
    }
  }, 60_000);

  test("truncation right after a change decides on the parent the sync decided on: the parent's read, its create, one list of the pods and its delete; a pod's revision is kept", async () => {
    const ns = await createNamespace('trunc-cost');
    await adminClient().create(Resources.serviceAccounts, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default', namespace: ns },
    });
    let sts = await createSts(ns, 'web', 'registry.example/c:1', { 'outrigger.dev/revision-history-limit': '0' });
    const counted = outriggerClient();
    const deps = withInlineTruncation(counted, keyOf(sts));
    const change = async (image: string) => {
      sts = await setImage(ns, 'web', `registry.example/${image}`);
      return syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    };
    sts = await adminClient().get(statefulSets, { name: 'web', namespace: ns });
    await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    await change('c:2');
    // A pod runs revision 2: live, whatever the limit.
    const rev2 = (await history(ns)).find((r) => r.revision === 2)!;
    await adminClient().create(Resources.pods, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web-0', namespace: ns, labels: { app: 'web', 'controller-revision-hash': rev2.metadata.name! } },
      spec: { containers: [{ name: 'c', image: 'registry.example/c:2' }] },
    });
    await change('c:3');
    counted.stats.reset();
    expect(await change('c:4')).toMatchObject({ outcome: 'created', number: 4 });
    expect(summary(await history(ns))).toEqual(['2:registry.example/c:2', '4:registry.example/c:4']);
    // The parent, the revision and its Event, the pods, revision 3's delete.
    expect(counted.stats.byVerb).toEqual({ get: 1, create: 2, list: 1, delete: 1 });
  });

  test("a rollback made while the truncation after an older change decides on that change's parent: the revision it deletes is made again by the rollback's own sync, same name, same data", async () => {
    const ns = await createNamespace('trunc-race');
    let sts = await createSts(ns, 'web', 'registry.example/r:1', { 'outrigger.dev/revision-history-limit': '1' });
    const deps = withInlineTruncation(kube, keyOf(sts));
    sts = await adminClient().get(statefulSets, { name: 'web', namespace: ns });
    await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    sts = await setImage(ns, 'web', 'registry.example/r:2');
    await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    const [rev1] = await history(ns);
    // r:3, then back to r:1 after r:3's sync read the parent, while its truncation decides.
    const toR3 = await setImage(ns, 'web', 'registry.example/r:3');
    let back: KubeObject | undefined;
    const racing: typeof deps = {
      ...deps,
      truncate: async (...args) => {
        back = await setImage(ns, 'web', 'registry.example/r:1');
        return deps.truncate(...args);
      },
    };
    expect(await syncHistory(racing, policy, keyOf(toR3), parentCause(toR3), toR3)).toMatchObject({ outcome: 'created', number: 3 });
    // Decided on r:3's parent: revision 1 was the oldest beyond the limit, and no pod named it.
    expect(summary(await history(ns))).toEqual(['2:registry.example/r:2', '3:registry.example/r:3']);
    // The rollback's own event: the revision is made again from the parent's target state.
    expect(await syncHistory(deps, policy, keyOf(back!), parentCause(back!), back)).toMatchObject({ outcome: 'created', number: 4 });
    const after = await history(ns);
    expect(summary(after)).toEqual(['3:registry.example/r:3', '4:registry.example/r:1']);
    expect(after[1]!.metadata.name).toBe(rev1!.metadata.name);
    expect(after[1]!.data).toEqual(rev1!.data);
  });

  test('a change the router saw change the target state goes straight to the lease, which brings the record: no record read first; without the hint, the record is read first', async () => {
    const ns = await createNamespace('hist-hint');
    let sts = await createSts(ns, 'web', 'registry.example/h:1');
    const counted = testState();
    const calls: string[] = [];
    counted.client.middlewareStack.add(
      (next, context) => async (args) => {
        calls.push(String(context.commandName).replace(/Command$/, ''));
        return next(args);
      },
      { step: 'initialize' },
    );
    const deps = { kube, state: counted, holder: uniqueName('h') };
    await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    sts = await setImage(ns, 'web', 'registry.example/h:2');
    calls.length = 0;
    expect(await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts, { targetChanged: true })).toMatchObject({
      outcome: 'created',
      number: 2,
    });
    // The lease taken (with the record's head on it, its revisions queried beside the take), the new revision's
    // item put, and the lease left with the new head.
    expect(calls).toEqual(['UpdateItem', 'Query', 'PutItem', 'UpdateItem']);
    sts = await setImage(ns, 'web', 'registry.example/h:3');
    calls.length = 0;
    expect(await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts)).toMatchObject({ outcome: 'created', number: 3 });
    expect(calls).toEqual(['GetItem', 'UpdateItem', 'Query', 'PutItem', 'UpdateItem']);
    // A wrong hint costs a lease, never a wrong answer.
    calls.length = 0;
    expect(await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts, { targetChanged: true })).toMatchObject({
      outcome: 'unchanged',
      number: 3,
    });
    expect(summary(await history(ns))).toEqual(['1:registry.example/h:1', '2:registry.example/h:2', '3:registry.example/h:3']);
  });

  test('a parent changed in a tight loop gets a burst of Events, then one a minute; the next one says how many were not recorded', async () => {
    const ns = await createNamespace('hist-events');
    let sts = await createSts(ns, 'web', 'registry.example/v:0');
    let clock = Date.parse('2026-01-01T00:00:00Z');
    const deps = { kube, state, holder: uniqueName('h'), now: () => clock };
    await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    for (let i = 1; i <= EVENT_BURST + 2; i += 1) {
      sts = await setImage(ns, 'web', `registry.example/v:${i}`);
      clock += 1_000;
      await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    }
    const notes = async () =>
      (await adminClient().list<KubeObject & { reason?: string; note?: string }>(events, { namespace: ns })).items
        .filter((e) => e.reason === 'RevisionCreated')
        .map((e) => e.note ?? '');
    // Revision 1 and the next seven: the burst. Revisions 9, 10 and 11 came too soon.
    expect(await notes()).toHaveLength(EVENT_BURST);
    expect(summary(await history(ns))).toHaveLength(EVENT_BURST + 3);
    clock += EVENT_REFILL_MS;
    sts = await setImage(ns, 'web', 'registry.example/v:late');
    await syncHistory(deps, policy, keyOf(sts), parentCause(sts), sts);
    expect((await notes()).filter((n) => n.startsWith('Created revision 12: '))).toEqual([
      expect.stringMatching(/\(3 earlier event\(s\) on this object not recorded: at most 8 at once, then one a minute\)$/),
    ]);
  });

  test("a lowered limit in the RevisionPolicy trims every parent's history, with no change to any parent (local runtime)", async () => {
    const group = 'history.outrigger.test';
    const trimmed = gvr(group, 'v1', 'trimmeds');
    const manifests = (limit: number) => `
${openCrd(group, 'Trimmed', 'trimmeds')}---
${controllersGrant('outrigger-history-trimmed-test', [`{ apiGroups: ["${group}"], resources: ["trimmeds"], verbs: ["get", "list", "watch"] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: history-trimmed }
spec:
  target: { apiVersion: ${group}/v1, kind: Trimmed }
  targetState: [spec.template]
  revisionHistoryLimit: ${limit}
`;
    const admin = adminClient();
    await applyManifests(admin, manifests(5));
    await eventually(async () => {
      forgetPolicies();
      forgetDiscovery(kube);
      return policyFor(await listPolicies(kube, 'it'), group, 'Trimmed') !== undefined;
    });
    const ns = await createNamespace('trunc-policy');
    const runtime = await startTestRuntime('trunc-policy', ['router', 'history'], { namespace: ns });
    try {
      const count = async () => (await kube.list(Resources.controllerRevisions, { namespace: ns })).items.length;
      await admin.create(trimmed, {
        apiVersion: `${group}/v1`,
        kind: 'Trimmed',
        metadata: { name: 't', namespace: ns },
        spec: { template: { v: 1 } },
      });
      await eventually(async () => (await count()) === 1);
      for (const v of [2, 3, 4]) {
        await admin.patch(trimmed, { name: 't', namespace: ns }, { spec: { template: { v } } }, 'merge');
        await eventually(async () => (await count()) === v);
      }
      await applyManifests(admin, manifests(1));
      expect(await eventually(async () => ((await count()) === 2 ? 2 : undefined), 15_000)).toBe(2);
    } finally {
      await runtime.stop();
      await admin.delete(revisionPolicies, { name: 'history-trimmed' }).catch(() => undefined);
    }
  }, 90_000);
});

describe('policies', () => {
  test.each([
    ['a bad path', { target: { apiVersion: 'apps/v1', kind: 'DaemonSet' }, targetState: ['spec..template'] }, /targetState/],
    [
      'a limit below 0',
      { target: { apiVersion: 'apps/v1', kind: 'DaemonSet' }, targetState: ['spec.template'], revisionHistoryLimit: -1 },
      /revisionHistoryLimit/,
    ],
    [
      'state under metadata',
      { target: { apiVersion: 'apps/v1', kind: 'DaemonSet' }, targetState: ['metadata.labels'] },
      /cannot be under metadata or status/,
    ],
    [
      'revisionKey mode without its settings',
      { target: { apiVersion: 'apps/v1', kind: 'DaemonSet' }, targetState: ['spec.template'], mode: 'revisionKey' },
      /needs spec.revisionKey/,
    ],
  ])('the CRD schema rejects %s', async (_, spec, message) => {
    const err = await adminClient()
      .create(revisionPolicies, {
        apiVersion: 'outrigger.dev/v1alpha1',
        kind: 'RevisionPolicy',
        metadata: { name: uniqueName('bad') },
        spec,
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'Invalid', message });
  });

  test('an unknown kind is reported on the policy, and never causes a write', async () => {
    const name = uniqueName('unknown');
    await adminClient().create(revisionPolicies, {
      apiVersion: 'outrigger.dev/v1alpha1',
      kind: 'RevisionPolicy',
      metadata: { name },
      spec: { target: { apiVersion: 'example.com/v1', kind: 'Widget' }, targetState: ['spec.template'] },
    });
    const counted = outriggerClient();
    const report = await reportPolicy(counted, 'it', name);
    expect(report).toMatchObject({
      ready: false,
      reason: 'UnknownKind',
      message: expect.stringMatching(/the cluster does not serve example.com\/v1/),
    });
    const obj = await kube.get(revisionPolicies, { name });
    expect((obj.status as { conditions: unknown[] }).conditions).toEqual([
      expect.objectContaining({ type: 'Ready', status: 'False', reason: 'UnknownKind' }),
    ]);
    expect(Object.keys(counted.stats.byVerb).filter((v) => v !== 'get' && v !== 'discovery' && v !== 'patch/merge')).toEqual([]);
    expect(counted.stats.byVerb['patch/merge']).toBe(1); // the status condition, nothing else
    await adminClient().delete(revisionPolicies, { name });
  });
});
