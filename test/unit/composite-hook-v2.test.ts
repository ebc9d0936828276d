// Hook version v2 of CompositeController and DecoratorController hooks (docs/controllers/compositecontroller.md#hook-versions),
// the pure part: the uniform map of children, the request's field names per kind and version, and strict versus
// loose reading of answers (unknown fields; fields named twice, found in the answer's text).
import fc from 'fast-check';
import {
  AnswerError,
  compositeAnswer,
  DefinitionError,
  parseDecoratorController,
  toHook,
  decoratorAnswer,
  parseCompositeAnswer,
  parseCompositeController,
  parseDecoratorAnswer,
  strictAnswers,
} from '../../shared/composite/api.ts';
import { hookRequest } from '../../shared/composite/request.ts';
import { childKey, childMap, type ChildKind } from '../../shared/composite/plan.ts';
import { duplicateKey } from '../../shared/hooks/strict.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const controllerObject = (spec: unknown): KubeObject =>
  ({ apiVersion: 'metacontroller.k8s.io/v1alpha1', kind: 'CompositeController', metadata: { name: 'c', uid: 'cu' }, spec }) as KubeObject;
const spec = (sync: unknown) => ({
  parentResource: { apiVersion: 'ctl.example.com/v1', resource: 'catsets' },
  childResources: [{ apiVersion: 'v1', resource: 'pods' }],
  hooks: { sync },
});
const kinds: ChildKind[] = [
  { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true, method: 'OnDelete' },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    resource: 'clusterroles',
    kind: 'ClusterRole',
    namespaced: false,
    method: 'OnDelete',
  },
];

describe('hook version and response parsing mode', () => {
  test.each([
    [{ webhook: { url: 'https://x' } }, false],
    [{ version: 'v1', webhook: { url: 'https://x' } }, false],
    [{ version: 'v2', webhook: { url: 'https://x' } }, true],
    [{ version: 'v2', webhook: { url: 'https://x', responseUnMarshallMode: 'loose' } }, false],
    [{ version: 'v1', webhook: { url: 'https://x', responseUnMarshallMode: 'strict' } }, true],
    [{ version: 'v2', lambda: { functionName: 'f' } }, true],
  ])('%j is served, its answers read strictly: %s (loose for v1, strict for v2 by default)', (sync, strict) => {
    const cc = parseCompositeController(controllerObject(spec(sync)));
    expect(strictAnswers(cc.hooks.sync)).toBe(strict);
  });
});

const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/);
const object = (kind: ChildKind, n: string, namespace: string | undefined): KubeObject =>
  ({
    apiVersion: kind.group ? `${kind.group}/${kind.version}` : kind.version,
    kind: kind.kind,
    metadata: { name: n, ...(namespace ? { namespace } : {}) },
  }) as KubeObject;

describe('the uniform map (v2) and the relative map (v1)', () => {
  test('property: v2 keys every namespaced child namespace/name and a cluster-scoped one by name, whatever the parent; v1 by name but a namespaced child of a cluster-scoped parent', () => {
    fc.assert(
      fc.property(
        fc.option(name, { nil: undefined }),
        fc.array(fc.tuple(fc.constantFrom(...kinds), name, name), { maxLength: 8 }),
        (parentNs, specs) => {
          const parent = {
            apiVersion: 'x/v1',
            kind: 'P',
            metadata: { name: 'p', ...(parentNs ? { namespace: parentNs } : {}) },
          } as KubeObject;
          // A namespaced parent's children are in its namespace; a cluster-scoped parent's anywhere.
          const children = specs.map(([k, n, ns]) => object(k, n, k.namespaced ? (parentNs ?? ns) : undefined));
          for (const version of ['v1', 'v2'] as const) {
            const map = childMap(parent, kinds, children, version);
            // An entry for every rule, named Kind.apiVersion in both versions.
            expect(Object.keys(map).sort()).toEqual(['ClusterRole.rbac.authorization.k8s.io/v1', 'ConfigMap.v1']);
            for (const c of children) {
              const ns = c.metadata.namespace;
              const expected = ns && (version === 'v2' || !parentNs) ? `${ns}/${c.metadata.name ?? ''}` : c.metadata.name;
              expect(childKey(parent, c, version)).toBe(expected);
              expect(map[`${c.kind ?? ''}.${c.apiVersion ?? ''}`]![expected!]).toBeDefined();
            }
          }
        },
      ),
    );
  });
});

describe('the request per kind and version', () => {
  const parts = {
    controller: { metadata: { name: 'c' } } as KubeObject,
    parent: { metadata: { name: 'p', namespace: 'n' } } as KubeObject,
    related: {},
    finalizing: false,
  };
  test.each([
    ['CompositeController', 'v1', ['controller', 'parent', 'children', 'related', 'finalizing']],
    ['CompositeController', 'v2', ['controller', 'parent', 'children', 'related', 'finalizing']],
    ['DecoratorController', 'v1', ['controller', 'object', 'attachments', 'related', 'finalizing']],
    // Metacontroller's decorator v2 request keeps v1's names (its pkg/controller/decorator/api/v2).
    ['DecoratorController', 'v2', ['controller', 'object', 'attachments', 'related', 'finalizing']],
  ] as const)('%s %s sends %j', (kind, version, fields) => {
    const children = childMap(parts.parent, kinds, [], version);
    const request = hookRequest(kind, parts.controller, parts.parent, children, parts.finalizing, parts.related) as unknown as Record<
      string,
      unknown
    >;
    expect(Object.keys(request)).toEqual(fields);
    expect(request[fields[1]]).toBe(parts.parent);
    expect(request[fields[2]]).toBe(children);
  });
});

describe('strict and loose answers', () => {
  test("each kind's answer has Metacontroller's fields, the same in v1 and v2", () => {
    expect(Object.keys(compositeAnswer.strict.shape)).toEqual(['status', 'children', 'resyncAfterSeconds', 'finalized']);
    expect(Object.keys(decoratorAnswer.strict.shape)).toEqual([
      'labels',
      'annotations',
      'status',
      'attachments',
      'resyncAfterSeconds',
      'finalized',
    ]);
  });

  test('loose (v1 default): an unknown field is ignored; strict (v2 default): it is a malformed answer naming it', () => {
    expect(parseCompositeAnswer({ children: [], extra: 1 }).children).toEqual([]);
    expect(() => parseCompositeAnswer({ children: [], extra: 1 }, true)).toThrow(
      new AnswerError("the answer's extra is not a known field"),
    );
    // A decorator answers attachments in both versions: children is not one of its fields.
    expect(parseDecoratorAnswer({ attachments: [], labels: { a: 'b' } }, true).labels).toEqual({ a: 'b' });
    expect(() => parseDecoratorAnswer({ children: [] }, true)).toThrow(AnswerError);
    // Fields inside a child or the status are the object's own: never unknown.
    expect(
      parseCompositeAnswer(
        { status: { anything: 1 }, children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', x: 1 }, y: 2 }] },
        true,
      ).children,
    ).toHaveLength(1);
  });

  test('property: JSON.stringify never names a field twice; a field named twice after any JSON value (strings with braces, quotes, escapes) is found', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value);
        expect(duplicateKey(text)).toBeUndefined();
        expect(duplicateKey(`{"k":${text},"k":0}`)).toBe('k');
        expect(duplicateKey(`[${text},{"o":{"k":1,"k":2}}]`)).toBe('[1].o.k');
      }),
    );
    expect(duplicateKey('{"status":{"a":1,"b":{"c":[{"d":1,"d":2}]}}}')).toBe('status.b.c[0].d');
    expect(duplicateKey('{"children":[],"children":[]}')).toBe('children');
    expect(duplicateKey('{"a":"{\\"b\\":1,\\"b\\":2}"}')).toBeUndefined();
  });
});

describe("Metacontroller's v1alpha1 fields", () => {
  test('spec.endpointConfigs is refused by reason, naming it; an empty list is nothing to serve', () => {
    const endpoints = [{ host: 'hooks.example.com', caBundle: { inline: 'x' } }];
    for (const parse of [
      () => parseCompositeController(controllerObject({ ...spec({ webhook: { url: 'https://x' } }), endpointConfigs: endpoints })),
      () =>
        parseDecoratorController({
          ...controllerObject({}),
          kind: 'DecoratorController',
          spec: {
            resources: [{ apiVersion: 'v1', resource: 'pods' }],
            hooks: { sync: { webhook: { url: 'https://x' } } },
            endpointConfigs: endpoints,
          },
        }),
    ]) {
      expect(parse).toThrow(DefinitionError);
      expect(parse).toThrow(/spec\.endpointConfigs is not served/);
      try {
        parse();
      } catch (err) {
        expect((err as DefinitionError).reason).toBe('UnsupportedField');
      }
    }
    expect(parseCompositeController(controllerObject({ ...spec({ webhook: { url: 'https://x' } }), endpointConfigs: [] })).name).toBe('c');
  });

  test("a decorator's resources[].ignoreStatusChanges is read; authorization.type Basic is basicAuth's", () => {
    const d = parseDecoratorController({
      ...controllerObject({}),
      kind: 'DecoratorController',
      spec: {
        resources: [{ apiVersion: 'v1', resource: 'pods', ignoreStatusChanges: true }],
        hooks: { sync: { webhook: { url: 'https://x' } } },
      },
    });
    expect(d.resources[0]!.ignoreStatusChanges).toBe(true);
    const auth = (type: string) => ({ webhook: { url: 'https://x', authorization: { type, secretRef: { name: 's', namespace: 'n' } } } });
    expect(toHook('CompositeController', 'c', 'spec.hooks.sync', auth('Token')).webhook?.authorization?.type).toBe('Token');
    expect(() => toHook('CompositeController', 'c', 'spec.hooks.sync', auth('basic'))).toThrow(/use basicAuth/);
  });
});
