// What the forwarder keeps of a watched object (forwarder/skeleton.ts): a skeleton decides status-only changes
// exactly as the whole object would, and carries nothing of the object's size.
import fc from 'fast-check';
import { statusOnly } from '../../forwarder/metadata.ts';
import { kept, MAX_KEPT_WHOLE_BYTES, skeletonOf } from '../../forwarder/skeleton.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const pod = (metadata: Record<string, unknown>, rest: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', namespace: 'ns', uid: 'u1', resourceVersion: '10', ...metadata },
  ...rest,
});

const metadata = fc.record(
  {
    generation: fc.constantFrom(1, 2),
    resourceVersion: fc.constantFrom('10', '11'),
    labels: fc.dictionary(fc.constantFrom('app', 'tier'), fc.constantFrom('a', 'b')),
    annotations: fc.dictionary(fc.constantFrom('x', 'y'), fc.constantFrom('1', '2', 'z'.repeat(10_000))),
    finalizers: fc.constantFrom(['f'], []),
    managedFields: fc.constantFrom([{ manager: 'kubelet' }], [{ manager: 'kubectl' }]),
  },
  { requiredKeys: [] },
);

describe('the skeleton', () => {
  test('property: statusOnly against the skeleton says what it says against the whole object', () => {
    fc.assert(
      // Half the time a status change of the same object: only its resourceVersion and managed fields move.
      fc.property(metadata, metadata, fc.boolean(), (a, b, sameMetadata) => {
        const old = pod(a);
        const next = pod(sameMetadata ? { ...a, resourceVersion: '12', managedFields: [{ manager: 'kubelet' }] } : b);
        return statusOnly(kept(old, false), next) === statusOnly(old, next);
      }),
    );
  });

  test('keys in another order are the same metadata', () => {
    const old = pod({ generation: 1, labels: { a: '1', b: '2' } });
    const next = pod({ labels: { b: '2', a: '1' }, generation: 1, resourceVersion: '11' });
    expect(statusOnly(kept(old, false), next)).toBe(true);
  });

  test('keeps what routing reads, nothing of the annotations, the spec or the managed fields', () => {
    const big = pod(
      {
        generation: 1,
        labels: { app: 'a' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'w', uid: 'o', controller: true }],
        annotations: { blob: 'x'.repeat(200_000) },
        managedFields: [{ manager: 'kubectl' }],
      },
      { spec: { containers: [{ name: 'c', image: 'x' }] } },
    );
    expect(skeletonOf(big)).toEqual({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'p',
        namespace: 'ns',
        uid: 'u1',
        resourceVersion: '10',
        labels: { app: 'a' },
        ownerReferences: big.metadata.ownerReferences,
      },
    });
  });

  test(`a parent up to ${MAX_KEPT_WHOLE_BYTES} bytes is kept whole; a larger one, and any child, as a skeleton`, () => {
    const small = pod({ generation: 1 }, { spec: { replicas: 1 } });
    const large = pod({ generation: 1, annotations: { blob: 'x'.repeat(MAX_KEPT_WHOLE_BYTES) } });
    expect(kept(small, true)).toBe(small);
    expect(kept(large, true)).toEqual(skeletonOf(large));
    expect(kept(small, false)).toEqual(skeletonOf(small));
  });
});
