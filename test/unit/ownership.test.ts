import fc from 'fast-check';
import type { KubeObject, OwnerReference } from '../../shared/kube/index.ts';
import {
  compileSelector,
  controllerOf,
  dedupeKeys,
  isControlledBy,
  isOwnedBy,
  matches,
  newControllerRef,
  newOwnerRef,
  ordinalNameGuard,
  planClaim,
  routeEvent,
  selectorString,
  type LabelSelector,
  type ParentIdentity,
} from '../../shared/ownership/index.ts';

const parent = (extra: Partial<ParentIdentity['metadata']> = {}): ParentIdentity => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 'web', namespace: 'ns', uid: 'parent-uid', ...extra },
});
const ref = (uid: string, controller = true): OwnerReference => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  name: `p-${uid}`,
  uid,
  controller,
});
const child = (
  name: string,
  labels: Record<string, string> = {},
  owners: OwnerReference[] = [],
  extra: Partial<KubeObject['metadata']> = {},
): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'ControllerRevision',
  metadata: { name, namespace: 'ns', uid: `uid-${name}`, resourceVersion: '1', labels, ownerReferences: owners, ...extra },
});

describe('ControllerRef helpers', () => {
  test('the controller is the one ref with controller: true, and identity is by uid', () => {
    const obj = child('a', {}, [ref('x', false), ref('y')]);
    expect(controllerOf(obj)?.uid).toBe('y');
    expect(isControlledBy(obj, { metadata: { uid: 'y' } })).toBe(true);
    expect(isControlledBy(obj, { metadata: { uid: 'x' } })).toBe(false);
    expect(newControllerRef(parent())).toEqual({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      name: 'web',
      uid: 'parent-uid',
      controller: true,
      blockOwnerDeletion: true,
    });
  });
});

describe('routing watch events (docs/controllers/ownership-and-routing.md#the-router)', () => {
  const owned = child('c', { app: 'a' }, [ref('owner-1')]);
  const orphan = child('c', { app: 'a' });
  const revision = { group: 'apps', kind: 'ControllerRevision' };
  test.each<[string, ReturnType<typeof routeEvent>, ReturnType<typeof routeEvent>]>([
    [
      'added with a ControllerRef: only its controller',
      routeEvent('added', owned),
      [{ by: 'controllerRef', ...revision, ref: ref('owner-1'), namespace: 'ns' }],
    ],
    [
      'modified with a ControllerRef: only its controller',
      routeEvent('modified', owned, owned),
      [{ by: 'controllerRef', ...revision, ref: ref('owner-1'), namespace: 'ns' }],
    ],
    [
      'deleted with a ControllerRef: only its controller',
      routeEvent('deleted', owned),
      [{ by: 'controllerRef', ...revision, ref: ref('owner-1'), namespace: 'ns' }],
    ],
    [
      'ControllerRef moved: the new and the previous controller',
      routeEvent('modified', child('c', {}, [ref('owner-2')]), owned),
      [
        { by: 'controllerRef', ...revision, ref: ref('owner-2'), namespace: 'ns' },
        { by: 'controllerRef', ...revision, ref: ref('owner-1'), namespace: 'ns' },
      ],
    ],
    [
      'update removed the ControllerRef: the previous controller and every matching one',
      routeEvent('modified', orphan, owned),
      [
        { by: 'controllerRef', ...revision, ref: ref('owner-1'), namespace: 'ns' },
        { by: 'selector', ...revision, labels: { app: 'a' }, namespace: 'ns' },
      ],
    ],
    [
      'orphan added: every matching controller',
      routeEvent('added', orphan),
      [{ by: 'selector', ...revision, labels: { app: 'a' }, namespace: 'ns' }],
    ],
    ['orphan deleted: none', routeEvent('deleted', orphan), []],
    [
      'orphan updated, labels changed: every matching controller',
      routeEvent('modified', child('c', { app: 'b' }), orphan),
      [{ by: 'selector', ...revision, labels: { app: 'b' }, namespace: 'ns' }],
    ],
    ['orphan updated, labels unchanged: none', routeEvent('modified', child('c', { app: 'a' }, [], { resourceVersion: '2' }), orphan), []],
    [
      'orphan updated, previous state unknown: every matching controller',
      routeEvent('modified', orphan),
      [{ by: 'selector', ...revision, labels: { app: 'a' }, namespace: 'ns' }],
    ],
    [
      'orphan being deleted: none, nobody may adopt it',
      routeEvent('modified', child('c', { app: 'b' }, [], { deletionTimestamp: '2026-01-01T00:00:00Z' }), orphan),
      [],
    ],
  ])('%s', (_, actual, expected) => {
    expect(actual).toEqual(expected);
  });

  test('sync keys are deduplicated within a batch', () => {
    const k = { cluster: 'c', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name: 'web', uid: 'u' };
    expect(dedupeKeys([k, { ...k }, { ...k, uid: 'v' }, k])).toEqual([k, { ...k, uid: 'v' }]);
  });
});

describe('label selectors', () => {
  test.each<[LabelSelector | null | undefined, Record<string, string> | undefined, boolean]>([
    [{}, { a: '1' }, true],
    [{}, undefined, true],
    [null, { a: '1' }, false],
    [undefined, {}, false],
    [{ matchLabels: { a: '1' } }, { a: '1', b: '2' }, true],
    [{ matchLabels: { a: '1' } }, { a: '2' }, false],
    [{ matchExpressions: [{ key: 'a', operator: 'In', values: ['1', '2'] }] }, { a: '2' }, true],
    [{ matchExpressions: [{ key: 'a', operator: 'In', values: ['1'] }] }, {}, false],
    [{ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['1'] }] }, {}, true],
    [{ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['1'] }] }, { a: '1' }, false],
    [{ matchExpressions: [{ key: 'a', operator: 'Exists' }] }, { a: '' }, true],
    [{ matchExpressions: [{ key: 'a', operator: 'DoesNotExist' }] }, { a: '' }, false],
    [{ matchLabels: { a: '1' }, matchExpressions: [{ key: 'b', operator: 'Exists' }] }, { a: '1' }, false],
  ])('%j matches %j: %s', (selector, labels, expected) => {
    expect(matches(compileSelector(selector), labels)).toBe(expected);
  });

  test.each<[LabelSelector, string]>([
    [{ matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }, 'matchExpressions[0]: operator In needs at least one value'],
    [{ matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }, 'matchExpressions[0]: operator Exists takes no values'],
    [{ matchExpressions: [{ key: 'a', operator: 'Gt' as 'In', values: ['1'] }] }, 'matchExpressions[0]: unknown operator "Gt"'],
    [{ matchLabels: { 'bad key!': 'x' } }, 'matchLabels: key "bad key!" is not a valid label key'],
    [{ matchLabels: { a: 'no spaces' } }, 'matchLabels[a]: value "no spaces" is not a valid label value'],
  ])('rejects %j', (selector, message) => {
    expect(() => compileSelector(selector)).toThrow(`invalid label selector: ${message}`);
  });

  test('string forms', () => {
    expect(selectorString(compileSelector({}))).toBe('');
    expect(selectorString(compileSelector(null))).toBeUndefined();
    expect(
      selectorString(
        compileSelector({
          matchLabels: { app: 'web' },
          matchExpressions: [
            { key: 'tier', operator: 'In', values: ['b', 'a'] },
            { key: 'env', operator: 'NotIn', values: ['dev'] },
            { key: 'x', operator: 'Exists' },
            { key: 'y', operator: 'DoesNotExist' },
          ],
        }),
      ),
    ).toBe('app=web,tier in (a,b),env!=dev,x,!y');
  });
});

describe('claim planning', () => {
  const labels = fc.dictionary(fc.constantFrom('app', 'tier'), fc.constantFrom('a', 'b'), { maxKeys: 2 });
  const owner = fc.constantFrom<OwnerReference[]>([], [ref('parent-uid')], [ref('someone-else')], [ref('x', false)]);
  const children = fc
    .uniqueArray(fc.tuple(fc.stringMatching(/^web-[0-9]$|^[a-z]{1,3}$/), labels, owner), { selector: (t) => t[0], maxLength: 12 })
    .map((ts) => ts.map(([n, l, o]) => child(n, l, o)));
  const selector = compileSelector({ matchLabels: { app: 'a' } });

  /** What the cluster looks like after the plan is carried out, as claim() does: an adoption replaces the child's references to the parent. */
  const apply = (plan: ReturnType<typeof planClaim>, ref: OwnerReference = newControllerRef(parent())): KubeObject[] => [
    ...plan.owned,
    ...plan.ignored,
    ...plan.adopt.map((c) => ({
      ...c,
      metadata: { ...c.metadata, ownerReferences: [...(c.metadata.ownerReferences ?? []).filter((r) => r.uid !== 'parent-uid'), ref] },
    })),
    ...plan.release.map((c) => ({
      ...c,
      metadata: { ...c.metadata, ownerReferences: (c.metadata.ownerReferences ?? []).filter((r) => r.uid !== 'parent-uid') },
    })),
  ];

  test('is idempotent: after carrying out a plan, the next plan adopts and releases nothing', () => {
    fc.assert(
      fc.property(children, (cs) => {
        const again = planClaim(parent(), selector, apply(planClaim(parent(), selector, cs)));
        expect(again.adopt).toEqual([]);
        expect(again.release).toEqual([]);
      }),
    );
  });

  test('never plans to change an object another controller owns, and counts only what it owns', () => {
    fc.assert(
      fc.property(children, (cs) => {
        const plan = planClaim(parent(), selector, cs);
        for (const c of [...plan.adopt, ...plan.release, ...plan.owned]) {
          const r = controllerOf(c);
          expect(r === undefined || r.uid === 'parent-uid').toBe(true);
        }
        for (const c of plan.owned) expect(isControlledBy(c, parent())).toBe(true);
        expect(plan.owned.length + plan.adopt.length + plan.release.length + plan.ignored.length).toBe(cs.length);
      }),
    );
  });

  test('a parent being deleted adopts nothing and releases nothing', () => {
    fc.assert(
      fc.property(children, (cs) => {
        const plan = planClaim(parent({ deletionTimestamp: '2026-01-01T00:00:00Z' }), selector, cs);
        expect(plan.adopt).toEqual([]);
        expect(plan.release).toEqual([]);
      }),
    );
  });

  describe("by a plain ownerReference (reference: 'owner', docs/controllers/history.md#coexistence)", () => {
    const plain = fc.constantFrom<OwnerReference[]>(
      [],
      [ref('parent-uid')],
      [ref('parent-uid', false)],
      [ref('someone-else')],
      [ref('x', false)],
    );
    const mixed = fc
      .uniqueArray(fc.tuple(fc.stringMatching(/^[a-z]{1,3}$/), labels, plain), { selector: (t) => t[0], maxLength: 12 })
      .map((ts) => ts.map(([n, l, o]) => child(n, l, o)));
    const owner = { reference: 'owner' } as const;
    const applyOwner = (plan: ReturnType<typeof planClaim>) => apply(plan, newOwnerRef(parent()));

    test('a child with no controller that references the parent is its own; adopting adds no ControllerRef; a second plan changes nothing', () => {
      fc.assert(
        fc.property(mixed, (cs) => {
          const plan = planClaim(parent(), selector, cs, owner);
          for (const c of plan.owned) expect(isOwnedBy(c, parent())).toBe(true);
          for (const c of [...plan.adopt, ...plan.release, ...plan.owned])
            expect([undefined, 'parent-uid']).toContain(controllerOf(c)?.uid);
          const after = applyOwner(plan);
          for (const c of after)
            if (controllerOf(c)?.uid === 'parent-uid') expect(cs.find((o) => o.metadata.name === c.metadata.name)).toBe(c);
          const again = planClaim(parent(), selector, after, owner);
          expect(again.adopt).toEqual([]);
          expect(again.release).toEqual([]);
        }),
      );
    });

    test('the same child is an orphan to a parent that claims by ControllerRef', () => {
      const c = child('a', { app: 'a' }, [ref('parent-uid', false)]);
      expect(planClaim(parent(), selector, [c], owner).owned).toEqual([c]);
      expect(planClaim(parent(), selector, [c]).adopt).toEqual([c]);
      expect(planClaim(parent(), selector, [child('b', { app: 'b' }, [ref('parent-uid', false)])], owner).release).toHaveLength(1);
      expect(newOwnerRef(parent())).toEqual({ ...newControllerRef(parent()), controller: false });
    });
  });

  test('adopts only matching orphans in its namespace that are not being deleted, and fit the name guard', () => {
    const cs = [
      child('web-0', { app: 'a' }),
      child('web-x', { app: 'a' }),
      child('web-1', { app: 'b' }),
      child('web-2', { app: 'a' }, [], { namespace: 'other' }),
      child('web-3', { app: 'a' }, [], { deletionTimestamp: '2026-01-01T00:00:00Z' }),
    ];
    expect(planClaim(parent(), selector, cs, { nameGuard: ordinalNameGuard }).adopt.map((c) => c.metadata.name)).toEqual(['web-0']);
    expect(planClaim(parent(), selector, cs).adopt.map((c) => c.metadata.name)).toEqual(['web-0', 'web-x']);
  });
});
