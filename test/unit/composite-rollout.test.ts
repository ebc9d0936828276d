// A CompositeController's rolling updates, pure (shared/composite/rollout.ts,
// docs/controllers/compositecontroller.md#rolling-updates): parsing, the decisions on examples, and a fast-check
// property over timelines of a modelled cluster (revisions and children the only state; passes fresh, stale,
// duplicated; status checks failing; the hook's answers changing; the parent set back to an older revision).
import fc from 'fast-check';
import { parseCompositeController, parseDecoratorController, APPLIED_ANNOTATION } from '../../shared/composite/api.ts';
import { diffChildren, prepareChildren, type ChildKind } from '../../shared/composite/plan.ts';
import {
  latestRevision,
  parentAt,
  parentRevisions,
  planRollout,
  REVISION_LABEL,
  revisionData,
  revisionsToAsk,
  revisionsToDelete,
  unhappy,
} from '../../shared/composite/rollout.ts';
import { revisionHash, revisionName, parentLabels } from '../../shared/history/data.ts';
import { maxRevision, type ControllerRevision } from '../../shared/history/revisions.ts';
import { identityOf } from '../../shared/map/plan/outputs.ts';
import { newControllerRef } from '../../shared/ownership/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const controller = (spec: unknown): KubeObject =>
  ({ apiVersion: 'metacontroller.k8s.io/v1alpha1', kind: 'CompositeController', metadata: { name: 'c', uid: 'cu' }, spec }) as KubeObject;

describe('parsing rolling updates', () => {
  // Metacontroller's documented example (facts: field names and values).
  const catset = {
    parentResource: { apiVersion: 'ctl.example.com/v1', resource: 'catsets', revisionHistory: { fieldPaths: ['spec.template'] } },
    childResources: [
      {
        apiVersion: 'v1',
        resource: 'pods',
        updateStrategy: { method: 'RollingRecreate', statusChecks: { conditions: [{ type: 'Ready', status: 'True' }] } },
      },
      { apiVersion: 'v1', resource: 'persistentvolumeclaims', updateStrategy: { method: 'RollingInPlace' } },
    ],
    hooks: { sync: { webhook: { url: 'https://catset.example.com/sync' } } },
  };

  test('RollingRecreate and RollingInPlace are served, with their status checks and the revisioned fields', () => {
    const cc = parseCompositeController(controller(catset));
    expect(cc.parent.revisionFieldPaths).toEqual(['spec.template']);
    expect(cc.children[0]).toMatchObject({
      method: 'Recreate',
      rolling: { method: 'RollingRecreate', checks: [{ type: 'Ready', status: 'True' }] },
    });
    expect(cc.children[1]).toMatchObject({ method: 'InPlace', rolling: { method: 'RollingInPlace', checks: [] } });
  });

  test('revisionHistory.fieldPaths defaults to spec', () => {
    const { revisionHistory: _r, ...parentResource } = catset.parentResource;
    expect(parseCompositeController(controller({ ...catset, parentResource })).parent.revisionFieldPaths).toEqual(['spec']);
  });

  test("a DecoratorController's attachments do not roll", () => {
    const dc = controller({
      resources: [{ apiVersion: 'v1', resource: 'configmaps' }],
      attachments: [{ apiVersion: 'v1', resource: 'services', updateStrategy: { method: 'RollingInPlace' } }],
      hooks: { sync: { webhook: { url: 'https://x.example.com' } } },
    });
    expect(() => parseDecoratorController({ ...dc, kind: 'DecoratorController' })).toThrow(/RollingInPlace is not served for attachments/);
  });
});

// The model: a parent Set with spec.version (revisioned) and spec.replicas (not), Widgets as rolling children.
const widgets: ChildKind = {
  group: 'example.com',
  version: 'v1',
  resource: 'widgets',
  kind: 'Widget',
  namespaced: true,
  method: 'InPlace',
  rolling: { method: 'RollingInPlace', checks: [{ type: 'Ready', status: 'True' }] },
};
type Method = 'RollingInPlace' | 'RollingRecreate';
const kindsFor = (method: Method): ChildKind[] => [
  { ...widgets, method: method === 'RollingInPlace' ? 'InPlace' : 'Recreate', rolling: { ...widgets.rolling!, method } },
];
const kinds = kindsFor('RollingInPlace');
const PATHS = ['spec.version'];
const NAMES = ['w-0', 'w-1', 'w-2'];
const parentOf = (version: string): KubeObject => ({
  apiVersion: 'example.com/v1',
  kind: 'Set',
  metadata: { name: 's', namespace: 'ns', uid: 'pu' },
  spec: { version, replicas: 3 },
});
/**
 * The hook: one Widget per name, its image from the parent's version and the hook's own release; every third
 * release answers one Widget fewer.
 */
const namesOf = (release: number) => (release % 3 === 2 ? NAMES.slice(0, 2) : NAMES);
const hook =
  (release: number) =>
  (parent: KubeObject): KubeObject[] =>
    namesOf(release).map((name) => ({
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name },
      spec: { image: `${(parent.spec as { version: string }).version}:${release}` },
    }));
const prepare = (parent: KubeObject, answered: KubeObject[]) => prepareChildren(answered, { parent, kinds, generateSelector: true });
const ready = (ok: boolean) => ({ conditions: [{ type: 'Ready', status: ok ? 'True' : 'False' }] });

interface Cluster {
  parent: KubeObject;
  revisions: Map<string, { revision: ControllerRevision; frozen: string }>;
  children: Map<string, KubeObject>;
  release: number;
  rv: number;
}

function newRevision(c: Cluster, parent: KubeObject, number: number): ControllerRevision {
  const data = revisionData(parent, PATHS);
  const name = revisionName(parent.metadata.name!, revisionHash(data, 0));
  const existing = c.revisions.get(name);
  if (existing) return existing.revision;
  const revision: ControllerRevision = {
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      labels: parentLabels(parent),
      ownerReferences: [newControllerRef(parent)],
      resourceVersion: String((c.rv += 1)),
    },
    data,
    revision: number,
  };
  c.revisions.set(name, { revision, frozen: JSON.stringify(revision) });
  return revision;
}

interface PassOutcome {
  latest: string;
  /** Children written from another revision to the latest with a new content (not a relabel). */
  moves: string[];
  waiting: string | undefined;
  reason: string;
}

/** One pass on `seen` (a snapshot, maybe stale); its writes land on `c` only where what it read is still there. */
function pass(c: Cluster, seen: Cluster, limit: number, kinds: readonly ChildKind[]): PassOutcome {
  const parent = seen.parent;
  const observed = [...seen.children.values()];
  const revisions = parentRevisions(
    parent,
    [...seen.revisions.values()].map((r) => r.revision),
  );
  const data = revisionData(parent, PATHS);
  const latest = latestRevision(revisions, data) ?? newRevision(c, parent, maxRevision(revisions) + 1);
  const all = revisions.includes(latest) ? revisions : [...revisions, latest];
  const asked = [latest, ...revisionsToAsk(all, latest.metadata.name!, observed, kinds)];
  const answers = new Map(
    asked.map((r) => [r.metadata.name!, prepare(parent, hook(c.release)(r === latest ? parent : parentAt(parent, r.data, PATHS)))]),
  );
  const plan = planRollout({ latest: latest.metadata.name!, answers, observed, kinds });
  const changes = diffChildren(observed, plan.desired, (o) => (plan.relabel.has(identityOf(o)) ? 'InPlace' : kinds[0]!.method));
  const moves: string[] = [];
  const moved = (o: KubeObject, d: KubeObject) => {
    const changed = o.metadata.annotations?.[APPLIED_ANNOTATION] !== d.metadata.annotations?.[APPLIED_ANNOTATION];
    if (changed && labelOf(o) !== latest.metadata.name && labelOf(d) === latest.metadata.name) moves.push(identityOf(d));
    return changed;
  };
  for (const { desired: d, observed: o } of changes.recreate) {
    // Never a recreate for a relabel: only a child whose content changes is deleted and made again.
    expect(o.metadata.annotations?.[APPLIED_ANNOTATION]).not.toBe(d.metadata.annotations?.[APPLIED_ANNOTATION]);
    if (c.children.get(d.metadata.name!)?.metadata.resourceVersion !== o.metadata.resourceVersion) continue; // precondition
    moved(o, d);
    c.children.delete(d.metadata.name!);
    changes.create.push(d);
  }
  for (const d of changes.create) {
    if (c.children.has(d.metadata.name!)) continue; // AlreadyExists
    c.children.set(d.metadata.name!, { ...d, metadata: { ...d.metadata, resourceVersion: String((c.rv += 1)), generation: 1 } });
  }
  for (const { desired: d, observed: o } of changes.update) {
    const now = c.children.get(d.metadata.name!);
    if (!now || now.metadata.resourceVersion !== o.metadata.resourceVersion) continue; // Conflict
    const changed = moved(now, d);
    c.children.set(d.metadata.name!, {
      ...d,
      metadata: { ...d.metadata, resourceVersion: String((c.rv += 1)), generation: (now.metadata.generation ?? 1) + (changed ? 1 : 0) },
      // A new spec is not Ready until the child's own controller says so.
      status: changed ? ready(false) : now.status,
    });
  }
  for (const o of changes.delete)
    if (c.children.get(o.metadata.name!)?.metadata.resourceVersion === o.metadata.resourceVersion) c.children.delete(o.metadata.name!);
  for (const r of revisionsToDelete(all, plan.live, limit)) c.revisions.delete(r.metadata.name!);
  return { latest: latest.metadata.name!, moves, waiting: plan.waiting, reason: plan.updated.reason };
}

const snapshot = (c: Cluster): Cluster => structuredClone(c);
const labelOf = (o: KubeObject) => o.metadata.labels?.[REVISION_LABEL];

type Action =
  | { t: 'set'; version: string }
  | { t: 'ready'; i: number; ok: boolean }
  | { t: 'release' }
  | { t: 'pass' }
  | { t: 'stale'; back: number }
  | { t: 'dup' }
  | { t: 'label-removed'; i: number };

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom('a', 'b', 'c').map((version): Action => ({ t: 'set', version })) },
  { weight: 3, arbitrary: fc.record({ i: fc.nat(2), ok: fc.boolean() }).map(({ i, ok }): Action => ({ t: 'ready', i, ok })) },
  { weight: 1, arbitrary: fc.constant<Action>({ t: 'release' }) },
  { weight: 6, arbitrary: fc.constant<Action>({ t: 'pass' }) },
  { weight: 2, arbitrary: fc.nat(4).map((back): Action => ({ t: 'stale', back })) },
  { weight: 1, arbitrary: fc.constant<Action>({ t: 'dup' }) },
  { weight: 1, arbitrary: fc.nat(2).map((i): Action => ({ t: 'label-removed', i })) },
);

describe('a rollout over timelines', () => {
  test('one child moves per pass, only while every child on the latest revision passes; revisions are never changed nor deleted while live; it converges (RollingInPlace and RollingRecreate)', () => {
    fc.assert(
      fc.property(
        fc.array(action, { maxLength: 40 }),
        fc.integer({ min: 0, max: 2 }),
        fc.constantFrom<Method>('RollingInPlace', 'RollingRecreate'),
        (actions, limit, method) => {
          const kinds = kindsFor(method);
          const c: Cluster = { parent: parentOf('a'), revisions: new Map(), children: new Map(), release: 0, rv: 0 };
          const history: Cluster[] = [];
          const check = (seen: Cluster, out: PassOutcome) => {
            expect(out.moves.length).toBeLessThanOrEqual(1);
            if (out.moves.length) {
              // The snapshot the pass decided on: every latest child there, written as the latest answer has it, Ready.
              const latestAnswer = prepare(seen.parent, hook(c.release)(seen.parent));
              for (const d of latestAnswer) {
                const o = seen.children.get(d.metadata.name!);
                if (o && labelOf(o) === out.latest) expect(unhappy(o, d, widgets.rolling!)).toBeUndefined();
              }
            }
            // Revisions: never changed; none a child belongs to is gone; the latest is there.
            for (const { revision, frozen } of c.revisions.values()) expect(JSON.stringify(revision)).toBe(frozen);
            expect(c.revisions.has(out.latest)).toBe(true);
          };
          const liveKept = () => {
            for (const o of c.children.values()) if (labelOf(o)) expect(c.revisions.has(labelOf(o)!)).toBe(true);
          };
          let last: Cluster | undefined;
          for (const a of actions) {
            history.push(snapshot(c));
            switch (a.t) {
              case 'set':
                c.parent = { ...parentOf(a.version), metadata: { ...c.parent.metadata } };
                break;
              case 'ready': {
                const o = c.children.get(NAMES[a.i]!);
                if (o)
                  c.children.set(o.metadata.name!, {
                    ...o,
                    status: ready(a.ok),
                    metadata: { ...o.metadata, resourceVersion: String((c.rv += 1)) },
                  });
                break;
              }
              case 'release':
                c.release += 1;
                break;
              case 'label-removed': {
                const o = c.children.get(NAMES[a.i]!);
                if (o) {
                  const { [REVISION_LABEL]: _gone, ...labels } = o.metadata.labels ?? {};
                  c.children.set(o.metadata.name!, { ...o, metadata: { ...o.metadata, labels, resourceVersion: String((c.rv += 1)) } });
                }
                break;
              }
              case 'pass': {
                last = snapshot(c);
                check(last, pass(c, last, limit, kinds));
                liveKept();
                break;
              }
              case 'stale': {
                // A pass that read the cluster some steps ago (reordered delivery): its writes conflict where it is behind.
                const seen = history[Math.max(0, history.length - 1 - a.back)]!;
                check(seen, pass(c, seen, limit, kinds));
                break;
              }
              case 'dup':
                if (last) check(last, pass(c, last, limit, kinds));
                break;
            }
          }
          // Everything Ready from now on, nothing else changing: the rollout reaches the latest revision.
          let out: PassOutcome | undefined;
          for (let i = 0; i < 4 * NAMES.length + 2; i += 1) {
            for (const o of c.children.values()) c.children.set(o.metadata.name!, { ...o, status: ready(true) });
            const seen = snapshot(c);
            out = pass(c, seen, limit, kinds);
            check(seen, out);
            liveKept();
            // A fresh pass leaves each child as its own revision's answer has it.
            for (const o of c.children.values()) {
              const r = c.revisions.get(labelOf(o) ?? '')?.revision;
              if (!r) continue;
              const at = r.metadata.name === out.latest ? c.parent : parentAt(c.parent, r.data, PATHS);
              const want = prepare(c.parent, hook(c.release)(at)).find((d) => d.metadata.name === o.metadata.name)!;
              expect(o.metadata.annotations?.[APPLIED_ANNOTATION]).toBe(want.metadata.annotations?.[APPLIED_ANNOTATION]);
            }
          }
          expect(out!.reason).toBe('OnLatestRevision');
          const want = prepare(c.parent, hook(c.release)(c.parent));
          expect([...c.children.keys()].sort()).toEqual(namesOf(c.release));
          for (const d of want) {
            const o = c.children.get(d.metadata.name!)!;
            expect(labelOf(o)).toBe(out!.latest);
            expect(o.metadata.annotations?.[APPLIED_ANNOTATION]).toBe(d.metadata.annotations?.[APPLIED_ANNOTATION]);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('decisions on examples', () => {
  const parentA = parentOf('a');
  const parentB = parentOf('b');
  const on = (d: KubeObject, revision: string, ok = true): KubeObject => ({
    ...d,
    metadata: { ...d.metadata, labels: { ...d.metadata.labels, [REVISION_LABEL]: revision }, resourceVersion: '1' },
    status: ready(ok),
  });
  const a = prepare(parentA, hook(0)(parentA));
  const b = prepare(parentB, hook(0)(parentB));

  test('the first child in answer order moves; then the rollout waits on it until it passes', () => {
    const observed = a.map((d) => on(d, 'rev-a'));
    const answers = new Map([
      ['rev-b', b],
      ['rev-a', a],
    ]);
    const first = planRollout({ latest: 'rev-b', answers, observed, kinds });
    expect(first.moved).toBe(identityOf(b[0]!));
    expect(first.updated).toMatchObject({ status: 'False', reason: 'RolloutProgressing', message: 'updating Widget w-0' });
    expect(first.live).toEqual(new Set(['rev-a', 'rev-b']));
    // w-0 written, not Ready yet: the rollout waits.
    const second = planRollout({ latest: 'rev-b', answers, observed: [on(b[0]!, 'rev-b', false), ...observed.slice(1)], kinds });
    expect(second.moved).toBeUndefined();
    expect(second.updated).toMatchObject({
      reason: 'RolloutWaiting',
      message: 'Widget w-0 fails its status check: condition Ready is not "True"',
    });
    expect(diffChildren([on(b[0]!, 'rev-b', false), ...observed.slice(1)], second.desired, () => 'InPlace').update).toEqual([]);
    // Ready: the next one moves.
    const third = planRollout({ latest: 'rev-b', answers, observed: [on(b[0]!, 'rev-b'), ...observed.slice(1)], kinds });
    expect(third.moved).toBe(identityOf(b[1]!));
  });

  test('a child the latest answer has as its own revision does moves at once (a relabel), and one on no known revision waits as it is', () => {
    const same = on(b[0]!, 'rev-a');
    const { [REVISION_LABEL]: _l, ...labels } = a[1]!.metadata.labels!;
    const unlabelled = { ...a[1]!, metadata: { ...a[1]!.metadata, labels }, status: ready(true) };
    const plan = planRollout({
      latest: 'rev-b',
      answers: new Map([['rev-b', b]]),
      observed: [same, unlabelled, on(a[2]!, 'rev-gone')],
      kinds,
    });
    expect(plan.desired[0]!.metadata.labels?.[REVISION_LABEL]).toBe('rev-b');
    // w-1 is next in order and every child on rev-b (w-0) passes: it moves; w-2 stays as it is.
    expect(plan.moved).toBe(identityOf(b[1]!));
    expect(plan.desired[2]).toEqual(on(a[2]!, 'rev-gone'));
    expect(plan.live).toEqual(new Set(['rev-b', 'rev-gone']));
  });

  test('trust boundary: a revision the parent does not control is never the latest nor asked about', () => {
    const rev = (name: string, revision: number, owner: KubeObject | undefined, parent: KubeObject): ControllerRevision => ({
      apiVersion: 'apps/v1',
      kind: 'ControllerRevision',
      metadata: { name, labels: parentLabels(parentA), ownerReferences: owner ? [newControllerRef(owner)] : [] },
      data: revisionData(parent, PATHS),
      revision,
    });
    const other = { ...parentA, metadata: { ...parentA.metadata, uid: 'someone-else' } };
    // Same labels, the parent's current fields, a higher number: but an orphan, or another object's.
    const listed = [rev('mine', 1, parentA, parentA), rev('orphan', 7, undefined, parentA), rev('foreign', 8, other, parentA)];
    const mine = parentRevisions(parentA, listed);
    expect(mine.map((r) => r.metadata.name)).toEqual(['mine']);
    expect(latestRevision(mine, revisionData(parentA, PATHS))?.metadata.name).toBe('mine');
    // A child labelled with the foreign revision: not asked about, so it waits as it is.
    const child = on(a[0]!, 'foreign');
    expect(revisionsToAsk(mine, 'mine', [child], kinds)).toEqual([]);
  });

  test('revisions to delete: never the latest nor a live one, the oldest others beyond the limit', () => {
    const rev = (name: string, revision: number) => ({ metadata: { name }, revision }) as ControllerRevision;
    const revs = [rev('r1', 1), rev('r2', 2), rev('r3', 3), rev('r4', 4)];
    expect(revisionsToDelete(revs, new Set(['r1', 'r2']), 0).map((r) => r.metadata.name)).toEqual(['r3']);
    expect(revisionsToDelete(revs, new Set(['r2']), 1).map((r) => r.metadata.name)).toEqual(['r1']);
  });

  test('parentAt keeps a field the revision does not hold (fieldPaths grown since it was taken)', () => {
    const p = { ...parentB, spec: { version: 'b', replicas: 5, extra: 1 } };
    expect(parentAt(p, { spec: { version: 'a' } } as never, ['spec.version', 'spec.extra']).spec).toEqual({
      version: 'a',
      replicas: 5,
      extra: 1,
    });
  });

  test("parentAt puts a revision's fields on the parent, removing one the revision had absent", () => {
    const p = { ...parentB, spec: { version: 'b', replicas: 5, extra: 1 } };
    expect(parentAt(p, { spec: { version: 'a', extra: null } } as never, ['spec.version', 'spec.extra']).spec).toEqual({
      version: 'a',
      replicas: 5,
    });
  });
});
