// What the forwarder sends of objects that are not parents: metadata only, and nothing for a status-only change,
// against the real apiserver (docs/operations/forwarder.md).
import { Forwarder, type EnvelopeSink, type ForwarderOptions } from '../../forwarder/forwarder.ts';
import { parseEnvelope, type Envelope } from '../../shared/envelope/index.ts';
import { gvr, Resources, type KubeObject } from '../../shared/kube/index.ts';
import { adminClient, createNamespace, eventually, outriggerClient } from '../testbed/index.ts';
import { statefulSet } from '../../local/fixtures.ts';

const secrets = gvr('', 'v1', 'secrets');
const statefulSets = gvr('apps', 'v1', 'statefulsets');
const admin = adminClient();

/** A template change of the StatefulSet `web`. */
const setImage = (ns: string, image: string) =>
  admin.patch(
    statefulSets,
    { name: 'web', namespace: ns },
    { spec: { template: { spec: { containers: [{ name: 'c', image }] } } } },
    'merge',
  );

/** A forwarder of the namespace's StatefulSets, as the outrigger identity, into `sent`. */
const statefulSetForwarder = (ns: string, sent: Envelope[], opts: Partial<ForwarderOptions>) =>
  new Forwarder({
    cluster: 'it',
    kube: outriggerClient(),
    sink: memorySink(sent),
    namespace: ns,
    resources: async () => [statefulSets],
    ...opts,
  });

function memorySink(into: Envelope[]): EnvelopeSink {
  return {
    sendBatch: async (entries) => {
      into.push(...entries.map((e) => parseEnvelope(e.body)));
      return [];
    },
    deadLetter: async () => {},
  };
}

describe('the forwarder sends what is not a parent as metadata only', () => {
  test("a pod's readiness flapping sends nothing, its label change sends its metadata alone; a Secret's data never leaves, not even in last-applied-configuration; a parent is sent whole", async () => {
    const ns = await createNamespace('fwd-meta');
    await admin.create(Resources.serviceAccounts, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default', namespace: ns },
    });
    const sent: Envelope[] = [];
    const forwarder = new Forwarder({
      cluster: 'it',
      // The outrigger identity may not read Secrets; the forwarder's own role may (as metadata).
      kube: admin,
      sink: memorySink(sent),
      namespace: ns,
      resources: async () => [Resources.pods, secrets, statefulSets],
      wholeObjects: async () => [statefulSets, secrets],
      refreshMs: 60_000,
    });
    await forwarder.start();
    const of = (name: string) => sent.filter((e) => e.data.object.metadata.name === name);
    try {
      await forwarder.synced();
      const pod = await admin.create<KubeObject>(Resources.pods, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p', namespace: ns, labels: { app: 'a' } },
        spec: { containers: [{ name: 'c', image: 'x' }] },
      });
      await admin.create(secrets, {
        apiVersion: 'v1',
        kind: 'Secret',
        // As `kubectl apply` writes it: the whole manifest, data included, in an annotation.
        metadata: {
          name: 's',
          namespace: ns,
          annotations: {
            'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({ kind: 'Secret', stringData: { password: 'hunter2' } }),
          },
        },
        stringData: { password: 'hunter2' },
      });
      await admin.create(statefulSets, statefulSet('web', ns, 'x'));
      await eventually(() => of('p').length === 1 && of('s').length === 1 && of('web').length >= 1);
      expect(pod.metadata.generation).toBeDefined();

      for (const status of ['True', 'False', 'True']) {
        await admin.patch(
          Resources.pods,
          { name: 'p', namespace: ns, subresource: 'status' },
          { status: { conditions: [{ type: 'Ready', status, lastTransitionTime: new Date().toISOString() }] } },
          'merge',
        );
      }
      await eventually(() => forwarder.stats.statusOnly === 3);
      await admin.patch(Resources.pods, { name: 'p', namespace: ns }, { metadata: { labels: { app: 'b' } } }, 'merge');
      await eventually(() => of('p').length === 2);
      // Every event of the pod so far: its creation and its label change, and no status change.
      expect(of('p').map((e) => [e.type, e.data.object.metadata.labels?.app])).toEqual([
        ['dev.outrigger.watch.added', 'a'],
        ['dev.outrigger.watch.modified', 'b'],
      ]);
      for (const e of of('p')) {
        expect(e.data.object).toMatchObject({ apiVersion: 'v1', kind: 'Pod' });
        expect(e.data.object).not.toHaveProperty('spec');
        expect(e.data.object).not.toHaveProperty('status');
      }
      const secret = of('s')[0]!.data.object;
      expect(secret).toMatchObject({ apiVersion: 'v1', kind: 'Secret' });
      expect(JSON.stringify(of('s'))).not.toContain(Buffer.from('hunter2').toString('base64'));
      expect(JSON.stringify(of('s'))).not.toContain('hunter2');
      expect(secret).not.toHaveProperty('data');
      // What is sent as metadata only carries no annotations and no managed fields (which name the data's keys).
      for (const e of [...of('s'), ...of('p')]) {
        expect(e.data.object.metadata).not.toHaveProperty('annotations');
        expect(e.data.object.metadata).not.toHaveProperty('managedFields');
      }
      expect(of('web')[0]!.data.object).toHaveProperty('spec.template');
    } finally {
      await forwarder.stop();
    }
  });

  test("a parent's status steps that none of its controllers reads send nothing; its current revision moving, or its spec, does", async () => {
    const ns = await createNamespace('fwd-status-reads');
    const sent: Envelope[] = [];
    const forwarder = statefulSetForwarder(ns, sent, {
      wholeObjects: async () => [statefulSets],
      // As a StatefulSet RevisionPolicy's history reads it (functions/history/policies.ts).
      statusReads: async () => [{ resource: statefulSets, paths: ['status.currentRevision', 'status.updateRevision'] }],
      refreshMs: 60_000,
    });
    await forwarder.start();
    const status = (s: Record<string, unknown>) =>
      admin.patch(statefulSets, { name: 'web', namespace: ns, subresource: 'status' }, { status: s }, 'merge');
    try {
      await forwarder.synced();
      await admin.create(statefulSets, statefulSet('web', ns, 'x'));
      await eventually(() => sent.length === 1);
      // A rollout's steps: replicas counted up, pods ready one after another.
      await status({ replicas: 1, currentRevision: 'web-1', updateRevision: 'web-1' });
      await eventually(() => sent.length === 2);
      for (const ready of [1, 2, 3]) await status({ replicas: 3, readyReplicas: ready, availableReplicas: ready });
      await eventually(() => forwarder.stats.unreadStatus === 3);
      // The revisions it names move: sent.
      await status({ updateRevision: 'web-2' });
      await eventually(() => sent.length === 3);
      await setImage(ns, 'y');
      await eventually(() => sent.length === 4);
      expect(sent.map((e) => (e.data.object.status as { updateRevision?: string } | undefined)?.updateRevision)).toEqual([
        undefined,
        'web-1',
        'web-2',
        'web-2',
      ]);
      expect(forwarder.stats.unreadStatus).toBe(3);
    } finally {
      await forwarder.stop();
    }
  });

  test('a resource that becomes a parent is watched whole from then on, without sending its objects again', async () => {
    const ns = await createNamespace('fwd-reshape');
    const sent: Envelope[] = [];
    let whole: (typeof statefulSets)[] = [];
    const forwarder = statefulSetForwarder(ns, sent, {
      wholeObjects: async () => whole,
      definitions: [],
      refreshMs: 500,
    });
    await forwarder.start();
    try {
      await forwarder.synced();
      await admin.create(statefulSets, statefulSet('web', ns, 'x'));
      await eventually(() => sent.length === 1);
      expect(sent[0]!.data.object).not.toHaveProperty('spec');
      whole = [statefulSets];
      // The next refresh (every 500 ms) restarts the watch whole; its relist finds nothing newer than was sent.
      await new Promise((r) => setTimeout(r, 1_500));
      await forwarder.synced();
      expect(sent).toHaveLength(1);
      await setImage(ns, 'y');
      await eventually(() => sent.length === 2);
      expect(sent[1]!.data.object).toHaveProperty('spec.template.spec.containers', [expect.objectContaining({ image: 'y' })]);
    } finally {
      await forwarder.stop();
    }
  });
});
