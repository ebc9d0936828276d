// A RevisionPolicy in a live cluster: installed while the pipeline runs, bad, or deleted. For the install, the
// forwarder, the router and the history function each run in a process of their own with their own policy
// caches (test/testbed/separate-pipeline.ts), as they do on AWS.
/* eslint-disable max-lines -- the policy scenarios share the ownKind, policy, history, sqsRecord and routerDeps helpers below, which set up and drive the pipeline the same way in each */
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import type { SQSRecord } from 'aws-lambda';
import { Forwarder, type EnvelopeSink, type QueueEntry } from '../../forwarder/forwarder.ts';
import { controllerSources, type ControllerSource } from '../../functions/controllers.ts';
import { forgetPolicies, historySource, listPolicies, revisionPolicies } from '../../functions/history/policies.ts';
import { forgetHistoryKeepers, reportPolicy } from '../../functions/history/report.ts';
import { RECORD_KEEP_SECONDS, syncHistory } from '../../functions/history/sync.ts';
import { routeBatch } from '../../functions/router/route.ts';
import { Clusters } from '../../shared/clusters.ts';
import { makeEnvelope, messageGroupId } from '../../shared/envelope/index.ts';
import { HISTORY_KEPT_BY_ANNOTATION } from '../../shared/history/policy.ts';
import { PARENT_LABEL, sortRevisions, type ControllerRevision } from '../../shared/history/revisions.ts';
import { Resources, forgetDiscovery, gvr, gvrString, resolveKind, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { TABLE, itemKey, openState } from '../../shared/state/index.ts';
import { statefulSet } from '../../local/fixtures.ts';
import { openCrd } from '../testbed/crds.ts';
import { STATEFULSET_POLICY } from '../testbed/policies.ts';
import { controllersGrant } from '../testbed/rbac.ts';
import {
  adminClient,
  createNamespace,
  eventually,
  outriggerClient,
  startTestRuntime,
  testCluster,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { separatePipeline } from '../testbed/separate-pipeline.ts';

const kube = outriggerClient();
const admin = adminClient();

/** A namespaced kind of the test's own, which Outrigger may read, served once this resolves. */
async function ownKind(group: string, kind: string, plural: string) {
  await applyManifests(
    admin,
    `${openCrd(group, kind, plural)}---\n${controllersGrant(`outrigger-${plural}-test`, [`{ apiGroups: ["${group}"], resources: ["${plural}"], verbs: ["get", "list", "watch"] }`])}`,
  );
  await eventually(async () => {
    forgetDiscovery(kube);
    return resolveKind(kube, `${group}/v1`, kind)
      .then(() => true)
      .catch(() => false);
  });
  return gvr(group, 'v1', plural);
}

function policy(name: string, apiVersion: string, kind: string, extra = ''): string {
  return `
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: ${name} }
spec:
  target: { apiVersion: ${apiVersion}, kind: ${kind} }
  targetState: [spec.template]
${extra}`;
}

async function history(ns: string, name: string): Promise<string[]> {
  const list = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
    namespace: ns,
    labelSelector: `${PARENT_LABEL}=${name}`,
  });
  return sortRevisions(list.items).map((r) => `${r.revision}:${(r.data as { spec: { template: { image: string } } }).spec.template.image}`);
}

function sqsRecord(e: { body: string; group: string; id: string }): SQSRecord {
  return {
    messageId: e.id,
    receiptHandle: e.id,
    body: e.body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '0',
      SenderId: 't',
      ApproximateFirstReceiveTimestamp: '0',
      MessageGroupId: e.group,
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:local:000000000000:it-events.fifo',
    awsRegion: 'local',
  };
}

/** The router as the events queue invokes it, for cluster `it`. (A variable, not a literal: only what routeBatch reads matters.) */
function routerDeps(sink: SyncSink, sources: readonly ControllerSource[] = controllerSources) {
  const deadLetter = new MemoryDeadLetterSink();
  const deps = {
    clusters: new Clusters([testCluster('it')]),
    sources,
    sink,
    deadLetter: () => deadLetter,
    queueCluster: () => 'it',
    log: (level: string, message: string, fields?: Record<string, unknown>) =>
      process.stderr.write(`[router] ${level} ${message} ${JSON.stringify(fields)}\n`),
  };
  return { deps, deadLetter };
}

class MemorySyncSink implements SyncSink {
  readonly sent: Array<{ target: string; request: SyncRequest }> = [];
  async send(target: string, requests: SyncRequest[]): Promise<void> {
    for (const request of requests) this.sent.push({ target, request });
  }
}

describe('a policy installed on a live cluster loses no first events', () => {
  test('applied with its first object, then three updates in 4.5 s, through forwarder, router and history in processes of their own whose caches predate the policy: four revisions, the first holding the state it was created with', async () => {
    const gadgets = await ownKind('race.outrigger.test', 'Gadget', 'gadgets');
    const gizmos = await ownKind('race.outrigger.test', 'Gizmo', 'gizmos');
    const ns = await createNamespace('race');
    const pipeline = await separatePipeline(ns);
    const warm = uniqueName('race-warm');
    const name = uniqueName('race');
    const gizmo = (image: number) => ({
      apiVersion: 'race.outrigger.test/v1',
      kind: 'Gizmo',
      metadata: { name: 'w', namespace: ns },
      spec: { template: { image: `app:${image}` } },
    });
    try {
      // A policy already in force, whose parent's revisions show the whole pipeline working.
      await applyManifests(admin, `${policy(warm, 'race.outrigger.test/v1', 'Gizmo')}---\n${JSON.stringify(gizmo(1))}`);
      await eventually(async () => (await history(ns, 'w')).length === 1, 90_000);
      // Once the caches have expired, one more change makes the router and the history function read the
      // policies again, before the new one exists: they hold that list for the next 5 s.
      await new Promise((r) => setTimeout(r, 5_500));
      await admin.patch(gizmos, { name: 'w', namespace: ns }, { spec: { template: { image: 'app:2' } } }, 'merge');
      await eventually(async () => (await history(ns, 'w')).length === 2, 30_000);
      const gadget = (image: number) => ({
        apiVersion: 'race.outrigger.test/v1',
        kind: 'Gadget',
        metadata: { name: 'g', namespace: ns },
        spec: { template: { image: `app:${image}` } },
      });
      await applyManifests(admin, `${policy(name, 'race.outrigger.test/v1', 'Gadget')}---\n${JSON.stringify(gadget(1))}`);
      for (const image of [2, 3, 4]) {
        await new Promise((r) => setTimeout(r, 1_500));
        await admin.patch(gadgets, { name: 'g', namespace: ns }, { spec: { template: { image: `app:${image}` } } }, 'merge');
      }
      expect(await eventually(async () => ((await history(ns, 'g')).length === 4 ? history(ns, 'g') : undefined), 30_000)).toEqual([
        '1:app:1',
        '2:app:2',
        '3:app:3',
        '4:app:4',
      ]);
      expect(await pipeline.deadLetters()).toEqual([]);
    } catch (err) {
      process.stderr.write(`[race] process logs:\n${pipeline.logs()}\n`);
      throw err;
    } finally {
      await pipeline.stop();
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
      await admin.delete(revisionPolicies, { name: warm }).catch(() => undefined);
    }
  }, 180_000);

  test('the history resync gives every parent of a policy a baseline revision, with no event', async () => {
    const widgets = await ownKind('resync.outrigger.test', 'Sprocket', 'sprockets');
    const ns = await createNamespace('resync');
    await admin.create(widgets, {
      apiVersion: 'resync.outrigger.test/v1',
      kind: 'Sprocket',
      metadata: { name: 's', namespace: ns },
      spec: { template: { image: 'app:1' } },
    });
    const name = uniqueName('resync');
    await applyManifests(admin, policy(name, 'resync.outrigger.test/v1', 'Sprocket'));
    // No forwarder and no router: only the schedule can find the parent.
    const runtime = await startTestRuntime('resync', ['history-resync', 'history'], { clusterId: 'it' });
    try {
      await runtime.runScheduled('history-resync');
      expect(await eventually(async () => ((await history(ns, 's')).length ? history(ns, 's') : undefined))).toEqual(['1:app:1']);
      const checked = await kube.get(revisionPolicies, { name });
      expect((checked.status as { conditions: unknown[] }).conditions).toEqual([
        expect.objectContaining({ type: 'Ready', status: 'True', reason: 'Valid' }),
      ]);
    } finally {
      await runtime.stop();
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  }, 60_000);

  test('the record does not vouch for revisions deleted while no policy was in effect: the next history resync recreates the baseline', async () => {
    const gizmos = await ownKind('stale.outrigger.test', 'Gizmo', 'gizmos');
    const ns = await createNamespace('stale');
    const g = await admin.create(gizmos, {
      apiVersion: 'stale.outrigger.test/v1',
      kind: 'Gizmo',
      metadata: { name: 'g', namespace: ns },
      spec: { template: { image: 'app:1' } },
    });
    const name = uniqueName('stale');
    await applyManifests(admin, policy(name, 'stale.outrigger.test/v1', 'Gizmo'));
    const runtime = await startTestRuntime('stale', ['history-resync', 'history'], { clusterId: 'it' });
    try {
      await runtime.runScheduled('history-resync');
      expect(await eventually(async () => ((await history(ns, 'g')).length ? history(ns, 'g') : undefined))).toEqual(['1:app:1']);
      // The parent's record expires a week after its last sync, when nothing takes its lease any more.
      const state = openState({ tableName: runtime.tableName, endpoint: runtime.dynamodbEndpoint });
      const item = await state.client.send(
        new GetItemCommand({
          TableName: state.tableName,
          Key: itemKey({ cluster: 'it', kind: 'lease', name: `history/${g.metadata.uid}` }),
        }),
      );
      expect(Number(item.Item?.[TABLE.timeToLiveAttribute]?.N) - Date.now() / 1000).toBeGreaterThan(RECORD_KEEP_SECONDS - 120);
      state.client.destroy();
      // The audit's scenario (M1): the policy goes, its parent's revisions are removed by hand while nothing
      // listens, and the policy comes back. The parent's record still names the deleted revision as its latest.
      await admin.delete(revisionPolicies, { name });
      const revisions = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
        namespace: ns,
        labelSelector: `${PARENT_LABEL}=g`,
      });
      for (const r of revisions.items) await admin.delete(Resources.controllerRevisions, { name: r.metadata.name!, namespace: ns });
      expect(await history(ns, 'g')).toEqual([]);
      await applyManifests(admin, policy(name, 'stale.outrigger.test/v1', 'Gizmo'));
      await runtime.runScheduled('history-resync');
      expect(await eventually(async () => ((await history(ns, 'g')).length ? history(ns, 'g') : undefined))).toEqual(['1:app:1']);
    } finally {
      await runtime.stop();
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  }, 60_000);
});

describe('a bad policy says so, and stops costing', () => {
  test('a cluster-scoped kind: Ready=False ClusterScoped, not watched, and its events route without a forbidden list', async () => {
    const name = uniqueName('namespaces');
    await applyManifests(admin, policy(name, 'v1', 'Namespace'));
    try {
      const sink = new MemorySyncSink();
      const { deps } = routerDeps(sink, [historySource]);
      const own = await kube.get(revisionPolicies, { name });
      const nsObject = await kube
        .get(Resources.namespaces, { name: 'default' })
        .catch(() => admin.get(Resources.namespaces, { name: 'default' }));
      const envelopes = [
        makeEnvelope({ cluster: 'it', type: 'added', object: own, source: 'test' }),
        makeEnvelope({
          cluster: 'it',
          type: 'modified',
          object: { ...nsObject, apiVersion: 'v1', kind: 'Namespace' } as KubeObject,
          source: 'test',
        }),
      ];
      const out = await routeBatch(
        { Records: envelopes.map((e, i) => sqsRecord({ body: JSON.stringify(e), group: messageGroupId(e), id: `m${i}` })) },
        deps,
      );
      expect(out.batchItemFailures).toEqual([]);
      expect(sink.sent.map((s) => `${s.target}:${s.request.key.kind}/${s.request.key.name}`)).toEqual([`history:RevisionPolicy/${name}`]);

      const report = await reportPolicy(kube, 'it', name);
      expect(report).toMatchObject({ ready: false, reason: 'ClusterScoped' });
      const status = (await kube.get(revisionPolicies, { name })).status as { conditions: unknown[] };
      expect(status.conditions).toEqual([
        expect.objectContaining({
          type: 'Ready',
          status: 'False',
          reason: 'ClusterScoped',
          message: expect.stringMatching(/Namespace is cluster-scoped/),
        }),
      ]);
      expect((await historySource.watches(testCluster('it'), kube)).map(gvrString)).not.toContain(gvrString(Resources.namespaces));
      expect((await historySource.kinds(testCluster('it'), kube)).map((k) => k.kind)).not.toContain('Namespace');
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });

  test('a kind discovery cannot answer for now (its aggregated API is down): its events are retried, not dropped; the others route', async () => {
    const apiServices = gvr('apiregistration.k8s.io', 'v1', 'apiservices');
    const name = uniqueName('broken');
    await applyManifests(
      admin,
      `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: { name: v1.broken.outrigger.test }
spec: { group: broken.outrigger.test, version: v1, groupPriorityMinimum: 100, versionPriority: 10, insecureSkipTLSVerify: true, service: { namespace: default, name: nowhere, port: 443 } }
---
${policy(name, 'broken.outrigger.test/v1', 'Thing')}`,
    );
    try {
      const sink = new MemorySyncSink();
      const { deps } = routerDeps(sink, [historySource]);
      const own = await kube.get(revisionPolicies, { name });
      const thing: KubeObject = {
        apiVersion: 'broken.outrigger.test/v1',
        kind: 'Thing',
        metadata: { name: 't', namespace: 'default', uid: randomUUID(), resourceVersion: '1' },
      };
      const envelopes = [
        makeEnvelope({ cluster: 'it', type: 'added', object: thing, source: 'test' }),
        makeEnvelope({ cluster: 'it', type: 'added', object: own, source: 'test' }),
      ];
      forgetPolicies('it');
      const out = await routeBatch(
        { Records: envelopes.map((e, i) => sqsRecord({ body: JSON.stringify(e), group: messageGroupId(e), id: `m${i}` })) },
        deps,
      );
      expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm0' }]);
      expect(sink.sent.map((s) => `${s.target}:${s.request.key.kind}/${s.request.key.name}`)).toEqual([`history:RevisionPolicy/${name}`]);
      expect((await listPolicies(kube, 'it')).unresolved).toEqual([
        expect.objectContaining({ name, kinds: [{ group: 'broken.outrigger.test', kind: 'Thing' }] }),
      ]);
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
      await admin.delete(apiServices, { name: 'v1.broken.outrigger.test' }).catch(() => undefined);
      forgetPolicies('it');
    }
  }, 60_000);

  test('a generated kind that does not resolve: Ready=False UnknownGeneratedKind, and its target is not watched', async () => {
    await ownKind('gen.outrigger.test', 'Cog', 'cogs');
    const name = uniqueName('generated');
    await applyManifests(admin, policy(name, 'gen.outrigger.test/v1', 'Cog', '  generated: { apiVersion: v1, kind: NoSuchKind }'));
    try {
      expect(await reportPolicy(kube, 'it', name)).toMatchObject({
        ready: false,
        reason: 'UnknownGeneratedKind',
        message: expect.stringMatching(/spec.generated: the cluster serves no kind NoSuchKind in v1/),
      });
      expect((await historySource.watches(testCluster('it'), kube)).map(gvrString)).not.toContain(
        gvrString(gvr('gen.outrigger.test', 'v1', 'cogs')),
      );
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });

  test("the forwarder watches a policy's kind from the policy's event, and stops when its last policy goes", async () => {
    const bolts = await ownKind('drop.outrigger.test', 'Bolt', 'bolts');
    const id = gvrString(bolts);
    const sent: QueueEntry[] = [];
    const sink: EnvelopeSink = { sendBatch: async (entries) => (sent.push(...entries), []), deadLetter: async () => {} };
    const log: string[] = [];
    const forwarder = new Forwarder({
      cluster: 'it',
      kube,
      sink,
      resources: () => historySource.watches(testCluster('it'), kube),
      definitions: [revisionPolicies],
      forget: () => forgetPolicies('it'),
      namespace: await createNamespace('drop'),
      stateFile: join(await mkdtemp(join(tmpdir(), 'outrigger-drop-')), 'state.json'),
      refreshMs: 60_000,
      log: (_level, m, f) => log.push(`${m} ${JSON.stringify(f)}`),
    });
    await forwarder.start();
    const name = uniqueName('bolts');
    try {
      await forwarder.synced();
      const before = forwarder.stats.watches;
      await applyManifests(admin, policy(name, 'drop.outrigger.test/v1', 'Bolt'));
      await eventually(() => forwarder.stats.watches === before + 1, 10_000);
      await admin.delete(revisionPolicies, { name });
      await eventually(() => forwarder.stats.watches === before, 10_000);
      expect(log).toContainEqual(expect.stringContaining(`watch stopped: no definition needs it {"resource":"${id}"}`));
    } finally {
      await forwarder.stop();
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });
});

const statefulSets = gvr('apps', 'v1', 'statefulsets');

describe("the router's hint", () => {
  test("a parent's event that changes its target state is marked targetChanged in its sync request; a label's change is not", async () => {
    await applyManifests(admin, STATEFULSET_POLICY);
    forgetPolicies();
    const ns = await createNamespace('hint');
    const old = await admin.create<KubeObject>(statefulSets, statefulSet('web', ns, 'registry.example/hint:1'));
    const relabelled = {
      ...old,
      metadata: { ...old.metadata, labels: { ...old.metadata.labels, tier: 'b' }, resourceVersion: '999999998' },
    };
    const changed = await admin.patch<KubeObject>(
      statefulSets,
      { name: 'web', namespace: ns },
      { spec: { template: { spec: { containers: [{ name: 'c', image: 'registry.example/hint:2' }] } } } },
      'strategic',
    );
    const requestFor = async (object: KubeObject, oldObject: KubeObject) => {
      const sink = new MemorySyncSink();
      const envelope = makeEnvelope({ cluster: 'it', type: 'modified', object, oldObject, source: 'test' });
      const out = await routeBatch(
        { Records: [sqsRecord({ body: JSON.stringify(envelope), group: messageGroupId(envelope), id: 'm0' })] },
        routerDeps(sink, [historySource]).deps,
      );
      expect(out.batchItemFailures).toEqual([]);
      return sink.sent.find((s) => s.target === 'history' && s.request.key.kind === 'StatefulSet')!.request;
    };
    expect(await requestFor(changed, old)).toMatchObject({ targetChanged: true, observed: { metadata: { uid: old.metadata.uid } } });
    expect(await requestFor(relabelled, old)).not.toHaveProperty('targetChanged');
  });
});

describe("trust boundary: a tenant's ControllerRevision against a Refuse policy", () => {
  test("a revision one team's own parent controls, without Outrigger's labels, stops only that parent's history, not the policy for every namespace; only the kind's CRD annotation, an admin's word, makes it the policy's matter", async () => {
    const group = `${uniqueName('refuse')}.example`;
    const gadgets = await ownKind(group, 'Gadget', 'gadgets');
    const name = uniqueName('gadgets');
    await applyManifests(admin, policy(name, `${group}/v1`, 'Gadget'));
    const tenant = await createNamespace('tenant');
    const other = await createNamespace('other');
    const gadget = (ns: string, n: string) =>
      admin.create<KubeObject>(gadgets, {
        apiVersion: `${group}/v1`,
        kind: 'Gadget',
        metadata: { name: n, namespace: ns },
        spec: { template: { image: 'app:1' } },
      });
    try {
      // The tenant's parent, and a revision it controls with none of Outrigger's labels: what anyone allowed to
      // create ControllerRevisions in its own namespace (or running a controller that versions its objects) writes.
      const mine = await gadget(tenant, 'mine');
      await admin.create(Resources.controllerRevisions, {
        apiVersion: 'apps/v1',
        kind: 'ControllerRevision',
        metadata: {
          name: 'mine-forged',
          namespace: tenant,
          ownerReferences: [{ apiVersion: `${group}/v1`, kind: 'Gadget', name: 'mine', uid: mine.metadata.uid!, controller: true }],
        },
        data: {},
        revision: 1,
      } as KubeObject);
      const theirs = await gadget(other, 'theirs');

      // The policy stays in effect for every namespace.
      expect(await reportPolicy(kube, 'it', name)).toMatchObject({ ready: true, reason: 'Valid' });
      forgetPolicies('it');
      const inEffect = (await listPolicies(kube, 'it')).valid.find((p) => p.name === name);
      expect(inEffect).toBeDefined();

      // Another namespace's parent gets its history; the tenant's own parent is the one refused.
      const holder = uniqueName('h');
      const deps = { kube, state: testState(), holder };
      const key = (o: KubeObject) => ({
        cluster: 'it',
        group,
        kind: 'Gadget',
        namespace: o.metadata.namespace!,
        name: o.metadata.name!,
        uid: o.metadata.uid!,
      });
      expect(await syncHistory(deps, inEffect!, key(theirs), ['Gadget/it/x/1/added'])).toMatchObject({ outcome: 'created' });
      expect(await history(other, 'theirs')).toEqual(['1:app:1']);
      expect(await syncHistory(deps, inEffect!, key(mine), ['Gadget/it/x/1/added'])).toMatchObject({
        outcome: 'skipped',
        reason: expect.stringMatching(/another controller keeps this parent's history \(revision mine-forged\)/),
      });
      expect(await history(tenant, 'mine')).toEqual([]);

      // An admin who says another controller keeps the kind's history (an annotation on its CRD, which only who
      // may update CRDs writes) makes the revision the policy's matter again: not in effect anywhere.
      await admin.patch(
        Resources.customResourceDefinitions,
        { name: `gadgets.${group}` },
        { metadata: { annotations: { [HISTORY_KEPT_BY_ANNOTATION]: 'gadget-operator' } } },
        'merge',
      );
      forgetHistoryKeepers();
      expect(await reportPolicy(kube, 'it', name)).toMatchObject({
        ready: false,
        reason: 'ForeignHistory',
        message: expect.stringContaining(`${tenant}/mine-forged`),
      });
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
      await admin.delete(Resources.customResourceDefinitions, { name: `gadgets.${group}` }).catch(() => undefined);
    }
  });
});
