// CompositeController and DecoratorController, the pure part (shared/composite/): specs as Metacontroller writes
// them, the hook contract (v1), the children's claim and diff.
/* eslint-disable max-lines -- the spec, contract, children and property sections share the catset, parent, pods and jobs fixtures below */
import fc from 'fast-check';
import type { KubeObject } from '../../shared/kube/index.ts';
import {
  APPLIED_ANNOTATION,
  CONTROLLER_UID_LABEL,
  DECORATOR_ANNOTATION,
  MADE_BY_ANNOTATION,
  compositeFinalizer,
  DefinitionError,
  parseCompositeAnswer,
  parseCompositeController,
  parseDecoratorAnswer,
  parseDecoratorController,
} from '../../shared/composite/api.ts';
import {
  attachmentsOf,
  childKey,
  childMap,
  ChildError,
  childMark,
  claimChildren,
  decorates,
  diffChildren,
  metadataPatch,
  parentSelector,
  prepareChildren,
  statusDiffers,
  type ChildKind,
} from '../../shared/composite/plan.ts';
import { MAP_KEY_LABEL } from '../../shared/map/api.ts';
import { hookTimeoutSeconds } from '../../shared/hooks/index.ts';
import { parseGoDuration } from '../../shared/validation.ts';
import {
  compileSelector,
  controllerOf,
  hasMark,
  isBeingDeleted,
  matches,
  SelectorError,
  type LabelSelector,
} from '../../shared/ownership/index.ts';

const controllerObject = (kind: string, spec: unknown): KubeObject =>
  ({ apiVersion: 'metacontroller.k8s.io/v1alpha1', kind, metadata: { name: 'c', uid: 'cu', generation: 2 }, spec }) as KubeObject;

// Metacontroller's own documented example shapes (facts: field names and values), unchanged.
const catset = {
  parentResource: { apiVersion: 'ctl.example.com/v1', resource: 'catsets', revisionHistory: { fieldPaths: ['spec.template'] } },
  childResources: [
    {
      apiVersion: 'v1',
      resource: 'pods',
      updateStrategy: { method: 'Recreate', statusChecks: { conditions: [{ type: 'Ready', status: 'True' }] } },
    },
    { apiVersion: 'v1', resource: 'persistentvolumeclaims' },
  ],
  hooks: { sync: { webhook: { url: 'https://catset.example.com/sync', timeout: '10s' } } },
};

const parent: KubeObject = {
  apiVersion: 'ctl.example.com/v1',
  kind: 'CatSet',
  metadata: { name: 'web', namespace: 'ns', uid: 'pu' },
  spec: { selector: { matchLabels: { app: 'web' } } },
};
const pods: ChildKind = { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true, method: 'OnDelete' };
const jobs: ChildKind = { group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', namespaced: true, method: 'InPlace' };
const mark = childMark('catset-controller', { group: 'ctl.example.com', resource: 'catsets' });
const pod = (name: string, extra: Partial<KubeObject['metadata']> = {}): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'ns', ...extra },
    spec: { containers: [{ name: 'c', image: 'x' }] },
  }) as KubeObject;

describe('CompositeController spec', () => {
  test("Metacontroller's documented example parses: OnDelete by default, the hook's Go timeout in seconds", () => {
    const cc = parseCompositeController(controllerObject('CompositeController', catset));
    expect(cc.children.map((c) => c.method)).toEqual(['Recreate', 'OnDelete']);
    expect(cc.hooks.sync).toEqual({ webhook: { url: 'https://catset.example.com/sync', timeout: '10s' }, timeoutSeconds: 10, retries: 2 });
    expect(hookTimeoutSeconds(cc.hooks.sync)).toBe(10);
    expect(cc.generateSelector).toBe(false);
    expect(cc.hooks.finalize).toBeUndefined();
  });

  test("Outrigger's additions: a Lambda hook, the ServiceAccount; webhook.timeout over timeoutSeconds, as a MapController's", () => {
    const cc = parseCompositeController(
      controllerObject('CompositeController', {
        ...catset,
        serviceAccount: { namespace: 'a', name: 'b' },
        hooks: {
          sync: { lambda: { functionName: 'f' } },
          finalize: { webhook: { url: 'https://x/f', timeout: '1m30s' }, timeoutSeconds: 3 },
        },
      }),
    );
    expect(cc.serviceAccount).toEqual({ namespace: 'a', name: 'b' });
    expect(cc.hooks.sync).toEqual({ lambda: { functionName: 'f' }, timeoutSeconds: 10, retries: 2 });
    expect(hookTimeoutSeconds(cc.hooks.finalize!)).toBe(90);
  });

  test("hooks take the MapController's webhook fields (one schema): a Service, its path, caBundle, authorization, etag; a url wins over service and path, as Metacontroller documents", () => {
    const webhook = {
      service: { name: 's', namespace: 'n', port: 8080, protocol: 'http' },
      path: '/sync',
      etag: { enabled: true, cacheTimeoutSeconds: 30 },
      responseUnMarshallMode: 'strict',
    };
    const cc = parseCompositeController(controllerObject('CompositeController', { ...catset, hooks: { sync: { webhook } } }));
    expect(cc.hooks.sync.webhook).toEqual(webhook);
    const options = {
      url: 'https://hook.example.com/sync',
      caBundle: { secretRef: { name: 'ca', namespace: 'n' } },
      authorization: { secretRef: { name: 't', namespace: 'n', key: 'token' } },
    };
    const both = parseCompositeController(
      controllerObject('CompositeController', {
        ...catset,
        hooks: { sync: { webhook: { ...options, service: webhook.service, path: '/x' } } },
      }),
    );
    expect(both.hooks.sync.webhook).toEqual(options);
  });

  test.each([
    [
      { ...catset, hooks: { sync: { webhook: { path: '/sync' } } } },
      'InvalidSpec',
      /spec.hooks.sync.webhook: needs exactly one of url or service/,
    ],
    [
      {
        ...catset,
        hooks: { sync: { webhook: { url: 'https://x', caBundle: { inline: 'a', configMapRef: { name: 'c', namespace: 'n' } } } } },
      },
      'InvalidSpec',
      /caBundle: needs exactly one of inline, secretRef or configMapRef/,
    ],
    [
      { ...catset, hooks: { sync: { webhook: { url: 'https://x' } }, preUpdateChild: { webhook: { url: 'https://x' } } } },
      'UnsupportedHook',
      /preUpdateChild is not served/,
    ],
    [
      { ...catset, parentResource: { ...catset.parentResource, revisionHistory: { fieldPaths: ['metadata.labels'] } } },
      'InvalidSpec',
      /revisionHistory.fieldPaths/,
    ],
    [{ ...catset, hooks: {} }, 'NoSyncHook', /sync is not set/],
    [
      { ...catset, hooks: { sync: { webhook: { url: 'https://x', timeout: 'soon' } } } },
      'InvalidSpec',
      /timeout: must be a positive Go duration/,
    ],
    [{ childResources: [] }, 'InvalidSpec', /parentResource/],
  ])('what Outrigger does not serve is a reason, not a half-served controller (%#)', (spec, reason, message) => {
    try {
      parseCompositeController(controllerObject('CompositeController', spec));
      throw new Error('parsed');
    } catch (err) {
      expect(err).toBeInstanceOf(DefinitionError);
      expect((err as DefinitionError).reason).toBe(reason);
      expect((err as Error).message).toMatch(message);
    }
  });

  test('Go durations', () => {
    expect(parseGoDuration('10s')).toBe(10);
    expect(parseGoDuration('1m30s')).toBe(90);
    expect(parseGoDuration('500ms')).toBe(0.5);
    expect(parseGoDuration('10')).toBeUndefined();
  });

  test('finalizers are per kind and controller, their name part at most 63 characters', () => {
    expect(compositeFinalizer('CompositeController', 'x')).toBe('composite.outrigger.dev/x');
    expect(compositeFinalizer('DecoratorController', 'x')).toBe('decorator.outrigger.dev/x');
    expect(compositeFinalizer('CompositeController', 'a'.repeat(80)).split('/')[1]!.length).toBeLessThanOrEqual(63);
  });
});

describe('DecoratorController spec', () => {
  test("Metacontroller's documented example parses: attachments OnDelete by default", () => {
    const dc = parseDecoratorController(
      controllerObject('DecoratorController', {
        resources: [
          {
            apiVersion: 'apps/v1',
            resource: 'statefulsets',
            annotationSelector: { matchExpressions: [{ key: 'service-per-pod-label', operator: 'Exists' }] },
          },
        ],
        attachments: [{ apiVersion: 'v1', resource: 'services' }],
        hooks: { sync: { webhook: { url: 'https://spp.example.com/sync', timeout: '10s' } } },
      }),
    );
    expect(dc.children).toEqual([{ apiVersion: 'v1', resource: 'services', method: 'OnDelete' }]);
    expect(dc.resources[0]!.annotationSelector?.matchExpressions?.[0]?.key).toBe('service-per-pod-label');
  });

  test('label and annotation selectors both select (absent: all)', () => {
    const o = { metadata: { name: 'x', labels: { app: 'a' }, annotations: { svc: 'yes' } } } as KubeObject;
    expect(decorates({}, o)).toBe(true);
    expect(decorates({ labelSelector: { matchLabels: { app: 'a' } }, annotationSelector: { matchAnnotations: { svc: 'yes' } } }, o)).toBe(
      true,
    );
    expect(decorates({ labelSelector: { matchLabels: { app: 'a' } }, annotationSelector: { matchAnnotations: { svc: 'no' } } }, o)).toBe(
      false,
    );
    expect(decorates({ annotationSelector: { matchExpressions: [{ key: 'svc', operator: 'Exists' }] } }, o)).toBe(true);
    expect(decorates({ annotationSelector: { matchExpressions: [{ key: 'other', operator: 'Exists' }] } }, o)).toBe(false);
  });
});

describe('the hook contract (v1)', () => {
  test('children are keyed Kind.apiVersion, then name (namespace/name under a cluster-scoped parent), every rule present', () => {
    const map = childMap(parent, [pods, jobs], [{ ...pod('a'), apiVersion: 'v1', kind: 'Pod' }]);
    expect(Object.keys(map)).toEqual(['Pod.v1', 'Job.batch/v1']);
    expect(Object.keys(map['Pod.v1']!)).toEqual(['a']);
    expect(map['Job.batch/v1']).toEqual({});
    const clusterParent = { ...parent, metadata: { name: 'p', uid: 'pu' } };
    expect(childKey(clusterParent, pod('a'))).toBe('ns/a');
  });

  test('a composite answer: status replaces, null or absent status leaves it; children default to none', () => {
    expect(parseCompositeAnswer({ status: { ready: 1 }, children: [pod('a')], resyncAfterSeconds: 1.5 })).toMatchObject({
      status: { ready: 1 },
      resyncAfterSeconds: 1.5,
      finalized: false,
    });
    expect(parseCompositeAnswer({ status: null, children: null })).toEqual({
      status: undefined,
      children: [],
      resyncAfterSeconds: undefined,
      finalized: false,
    });
    expect(() => parseCompositeAnswer({ children: [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'Bad Name' } }] })).toThrow(
      /an object name/,
    );
  });

  test('a decorator answer: labels, annotations (null removes), status and attachments', () => {
    const a = parseDecoratorAnswer({ labels: { a: '1', gone: null }, annotations: { n: 'x' }, attachments: [pod('s')], finalized: true });
    expect(a).toMatchObject({ labels: { a: '1', gone: null }, annotations: { n: 'x' }, status: undefined, finalized: true });
    const o = { metadata: { name: 'x', labels: { a: '1', gone: 'y' } } } as KubeObject;
    expect(metadataPatch(o, a.labels, a.annotations)).toEqual({ metadata: { labels: { gone: null }, annotations: { n: 'x' } } });
    expect(
      metadataPatch({ metadata: { labels: { a: '1' }, annotations: { n: 'x' } } } as KubeObject, a.labels, a.annotations),
    ).toBeUndefined();
  });

  test('status is written only when it differs, whatever the key order', () => {
    expect(statusDiffers({ a: 1, b: { c: 2 } }, { b: { c: 2 }, a: 1 })).toBe(false);
    expect(statusDiffers(undefined, { a: 1 })).toBe(true);
  });
});

describe('children', () => {
  test('the parent selector: spec.selector, or the generated uid label (spec.selector ignored)', () => {
    expect(matches(parentSelector(parent, false), { app: 'web' })).toBe(true);
    expect(matches(parentSelector(parent, true), { app: 'web' })).toBe(false);
    expect(matches(parentSelector(parent, true), { [CONTROLLER_UID_LABEL]: 'pu' })).toBe(true);
    expect(() => parentSelector({ ...parent, spec: {} }, false)).toThrow(SelectorError);
  });

  test("prepared children carry the parent's ControllerRef, its namespace, the generated label and the applied hash", () => {
    const [c] = prepareChildren([pod('a', { namespace: undefined })], { parent, kinds: [pods], generateSelector: true });
    expect(c!.metadata.namespace).toBe('ns');
    expect(controllerOf(c!)?.uid).toBe('pu');
    expect(c!.metadata.labels?.[CONTROLLER_UID_LABEL]).toBe('pu');
    expect(c!.metadata.annotations?.[APPLIED_ANNOTATION]).toMatch(/\w+/);
    expect(() => prepareChildren([pod('a', { namespace: 'other' })], { parent, kinds: [pods], generateSelector: false })).toThrow(
      ChildError,
    );
    expect(() => prepareChildren([pod('a'), pod('a')], { parent, kinds: [pods], generateSelector: false })).toThrow(/twice/);
    expect(() => prepareChildren([{ ...pod('a'), kind: 'Secret' }], { parent, kinds: [pods], generateSelector: false })).toThrow(
      /not one of/,
    );
  });

  test('OnDelete never updates an existing child; InPlace updates; Recreate recreates; the unnamed are deleted', () => {
    const desired = prepareChildren([pod('a'), pod('b')], { parent, kinds: [pods], generateSelector: false });
    const stale = { ...desired[0]!, metadata: { ...desired[0]!.metadata, uid: 'ua', annotations: { [APPLIED_ANNOTATION]: 'old' } } };
    const gone = pod('c', { uid: 'uc' });
    const by = (m: 'OnDelete' | 'InPlace' | 'Recreate') => diffChildren([stale, gone], desired, () => m);
    expect(by('OnDelete')).toMatchObject({ create: [desired[1]], update: [], recreate: [], delete: [gone], unchanged: [stale] });
    expect(by('InPlace').update).toEqual([{ desired: desired[0], observed: stale }]);
    expect(by('Recreate').recreate).toEqual([{ desired: desired[0], observed: stale }]);
    // The same as applied: nothing to do.
    expect(diffChildren([desired[0]!], [desired[0]!], () => 'InPlace')).toMatchObject({ update: [], unchanged: [desired[0]] });
  });
});

// The claim decisions of both kinds, over any mix of candidates: never act on another controller's object or on a
// MapController's output of the same parent; adopt only matching orphans; a parent being deleted adopts and releases
// nothing; a decorator adopts nothing at all.
describe('claim, adopt and release across both kinds (property)', () => {
  const candidate = fc.record({
    name: fc.string({ minLength: 1, maxLength: 4 }),
    matching: fc.boolean(),
    owner: fc.constantFrom('none', 'parent', 'other'),
    mapOutput: fc.boolean(),
    deleting: fc.boolean(),
    namespace: fc.constantFrom('ns', 'elsewhere'),
    marked: fc.boolean(),
    // Attached by a decorator: d1 or d2 by Metacontroller's annotation, d1 by its field manager alone (written before marks).
    attached: fc.constantFrom('none', 'd1', 'd2', 'd1-managed'),
  });
  const objectOf = (
    c: {
      name: string;
      matching: boolean;
      owner: string;
      mapOutput: boolean;
      deleting: boolean;
      namespace: string;
      marked: boolean;
      attached: string;
    },
    i: number,
  ): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${c.name}-${i}`,
      namespace: c.namespace,
      uid: `u${i}`,
      annotations: {
        ...(c.marked ? { [mark.annotation]: mark.value } : {}),
        ...(c.attached === 'd1' || c.attached === 'd2' ? { [DECORATOR_ANNOTATION]: c.attached } : {}),
      },
      ...(c.attached === 'd1-managed' ? { managedFields: [{ manager: 'outrigger-decorator/d1', operation: 'Update' }] } : {}),
      labels: { ...(c.matching ? { app: 'web' } : { app: 'no' }), ...(c.mapOutput ? { [MAP_KEY_LABEL]: 'k' } : {}) },
      ...(c.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
      ...(c.owner === 'none'
        ? {}
        : {
            ownerReferences: [{ apiVersion: 'x/v1', kind: 'X', name: 'p', uid: c.owner === 'parent' ? 'pu' : 'other', controller: true }],
          }),
    },
  });

  test('holds for any candidates and either parent state', () => {
    fc.assert(
      fc.property(fc.array(candidate, { maxLength: 12 }), fc.boolean(), (cs, parentDeleting) => {
        const p = parentDeleting ? { ...parent, metadata: { ...parent.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } } : parent;
        const objects = cs.map(objectOf);
        const plan = claimChildren(p, parentSelector(p, false), objects, mark);
        // Every candidate lands in exactly one bucket.
        expect(plan.owned.length + plan.adopt.length + plan.release.length + plan.ignored.length).toBe(objects.length);
        const mine = (o: KubeObject) => controllerOf(o)?.uid === 'pu';
        const mapOut = (o: KubeObject) => o.metadata.labels?.[MAP_KEY_LABEL] !== undefined;
        const attached = (o: KubeObject) => cs[Number(o.metadata.uid!.slice(1))]!.attached;
        for (const o of [...plan.owned, ...plan.release, ...plan.adopt]) expect(attached(o)).toBe('none');
        for (const o of [...plan.owned, ...plan.release]) expect(mine(o) && !mapOut(o)).toBe(true);
        for (const o of plan.adopt) {
          expect(controllerOf(o)).toBeUndefined();
          expect(mapOut(o) || isBeingDeleted(o) || o.metadata.namespace !== 'ns' || !hasMark(o, mark)).toBe(false);
          expect(o.metadata.labels?.app).toBe('web');
        }
        for (const o of plan.release) expect(o.metadata.labels?.app).not.toBe('web');
        if (parentDeleting) expect(plan.adopt.length + plan.release.length).toBe(0);
        // A decorator's attachments: only what the target controls and it attached, never a map output, never adopted.
        const d1 = (o: KubeObject) => attached(o) === 'd1' || attached(o) === 'd1-managed';
        expect(attachmentsOf(p, objects, 'd1')).toEqual(objects.filter((o) => mine(o) && !mapOut(o) && d1(o)));
        expect(attachmentsOf(p, objects, 'd2')).toEqual(objects.filter((o) => mine(o) && !mapOut(o) && attached(o) === 'd2'));
      }),
      { numRuns: 500 },
    );
  });
});

// The parent's selector is its author's to write, so it grants nothing (docs/controllers/compositecontroller.md#adoption):
// whatever selector, labels, marks and owner references, an orphan the controller did not mark is never adopted, and
// no pass deletes or recreates an object it adopted.
describe('trust boundary: adoption is not a grant (property)', () => {
  const keys = fc.constantFrom('app', 'tier');
  const values = fc.constantFrom('web', 'db');
  const selector: fc.Arbitrary<LabelSelector> = fc.record(
    {
      matchLabels: fc.dictionary(keys, values, { maxKeys: 2 }),
      matchExpressions: fc.array(
        fc.oneof(
          fc.record({ key: keys, operator: fc.constantFrom('In', 'NotIn'), values: fc.array(values, { minLength: 1, maxLength: 2 }) }),
          fc.record({ key: keys, operator: fc.constantFrom('Exists', 'DoesNotExist') }),
        ),
        { maxLength: 2 },
      ),
    },
    { requiredKeys: [] },
  );
  const object = fc.record({
    labels: fc.dictionary(keys, values, { maxKeys: 2 }),
    // The controller's own mark, another controller's (or the same name for another parent kind), none.
    made: fc.constantFrom('ours', 'other-controller', 'other-kind', 'none'),
    owner: fc.constantFrom('none', 'parent', 'other', 'plain'),
    deleting: fc.boolean(),
    answered: fc.boolean(),
  });
  const made = {
    ours: mark.value,
    'other-controller': childMark('another', { group: 'ctl.example.com', resource: 'catsets' }).value,
    'other-kind': childMark('catset-controller', { group: 'ctl.example.com', resource: 'dogsets' }).value,
  } as Record<string, string>;

  test('an orphan without the mark is never adopted, and no pass both adopts and deletes an object', () => {
    fc.assert(
      fc.property(
        selector,
        fc.array(object, { maxLength: 10 }),
        fc.constantFrom('OnDelete', 'InPlace', 'Recreate') as fc.Arbitrary<'OnDelete' | 'InPlace' | 'Recreate'>,
        fc.boolean(),
        (sel, objs, method, parentDeleting) => {
          const p = parentDeleting ? { ...parent, metadata: { ...parent.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } } : parent;
          const candidates: KubeObject[] = objs.map((o, i) => ({
            ...pod(`p${i}`, {
              uid: `u${i}`,
              labels: o.labels,
              ...(made[o.made] ? { annotations: { [MADE_BY_ANNOTATION]: made[o.made]! } } : {}),
              ...(o.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
              ...(o.owner === 'none'
                ? {}
                : {
                    ownerReferences: [
                      {
                        apiVersion: 'x/v1',
                        kind: 'X',
                        name: 'p',
                        uid: o.owner === 'other' ? 'other' : 'pu',
                        ...(o.owner === 'plain' ? {} : { controller: true }),
                      },
                    ],
                  }),
            }),
          }));
          const plan = claimChildren(p, compileSelector(sel), candidates, mark);
          for (const o of plan.adopt) {
            expect(hasMark(o, mark)).toBe(true);
            expect(controllerOf(o)).toBeUndefined();
          }
          // Every unmarked orphan stays out of the parent's children.
          for (const o of candidates.filter((c) => !controllerOf(c) && !hasMark(c, mark))) expect(plan.ignored).toContain(o);
          // The pass: the hook answers some of the children (each differing from what was applied), not the rest.
          const observed = [...plan.owned, ...plan.adopt];
          const desired = prepareChildren(
            objs.flatMap((o, i) => (o.answered ? [pod(`p${i}`, { labels: o.labels })] : [])),
            { parent: p, kinds: [{ ...pods, method }], generateSelector: false },
          );
          const adopted = new Set(plan.adopt.map((o) => o.metadata.uid ?? ''));
          const changes = diffChildren(observed, desired, () => method, adopted);
          const written = [...changes.delete, ...changes.recreate.map((r) => r.observed)];
          for (const o of written) expect(adopted.has(o.metadata.uid ?? '')).toBe(false);
          // An adopted child the answer leaves out, or would recreate, is held for a later pass.
          for (const o of plan.adopt)
            if (!isBeingDeleted(o) && (!objs[Number(o.metadata.uid!.slice(1))]!.answered || method === 'Recreate'))
              expect(changes.held).toContain(o);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
