// What the forwarder sends of a resource watched as metadata only (forwarder/metadata.ts).
import fc from 'fast-check';
import { statusOnly, unreadStatusChange, watchedAsMetadata } from '../../forwarder/metadata.ts';
import { gvr, gvrString, type KubeObject } from '../../shared/kube/index.ts';

const pod = (metadata: Record<string, unknown>): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', namespace: 'ns', uid: 'u1', ...metadata },
});
const base = {
  generation: 1,
  resourceVersion: '10',
  labels: { app: 'a' },
  managedFields: [{ manager: 'kubelet', time: '2026-01-01T00:00:00Z' }],
};

describe('statusOnly', () => {
  test('a change of the resourceVersion and managed fields alone, generation kept, is a status change', () => {
    expect(
      statusOnly(pod(base), pod({ ...base, resourceVersion: '11', managedFields: [{ manager: 'kubelet', time: '2026-01-01T00:00:01Z' }] })),
    ).toBe(true);
  });

  test('any other metadata change is sent: labels, annotations, ownerReferences, finalizers, deletion, generation', () => {
    const changes: Array<Record<string, unknown>> = [
      { labels: { app: 'b' } },
      { annotations: { a: 'b' } },
      { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'w', uid: 'o', controller: true }] },
      { finalizers: ['f'] },
      { deletionTimestamp: '2026-01-01T00:00:00Z' },
      { generation: 2 },
    ];
    for (const change of changes) expect(statusOnly(pod(base), pod({ ...base, resourceVersion: '11', ...change }))).toBe(false);
  });

  test('without a generation (a ConfigMap), or without the old object, it is sent', () => {
    const { generation: _, ...noGeneration } = base;
    expect(statusOnly(pod(noGeneration), pod({ ...noGeneration, resourceVersion: '11' }))).toBe(false);
    expect(statusOnly(undefined, pod(base))).toBe(false);
  });

  test('property: never a status change when a metadata field other than resourceVersion and managedFields differs', () => {
    const key = fc.constantFrom('labels', 'annotations', 'finalizers', 'deletionTimestamp', 'generation', 'ownerReferences', 'name');
    fc.assert(
      fc.property(key, fc.jsonValue(), fc.string(), (field, value, rv) => {
        const before = pod(base);
        const after = pod({ ...base, resourceVersion: rv, [field]: value });
        fc.pre(JSON.stringify(before.metadata[field]) !== JSON.stringify(value));
        return !statusOnly(before, after);
      }),
    );
  });
});

describe('unreadStatusChange', () => {
  const READS = ['status.currentRevision', 'status.updateRevision'];
  const set = (status: Record<string, unknown>, metadata: Record<string, unknown> = {}): KubeObject => ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: 'ns', uid: 'u1', ...base, ...metadata },
    spec: { replicas: 3 },
    status,
  });
  const before = set({ replicas: 3, readyReplicas: 1, currentRevision: 'web-1', updateRevision: 'web-2' });

  test("a status step that leaves the read paths alone is not sent; a read path's change, any metadata change, or no old object is", () => {
    expect(
      unreadStatusChange(
        before,
        set({ replicas: 3, readyReplicas: 2, currentRevision: 'web-1', updateRevision: 'web-2' }, { resourceVersion: '11' }),
        READS,
      ),
    ).toBe(true);
    expect(
      unreadStatusChange(
        before,
        set({ replicas: 3, readyReplicas: 3, currentRevision: 'web-2', updateRevision: 'web-2' }, { resourceVersion: '11' }),
        READS,
      ),
    ).toBe(false);
    expect(
      unreadStatusChange(before, set({ replicas: 3, readyReplicas: 2, updateRevision: 'web-2' }, { resourceVersion: '11' }), READS),
    ).toBe(false);
    expect(unreadStatusChange(before, set(before.status as Record<string, unknown>, { resourceVersion: '11', generation: 2 }), READS)).toBe(
      false,
    );
    expect(
      unreadStatusChange(before, set(before.status as Record<string, unknown>, { resourceVersion: '11', annotations: { a: 'b' } }), READS),
    ).toBe(false);
    expect(unreadStatusChange(undefined, before, READS)).toBe(false);
  });

  test('property: whatever else of the status moves, a change at a read path is always sent', () => {
    fc.assert(
      fc.property(fc.constantFrom(...READS), fc.jsonValue(), fc.dictionary(fc.string(), fc.jsonValue()), (path, value, rest) => {
        const field = path.split('.')[1]!;
        const after = set({ ...(before.status as Record<string, unknown>), ...rest, [field]: value }, { resourceVersion: '12' });
        fc.pre(JSON.stringify((before.status as Record<string, unknown>)[field]) !== JSON.stringify(value));
        return !unreadStatusChange(before, after, READS);
      }),
    );
  });
});

describe('watchedAsMetadata', () => {
  const statefulSets = gvr('apps', 'v1', 'statefulsets');
  test('a parent is watched whole, anything else as metadata; without a list of parents, everything whole', () => {
    const whole = new Set([gvrString(statefulSets)]);
    expect(watchedAsMetadata(statefulSets, whole)).toBe(false);
    expect(watchedAsMetadata(gvr('', 'v1', 'pods'), whole)).toBe(true);
    expect(watchedAsMetadata(gvr('', 'v1', 'pods'), undefined)).toBe(false);
  });

  test("a Secret's data never leaves the cluster, even as a parent", () => {
    const secrets = gvr('', 'v1', 'secrets');
    expect(watchedAsMetadata(secrets, new Set([gvrString(secrets)]))).toBe(true);
    expect(watchedAsMetadata(secrets, undefined)).toBe(true);
  });
});
