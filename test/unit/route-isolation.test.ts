// Routing per definition (docs/controllers/ownership-and-routing.md#one-definition-cannot-stop-anothers-routing): an
// event reaches the definitions that concern its kind, and a definition whose parents Outrigger may not read
// loses only its own keys, named in the resolver's refusals; every other definition routes the event as if the
// refused one were not there. A parent's own event reaches only the definitions whose selectors its labels match.
import { createHash } from 'node:crypto';
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { routedKinds, type CompositeSet } from '../../functions/composite/controllers.ts';
import { routeEnvelope } from '../../functions/router/route.ts';
import { makeEnvelope } from '../../shared/envelope/index.ts';
import { KubeError, type GVR, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { BatchResolver, type ControllerKind, type RoutedKey } from '../../shared/ownership/resolver.ts';

const NS = 'team-a';
/** A uid as the apiserver would give it (envelopes hold only RFC 4122 ones), the same for the same name. */
const uid = (of: string) => {
  const h = createHash('sha256').update(of).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
};

/** A parent kind owning ConfigMaps and reading them as inputs and related objects; its parents select `app`. */
function kindOf(name: string): ControllerKind {
  return {
    resource: { group: `${name.toLowerCase()}.example.test`, version: 'v1', resource: `${name.toLowerCase()}s` },
    kind: name,
    namespaced: true,
    selectorOf: (p) => ({ matchLabels: { app: (p.spec as { app: string }).app } }),
    inputs: { kinds: [{ group: '', kind: 'ConfigMap' }], selectorOf: (p) => ({ matchLabels: { app: (p.spec as { app: string }).app } }) },
    related: { kinds: [{ group: '', kind: 'ConfigMap' }], asks: (p, o) => o.labels.app === (p.spec as { app: string }).app },
    owns: [{ group: '', kind: 'ConfigMap' }],
    target: 'map',
  };
}

const parent = (kind: ControllerKind, name: string, app: string): KubeObject => ({
  apiVersion: `${kind.resource.group}/v1`,
  kind: kind.kind,
  metadata: { name, namespace: NS, uid: uid(`${kind.kind}/${name}`) },
  spec: { app },
});

/** A cluster whose lists and gets of the `refusing` resources answer 403, as the apiserver does without a grant. */
function cluster(parents: readonly KubeObject[], refusing: ReadonlySet<string>): KubeClient {
  const refuse = (r: GVR) => {
    if (refusing.has(r.resource))
      throw new KubeError('Forbidden', `GET /apis/${r.group}/v1/namespaces/${NS}/${r.resource}: 403 Forbidden`, { status: 403 });
  };
  const of = (r: GVR) => parents.filter((p) => p.apiVersion === `${r.group}/v1` && p.kind?.toLowerCase() + 's' === r.resource);
  return {
    listAll: (r: GVR) => Promise.resolve().then(() => (refuse(r), of(r))),
    find: (r: GVR, ref: { name: string }) => Promise.resolve().then(() => (refuse(r), of(r).find((p) => p.metadata.name === ref.name))),
  } as unknown as KubeClient;
}

const configMap = (labels: Record<string, string>, owner?: KubeObject): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'cm',
    namespace: NS,
    uid: uid('cm'),
    resourceVersion: '1',
    labels,
    ...(owner
      ? {
          ownerReferences: [
            {
              apiVersion: owner.apiVersion ?? '',
              kind: owner.kind ?? '',
              name: owner.metadata.name ?? '',
              uid: owner.metadata.uid ?? '',
              controller: true,
            },
          ],
        }
      : {}),
  },
});

const keys = (routed: readonly RoutedKey[]) => routed.map((r) => `${r.key.kind}/${r.key.name}`).sort();

describe('one definition Outrigger may not read', () => {
  const widgets = kindOf('Widget');
  const gizmos = kindOf('Gizmo');
  const parents = [parent(widgets, 'w', 'x'), parent(gizmos, 'g', 'x')];

  test("does not stop an orphan's, an input's or a related object's routing to another definition's parents", async () => {
    const resolver = new BatchResolver(cluster(parents, new Set(['gizmos'])), 'c', [widgets, gizmos]);
    const envelope = makeEnvelope({ cluster: 'c', type: 'added', object: configMap({ app: 'x' }), source: 'test' });
    const routed = await routeEnvelope(envelope, resolver, [widgets, gizmos]);
    expect([...new Set(keys(routed))]).toEqual(['Widget/w']);
    expect(resolver.refused.map((r) => `${r.kind.kind} ${r.namespace ?? ''} ${r.error.kind}`)).toEqual([`Gizmo ${NS} Forbidden`]);
  });

  test("is refused for its own child's event, which routes nowhere else", async () => {
    const resolver = new BatchResolver(cluster(parents, new Set(['gizmos'])), 'c', [
      widgets,
      { ...gizmos, inputs: undefined, related: undefined },
    ]);
    const envelope = makeEnvelope({ cluster: 'c', type: 'modified', object: configMap({ app: 'y' }, parents[1]), source: 'test' });
    const routed = await routeEnvelope(envelope, resolver, [widgets, gizmos]);
    expect(keys(routed)).toEqual([]);
    expect(resolver.refused.map((r) => r.kind.kind)).toEqual(['Gizmo']);
  });

  test('another error still fails the event, to be retried', async () => {
    const kube = {
      listAll: () => Promise.reject(new KubeError('Transient', 'GET: 503 Service Unavailable', { status: 503 })),
    } as unknown as KubeClient;
    const resolver = new BatchResolver(kube, 'c', [widgets]);
    const envelope = makeEnvelope({ cluster: 'c', type: 'added', object: configMap({ app: 'x' }), source: 'test' });
    await expect(routeEnvelope(envelope, resolver, [widgets])).rejects.toThrow('503');
  });

  test('routes every other definition as if the refused ones were not there', async () => {
    const names = ['Alpha', 'Beta', 'Gamma', 'Delta'];
    await fc.assert(
      fc.asyncProperty(
        fc.subarray(names),
        fc.array(fc.record({ kind: fc.constantFrom(...names), name: fc.constantFrom('p', 'q'), app: fc.constantFrom('x', 'y') }), {
          maxLength: 8,
        }),
        fc.record({
          app: fc.constantFrom('x', 'y'),
          owner: fc.option(fc.nat(7), { nil: undefined }),
          type: fc.constantFrom('added', 'modified'),
        }),
        async (refusedNames, spec, event) => {
          const all = names.map(kindOf);
          const stored = spec.map((s) => parent(all[names.indexOf(s.kind)]!, s.name, s.app));
          const owner = event.owner === undefined ? undefined : stored[event.owner];
          const envelope = makeEnvelope({
            cluster: 'c',
            type: event.type,
            object: configMap({ app: event.app }, owner),
            source: 'test',
          });
          const refusing = new Set(refusedNames.map((n) => `${n.toLowerCase()}s`));
          const resolver = new BatchResolver(cluster(stored, refusing), 'c', all);
          const routed = await routeEnvelope(envelope, resolver, all);
          const readable = all.filter((k) => !refusedNames.includes(k.kind));
          const alone = await routeEnvelope(envelope, new BatchResolver(cluster(stored, new Set()), 'c', readable), readable);
          expect(keys(routed)).toEqual(keys(alone));
          for (const r of resolver.refused) expect(refusedNames).toContain(r.kind.kind);
        },
      ),
    );
  });
});

describe("a parent's own event", () => {
  // Only what routedKinds reads of the definitions.
  const set = {
    composites: [
      {
        kind: 'CompositeController',
        name: 'tiered',
        uid: uid('tiered'),
        parentResource: { group: 'widget.example.test', version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true },
        parent: { labelSelector: { matchLabels: { tier: 'a' } } },
        generateSelector: true,
        kinds: [],
        hooks: {},
      },
    ],
    decorators: [
      {
        kind: 'DecoratorController',
        name: 'expose',
        uid: uid('expose'),
        targets: [
          {
            group: '',
            version: 'v1',
            resource: 'configmaps',
            kind: 'ConfigMap',
            namespaced: true,
            rule: { labelSelector: { matchLabels: { expose: 'yes' } } },
          },
        ],
        kinds: [{ group: '', version: 'v1', resource: 'services', kind: 'Service', namespaced: true }],
        hooks: {},
      },
    ],
  } as unknown as CompositeSet;
  const routed = (object: KubeObject) => {
    const kinds = routedKinds(set);
    const envelope = makeEnvelope({ cluster: 'c', type: 'modified', object, source: 'test' });
    return routeEnvelope(envelope, new BatchResolver(cluster([], new Set()), 'c', kinds), kinds).then(keys);
  };

  test("reaches a DecoratorController only when the object's labels match its rule", async () => {
    expect(await routed(configMap({ expose: 'yes' }))).toEqual(['ConfigMap/cm']);
    expect(await routed(configMap({ feed: 'a' }))).toEqual([]);
  });

  test("reaches a CompositeController only when the parent's labels match its parentResource.labelSelector", async () => {
    const widget = (labels: Record<string, string>): KubeObject => ({
      apiVersion: 'widget.example.test/v1',
      kind: 'Widget',
      metadata: { name: 'w', namespace: NS, uid: uid('w'), resourceVersion: '1', labels },
    });
    expect(await routed(widget({ tier: 'a' }))).toEqual(['Widget/w']);
    expect(await routed(widget({ tier: 'b' }))).toEqual([]);
  });

  test("a DecoratorController rule's ignoreStatusChanges: a change that moved no generation does not reach it", async () => {
    const quiet = {
      ...set,
      decorators: set.decorators.map((d) => ({
        ...d,
        targets: d.targets.map((t) => ({ ...t, rule: { ...t.rule, ignoreStatusChanges: true } })),
      })),
    } as CompositeSet;
    const kinds = routedKinds(quiet);
    const route = (object: KubeObject) =>
      routeEnvelope(
        makeEnvelope({ cluster: 'c', type: 'modified', object, source: 'test' }),
        new BatchResolver(cluster([], new Set()), 'c', kinds),
        kinds,
      ).then(keys);
    const at = (generation: number, observedGeneration: number): KubeObject => {
      const o = configMap({ expose: 'yes' });
      return { ...o, metadata: { ...o.metadata, generation }, status: { observedGeneration } } as KubeObject;
    };
    expect(await route(at(2, 2))).toEqual([]);
    expect(await route(at(3, 2))).toEqual(['ConfigMap/cm']);
  });

  // docs/controllers/compositecontroller.md#finalizers-are-released
  test('trust boundary: an object a definition no longer selects still reaches it while it carries its finalizer, to be released', async () => {
    const held = (o: KubeObject, finalizer: string): KubeObject => ({ ...o, metadata: { ...o.metadata, finalizers: [finalizer] } });
    expect(await routed(held(configMap({ feed: 'a' }), 'decorator.outrigger.dev/expose'))).toEqual(['ConfigMap/cm']);
    expect(await routed(held(configMap({ feed: 'a' }), 'decorator.outrigger.dev/other'))).toEqual([]);
    const widget: KubeObject = {
      apiVersion: 'widget.example.test/v1',
      kind: 'Widget',
      metadata: { name: 'w', namespace: NS, uid: uid('w'), resourceVersion: '1', labels: { tier: 'b' } },
    };
    expect(await routed(held(widget, 'composite.outrigger.dev/tiered'))).toEqual(['Widget/w']);
  });
});
