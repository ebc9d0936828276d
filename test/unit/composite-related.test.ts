// The customize hook's rules (shared/composite/related.ts): parsed and scoped as Metacontroller documents them
// (hook v1), matched against objects, recorded on the parent, and the router's question of which parents a related
// object's change concerns (docs/controllers/compositecontroller.md#related-objects).
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { AnswerError } from '../../shared/composite/api.ts';
import {
  customizeKey,
  encodeRecorded,
  MAX_RELATED_RULES,
  parentAsks,
  parseCustomizeAnswer,
  recordedOn,
  relatedAnnotation,
  relatedMap,
  ruleSelects,
  scopeRule,
  type ScopedRule,
} from '../../shared/composite/related.ts';
import { gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { relatedSteps } from '../../shared/ownership/index.ts';
import { BatchResolver, type ControllerKind } from '../../shared/ownership/resolver.ts';

const configMaps = { group: '', version: 'v1', kind: 'ConfigMap', namespaced: true };
const namespaces = { group: '', version: 'v1', kind: 'Namespace', namespaced: false };
const parentIn = (namespace?: string, extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'example.test/v1',
  kind: 'Widget',
  metadata: { name: 'p', uid: 'p-uid', generation: 1, ...(namespace ? { namespace } : {}), ...extra },
});

describe('the customize answer', () => {
  test('gives rules of apiVersion, resource and one of labelSelector or names, with a namespace', () => {
    expect(
      parseCustomizeAnswer({
        relatedResources: [
          { apiVersion: 'v1', resource: 'configmaps', labelSelector: { matchLabels: { app: 'a' } } },
          { apiVersion: 'v1', resource: 'secrets', namespace: 'ns', names: ['a', 'b', 'a'] },
        ],
      }),
    ).toEqual([
      { apiVersion: 'v1', resource: 'configmaps', labelSelector: { matchLabels: { app: 'a' } } },
      { apiVersion: 'v1', resource: 'secrets', namespace: 'ns', names: ['a', 'b'] },
    ]);
    expect(parseCustomizeAnswer({})).toEqual([]);
    expect(parseCustomizeAnswer({ relatedResources: null })).toEqual([]);
  });

  test.each([
    [{ relatedResources: [{ apiVersion: 'v1', resource: 'configmaps', names: ['a'], labelSelector: {} }] }, /both names and labelSelector/],
    [{ relatedResources: [{ apiVersion: 'v1', resource: 'configmaps', namespaceSelector: {} }] }, /namespaceSelector is not served/],
    [{ relatedResources: [{ resource: 'configmaps' }] }, /apiVersion/],
    [
      {
        relatedResources: [
          { apiVersion: 'v1', resource: 'configmaps', labelSelector: { matchExpressions: [{ key: 'a', operator: 'Near' }] } },
        ],
      },
      /labelSelector/,
    ],
    [{ relatedResources: Array.from({ length: MAX_RELATED_RULES + 1 }, () => ({ apiVersion: 'v1', resource: 'configmaps' })) }, /at most/],
  ])('is refused with the rule named: %j', (answer, message) => {
    expect(() => parseCustomizeAnswer(answer)).toThrow(AnswerError);
    expect(() => parseCustomizeAnswer(answer)).toThrow(message);
  });
});

describe('a rule is held to the parent scope (hook v1)', () => {
  test("a namespaced parent's rule reads its own namespace, named or not, and no other", () => {
    const r = { apiVersion: 'v1', resource: 'configmaps' };
    expect(scopeRule(parentIn('a'), r, configMaps, 0).namespace).toBe('a');
    expect(scopeRule(parentIn('a'), { ...r, namespace: 'a' }, configMaps, 0).namespace).toBe('a');
    expect(() => scopeRule(parentIn('a'), { ...r, namespace: 'b' }, configMaps, 0)).toThrow(/in a may relate objects in a only/);
  });

  test("a cluster-scoped parent's rule reads the namespace it names, or every one; names need a namespace", () => {
    const r = { apiVersion: 'v1', resource: 'configmaps' };
    expect(scopeRule(parentIn(), { ...r, namespace: 'b' }, configMaps, 0).namespace).toBe('b');
    expect(scopeRule(parentIn(), r, configMaps, 0).namespace).toBeUndefined();
    expect(() => scopeRule(parentIn(), { ...r, names: ['x'] }, configMaps, 0)).toThrow(/without naming their namespace/);
  });

  test('a cluster-scoped kind takes no namespace, from any parent', () => {
    const r = { apiVersion: 'v1', resource: 'namespaces' };
    expect(scopeRule(parentIn('a'), r, namespaces, 0).namespace).toBeUndefined();
    expect(() => scopeRule(parentIn(), { ...r, namespace: 'b' }, namespaces, 0)).toThrow(/cluster-scoped/);
  });
});

describe("a rule's scope under a v2 customize hook, as Metacontroller v2's", () => {
  const r = { apiVersion: 'v1', resource: 'configmaps' };
  test('a namespaced parent may relate objects in another namespace, or in every one', () => {
    expect(scopeRule(parentIn('a'), { ...r, namespace: 'b' }, configMaps, 0, 'v2').namespace).toBe('b');
    expect(scopeRule(parentIn('a'), r, configMaps, 0, 'v2').namespace).toBeUndefined();
    expect(scopeRule(parentIn('a'), { ...r, names: ['x'] }, configMaps, 0, 'v2')).toMatchObject({ names: ['x'] });
    expect(scopeRule(parentIn(), { ...r, names: ['x'] }, configMaps, 0, 'v2').namespace).toBeUndefined();
    // v1 keeps its scope.
    expect(() => scopeRule(parentIn('a'), { ...r, namespace: 'b' }, configMaps, 0, 'v1')).toThrow(/in a may relate objects in a only/);
  });

  test('a rule in every namespace selects an object in any namespace; one naming a namespace, only there', () => {
    const cm = (namespace: string) => ({ group: '', kind: 'ConfigMap', namespace, name: 'x', labels: {} });
    expect(ruleSelects(scopeRule(parentIn('a'), r, configMaps, 0, 'v2'), cm('z'))).toBe(true);
    expect(ruleSelects(scopeRule(parentIn('a'), { ...r, namespace: 'b' }, configMaps, 0, 'v2'), cm('a'))).toBe(false);
    expect(ruleSelects(scopeRule(parentIn('a'), { ...r, namespace: 'b' }, configMaps, 0, 'v2'), cm('b'))).toBe(true);
  });

  test('a cluster-scoped kind still takes no namespace', () => {
    expect(() => scopeRule(parentIn('a'), { apiVersion: 'v1', resource: 'namespaces', namespace: 'b' }, namespaces, 0, 'v2')).toThrow(
      /cluster-scoped/,
    );
  });
});

const label = fc.constantFrom('app', 'tier', 'team');
const value = fc.constantFrom('a', 'b');
const labels = fc.dictionary(label, value, { maxKeys: 3 });
const ns = fc.constantFrom('n1', 'n2');
const objName = fc.constantFrom('x', 'y', 'z');
const candidate = fc.record({
  group: fc.constantFrom('', 'apps'),
  kind: fc.constantFrom('ConfigMap', 'Secret'),
  namespace: ns,
  name: objName,
  labels,
});
const scopedRule: fc.Arbitrary<ScopedRule> = fc
  .oneof(
    fc.record({ namespace: fc.option(ns, { nil: undefined }), names: fc.uniqueArray(objName, { minLength: 1 }) }),
    fc.record({
      namespace: fc.option(ns, { nil: undefined }),
      labelSelector: fc.option(fc.record({ matchLabels: labels }), { nil: undefined }),
    }),
  )
  .map((r) => ({
    group: '',
    version: 'v1',
    resource: 'configmaps',
    kind: 'ConfigMap',
    namespaced: true,
    ...Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)),
  }));

type Candidate = { group: string; kind: string; namespace: string; name: string; labels: Record<string, string> };

/** The rule's meaning, written out plainly. */
function selectsByHand(r: ScopedRule, o: Candidate): boolean {
  if (o.group !== r.group || o.kind !== r.kind) return false;
  if (r.namespace !== undefined && o.namespace !== r.namespace) return false;
  if (r.names) return r.names.includes(o.name);
  return Object.entries(r.labelSelector?.matchLabels ?? {}).every(([k, v]) => o.labels[k] === v);
}

describe('matching', () => {
  test('a rule selects an object by kind, namespace, then names or labels (none: all in scope)', () => {
    fc.assert(fc.property(scopedRule, candidate, (r, o) => expect(ruleSelects(r, o)).toBe(selectsByHand(r, o))));
  });

  test('the related map has an entry per rule kind, holding each object read under its v1 key', () => {
    const rule: ScopedRule = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
    const cm = (namespace: string, name: string): KubeObject => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace } });
    expect(
      relatedMap(parentIn('a'), [rule, { ...rule, resource: 'namespaces', kind: 'Namespace', namespaced: false }], [cm('a', 'x')]),
    ).toEqual({
      'ConfigMap.v1': { x: cm('a', 'x') },
      'Namespace.v1': {},
    });
    // A cluster-scoped parent's namespaced related objects are keyed namespace/name.
    expect(relatedMap(parentIn(), [rule], [cm('a', 'x'), cm('b', 'x')])).toEqual({
      'ConfigMap.v1': { 'a/x': cm('a', 'x'), 'b/x': cm('b', 'x') },
    });
  });
});

describe('the recorded answer (the cache)', () => {
  test('its key moves with the controller, the parent generation, labels and annotations, not with its own record', () => {
    const d = { uid: 'd', generation: 1 };
    const p = parentIn('a', { labels: { app: 'a' }, annotations: { note: 'x' } });
    const key = customizeKey(d, p);
    const recorded = { ...p, metadata: { ...p.metadata, annotations: { note: 'x', [relatedAnnotation('d')]: '{}' } } };
    expect(customizeKey(d, recorded)).toBe(key);
    expect(customizeKey({ uid: 'd', generation: 2 }, p)).not.toBe(key);
    expect(customizeKey(d, { ...p, metadata: { ...p.metadata, generation: 2 } })).not.toBe(key);
    expect(customizeKey(d, { ...p, metadata: { ...p.metadata, labels: { app: 'b' } } })).not.toBe(key);
    expect(customizeKey(d, { ...p, metadata: { ...p.metadata, annotations: { note: 'y' } } })).not.toBe(key);
  });

  test('reads back as written; a record that does not parse is none (asked again)', () => {
    fc.assert(
      fc.property(fc.array(scopedRule, { maxLength: 5 }), (rules) => {
        const value = encodeRecorded({ key: 'k', rules })!;
        const p = parentIn('a', { annotations: { [relatedAnnotation('d')]: value } });
        expect(recordedOn(p, 'd')).toEqual({ key: 'k', rules });
        expect(recordedOn(p, 'other')).toBeUndefined();
      }),
    );
    expect(recordedOn(parentIn('a', { annotations: { [relatedAnnotation('d')]: '{not json' } }), 'd')).toBeUndefined();
    expect(recordedOn(parentIn('a', { annotations: { [relatedAnnotation('d')]: '{"key":1}' } }), 'd')).toBeUndefined();
  });
});

describe('routing a related object', () => {
  const widgets = gvr('example.test', 'v1', 'widgets');
  const kind: ControllerKind = {
    resource: widgets,
    kind: 'Widget',
    namespaced: true,
    selectorOf: () => null,
    target: 'map',
    related: { kinds: [{ group: '', kind: 'ConfigMap' }], asks: (p, o) => parentAsks(p, 'd', o) },
  };

  test('reaches exactly the parents whose recorded rules select it, before or after its change, with one list per namespace', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ namespace: ns, rules: fc.array(scopedRule, { maxLength: 3 }) }), { maxLength: 6 }),
        candidate,
        fc.option(labels, { nil: undefined }),
        async (parents, o, oldLabels) => {
          const stored = parents.map((p, i) => {
            // As a namespaced parent's rules are scoped: its own namespace.
            const rules = p.rules.map((r) => ({ ...r, namespace: p.namespace }));
            return {
              rules,
              object: parentIn(p.namespace, {
                name: `p${i}`,
                uid: `u${i}`,
                annotations: { [relatedAnnotation('d')]: encodeRecorded({ key: 'k', rules })! },
              }),
            };
          });
          let lists = 0;
          const kube = {
            listAll: (_r: unknown, opts: { namespace?: string }) => {
              lists += 1;
              return Promise.resolve(stored.map((s) => s.object).filter((p) => p.metadata.namespace === opts.namespace));
            },
          } as unknown as KubeClient;
          const resolver = new BatchResolver(kube, 'c', [kind]);
          const object: KubeObject = {
            apiVersion: o.group ? `${o.group}/v1` : 'v1',
            kind: o.kind,
            metadata: { name: o.name, namespace: o.namespace, labels: o.labels },
          };
          const old = oldLabels && { ...object, metadata: { ...object.metadata, labels: oldLabels } };
          const routed = (await Promise.all(relatedSteps(object, old).map((s) => resolver.resolve(s)))).flat();
          const want = stored
            .filter((s) =>
              s.rules.some((r) => selectsByHand(r, o) || (old !== undefined && selectsByHand(r, { ...o, labels: oldLabels! }))),
            )
            .map((s) => s.object.metadata.name);
          expect([...new Set(routed.map((r) => r.key.name))].sort()).toEqual(want.sort());
          expect(lists).toBeLessThanOrEqual(o.group === '' && o.kind === 'ConfigMap' ? 1 : 0);
        },
      ),
    );
  });
});
