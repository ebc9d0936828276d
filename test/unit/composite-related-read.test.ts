// Reading a parent's related objects (functions/composite/related.ts) on the in-memory KubeApi: the customize answer
// asked once and then read from the parent's record, the cap on related objects, and a rule naming an unserved
// resource (docs/controllers/compositecontroller.md#related-objects).
import { describe, expect, test } from '@jest/globals';
import type { ResolvedDefinition } from '../../functions/composite/controllers.ts';
import { readRelated, type RelatedContext } from '../../functions/composite/related.ts';
import { encodeRecorded, MAX_RELATED_OBJECTS, relatedAnnotation, RelatedError } from '../../shared/composite/related.ts';
import type { HookCaller } from '../../shared/hooks/index.ts';
import { gvr, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import { FakeKube } from '../fakes/kube.ts';

const configMaps = gvr('', 'v1', 'configmaps');
const widgets: ResolvedResource = { group: 'example.test', version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true };
const definition = {
  kind: 'CompositeController',
  name: 'c',
  uid: 'c-uid',
  generation: 1,
  serviceAccount: { namespace: 'team', name: 'c' },
  object: { apiVersion: 'metacontroller.k8s.io/v1alpha1', kind: 'CompositeController', metadata: { name: 'c' } },
  hooks: { sync: { webhook: { url: 'https://x' } }, finalize: undefined, customize: { webhook: { url: 'https://x/customize' } } },
} as unknown as ResolvedDefinition;

function scene(configMapCount: number, answer: unknown) {
  const kube = new FakeKube();
  kube.served.push(widgets);
  const [parent] = kube.seed(widgets, {
    apiVersion: 'example.test/v1',
    kind: 'Widget',
    metadata: { name: 'p', namespace: 'ns', labels: { feed: 'a' } },
  } as KubeObject);
  for (let i = 0; i < configMapCount; i += 1)
    kube.seed(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: 'ns', labels: { feed: 'a' } } });
  const asked: unknown[] = [];
  const hooks: HookCaller = {
    call: (_hook, request) => {
      asked.push(request);
      return Promise.resolve(answer);
    },
  };
  // The state table's records, in memory.
  const kept = new Map<string, unknown>();
  const records = {
    get: <T>(key: { name: string }) =>
      Promise.resolve(kept.has(key.name) ? { key, value: kept.get(key.name) as T, version: 1 } : undefined),
    put: <T>(key: { name: string }, value: T) => {
      kept.set(key.name, value);
      return Promise.resolve({ key, value, version: 1 });
    },
  } as unknown as RelatedContext['records'];
  return { kube, parent: parent!, asked, ctx: { kube, hooks, cluster: 'c', records } };
}

const byLabel = { relatedResources: [{ apiVersion: 'v1', resource: 'configmaps', labelSelector: { matchLabels: { feed: 'a' } } }] };

describe('reading related objects', () => {
  test('asks customize with controller and parent once; the next pass reads the answer kept in the state table', async () => {
    const { ctx, parent, asked } = scene(2, byLabel);
    const first = await readRelated(ctx, definition, widgets, parent);
    expect(asked).toEqual([{ controller: definition.object, parent }]);
    expect(Object.keys(first.related['ConfigMap.v1']!).sort()).toEqual(['cm-0', 'cm-1']);
    const second = await readRelated(ctx, definition, widgets, first.parent);
    expect({ asked: second.asked, calls: asked.length, related: second.related }).toEqual({
      asked: false,
      calls: 1,
      related: first.related,
    });
    // A label edit moves no generation but may change the answer: asked again.
    const relabelled = { ...first.parent, metadata: { ...first.parent.metadata, labels: { feed: 'b' } } };
    expect((await readRelated(ctx, definition, widgets, relabelled)).asked).toBe(true);
  });

  test(`more than ${MAX_RELATED_OBJECTS} related objects is TooManyRelated, and nothing is recorded`, async () => {
    const { ctx, parent, kube } = scene(MAX_RELATED_OBJECTS + 1, byLabel);
    const err: unknown = await readRelated(ctx, definition, widgets, parent).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RelatedError);
    expect(err).toMatchObject({ reason: 'TooManyRelated' });
    expect(kube.peek(widgets, { name: 'p', namespace: 'ns' })?.metadata.annotations).toBeUndefined();
    const { ctx: exact, parent: p } = scene(MAX_RELATED_OBJECTS, byLabel);
    expect(Object.keys((await readRelated(exact, definition, widgets, p)).related['ConfigMap.v1']!)).toHaveLength(MAX_RELATED_OBJECTS);
  });

  test("the copy on the parent is the router's only: one edited by whoever may edit the parent is not what is read, and is set back", async () => {
    const { ctx, parent, kube } = scene(1, byLabel);
    const first = await readRelated(ctx, definition, widgets, parent);
    // Someone who may edit the parent, not the controller, copies a wider rule there (all ConfigMaps, say).
    const forged = encodeRecorded({
      key: JSON.parse(first.parent.metadata.annotations![relatedAnnotation('c-uid')]!).key as string,
      rules: [{ group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true, namespace: 'ns' }],
    })!;
    const edited = kube.touch(widgets, { name: 'p', namespace: 'ns' }, (o) => {
      o.metadata.annotations = { ...o.metadata.annotations, [relatedAnnotation('c-uid')]: forged };
    });
    const second = await readRelated(ctx, definition, widgets, edited);
    expect(second.related).toEqual(first.related);
    expect(second.parent.metadata.annotations?.[relatedAnnotation('c-uid')]).toBe(
      first.parent.metadata.annotations?.[relatedAnnotation('c-uid')],
    );
  });

  test('a rule naming a resource the cluster does not serve is UnresolvableRelated', async () => {
    const { ctx, parent } = scene(0, { relatedResources: [{ apiVersion: 'v1', resource: 'gizmos' }] });
    await expect(readRelated(ctx, definition, widgets, parent)).rejects.toThrow(/relatedResources\[0\]: .*gizmos/);
  });
});
