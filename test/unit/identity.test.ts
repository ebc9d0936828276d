// The pure decisions behind the ServiceAccount boundary (docs/operations/security.md#serviceaccounts-a-definition-names):
// an account serves only the definitions its own annotation names, and a kind stays with its first holder.
import fc from 'fast-check';
import { ALLOWED_CONTROLLERS_ANNOTATION, accountConsents, consumerRef, firstHolderFirst } from '../../shared/identity.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const consent = (value: string | undefined): Record<string, string> =>
  value === undefined ? {} : { [ALLOWED_CONTROLLERS_ANNOTATION]: value };

describe('a ServiceAccount serves only the definitions its annotation names', () => {
  test('the named controller, and no other of any name or kind', () => {
    const ann = consent('mapcontroller/snapshotschedule-controller, revisionpolicy/deployments');
    expect(accountConsents(ann, { kind: 'MapController', name: 'snapshotschedule-controller' })).toBe(true);
    expect(accountConsents(ann, { kind: 'RevisionPolicy', name: 'deployments' })).toBe(true);
    expect(accountConsents(ann, { kind: 'MapController', name: 'aaa-snap' })).toBe(false);
    expect(accountConsents(ann, { kind: 'RevisionPolicy', name: 'snapshotschedule-controller' })).toBe(false);
    expect(accountConsents(ann, { kind: 'MapController', name: 'deployments' })).toBe(false);
  });

  test('no annotation, an empty one, or entries without a kind consent to nothing', () => {
    for (const ann of [undefined, {}, consent(''), consent(' , '), consent('snapshotschedule-controller'), consent('*'), consent('/x')])
      expect(accountConsents(ann, { kind: 'MapController', name: 'snapshotschedule-controller' })).toBe(false);
  });

  test('`<kind>/*` names every definition of that kind only; the kind is case-blind, the name is not', () => {
    expect(accountConsents(consent('mapcontroller/*'), { kind: 'MapController', name: 'any' })).toBe(true);
    expect(accountConsents(consent('mapcontroller/*'), { kind: 'RevisionPolicy', name: 'any' })).toBe(false);
    expect(accountConsents(consent('MapController/a'), { kind: 'MapController', name: 'a' })).toBe(true);
    expect(accountConsents(consent('mapcontroller/A'), { kind: 'MapController', name: 'a' })).toBe(false);
  });

  test('property: an account consents exactly to the refs listed (no prefix or substring match)', () => {
    const name = fc.stringMatching(/^[a-z0-9][a-z0-9.-]{0,20}$/);
    const kind = fc.constantFrom('MapController' as const, 'RevisionPolicy' as const);
    fc.assert(
      fc.property(fc.array(fc.record({ kind, name }), { maxLength: 5 }), fc.record({ kind, name }), (listed, asked) => {
        const ann = consent(listed.map(consumerRef).join(','));
        const expected = listed.some((l) => l.kind === asked.kind && l.name === asked.name);
        expect(accountConsents(ann, asked)).toBe(expected);
      }),
    );
  });
});

const def = (name: string, created: string | undefined, uid: string): KubeObject => ({
  apiVersion: 'metacontroller.k8s.io/v1alpha1',
  kind: 'MapController',
  metadata: { name, uid, ...(created ? { creationTimestamp: created } : {}) },
});

describe('a kind stays with the definition that held it first, whatever names come later', () => {
  test('the older wins over an earlier name; same second: the uid decides; no timestamp: last', () => {
    const running = def('snapshotschedule-controller', '2026-11-26T10:00:00Z', 'b');
    const later = def('aaa-snap', '2026-11-26T10:00:01Z', 'a');
    expect([later, running].sort(firstHolderFirst).map((d) => d.metadata.name)).toEqual(['snapshotschedule-controller', 'aaa-snap']);
    const sameSecond = def('aaa-snap', '2026-11-26T10:00:00Z', 'c');
    expect([sameSecond, running].sort(firstHolderFirst)[0]).toBe(running);
    expect([def('x', undefined, '0'), running].sort(firstHolderFirst)[0]).toBe(running);
  });

  test('property: the order does not depend on names or on the order listed', () => {
    const item = fc.record({
      name: fc.stringMatching(/^[a-z]{1,8}$/),
      t: fc.integer({ min: 0, max: 50 }),
      uid: fc.uuid(),
    });
    fc.assert(
      fc.property(fc.uniqueArray(item, { selector: (i) => i.uid, minLength: 1, maxLength: 8 }), (items) => {
        const objs = items.map((i) => def(i.name, new Date(Date.UTC(2026, 0, 1, 0, 0, i.t)).toISOString(), i.uid));
        const sorted = [...objs].sort(firstHolderFirst).map((o) => o.metadata.uid);
        const renamed = [...objs].reverse().map((o) => ({ ...o, metadata: { ...o.metadata, name: `z${o.metadata.name ?? ''}` } }));
        expect([...renamed].sort(firstHolderFirst).map((o) => o.metadata.uid)).toEqual(sorted);
        const first = items.reduce((a, b) => (b.t < a.t || (b.t === a.t && b.uid < a.uid) ? b : a));
        expect(sorted[0]).toBe(first.uid);
      }),
    );
  });
});
