/* eslint-disable max-lines -- one section per part of shared/history, all built on the rev fixture below; a split would scatter one module's tests over files */
import fc from 'fast-check';
import { parsePath, revisionHash, revisionName, selectorLabels, targetState, type Json } from '../../shared/history/data.ts';
import { canonicalJson, semanticallyEqual } from '../../shared/json.ts';
import { compileSelector, matches, type LabelSelector } from '../../shared/ownership/index.ts';
import { applyRollback, matchesRevision, rollbackPatch } from '../../shared/history/rollback.ts';
import type { JsonObject } from '../../shared/history/data.ts';
import { FOREIGN_HISTORY, historyLimit, parsePolicy, reportedNotReady, truncationInputs } from '../../shared/history/policy.ts';
import {
  HASH_LABEL,
  PARENT_KIND_LABEL,
  PARENT_LABEL,
  currentKeyOf,
  decide,
  decideByKey,
  foreignRevisions,
  selectsRevision,
  sortRevisions,
  truncationMayDelete,
  truncationPlan,
  type ControllerRevision,
} from '../../shared/history/revisions.ts';
import {
  decideByDigest,
  observedSuffices,
  recordAnswers,
  recordHoldsListed,
  recordedRevisions,
  recordListSuffices,
  resyncCauses,
  RESYNC_TYPE,
  recordMayAnswer,
  recordFrom,
  recordRevisions,
  storedRecord,
  targetDigest,
} from '../../shared/history/record.ts';
import { compareResourceVersions } from '../../shared/kube/resource.ts';

const rev = (name: string, revision: number, image: string, created = '2026-01-01T00:00:00Z'): ControllerRevision => ({
  apiVersion: 'apps/v1',
  kind: 'ControllerRevision',
  metadata: { name, creationTimestamp: created, labels: { [HASH_LABEL]: name.split('-').pop()! } },
  data: { spec: { template: { spec: { image } } } },
  revision,
});

describe('target state', () => {
  test('is a replace patch of each path, and nothing else', () => {
    const sts = {
      spec: { replicas: 3, template: { metadata: { labels: { a: 'b' } } }, volumeClaimTemplates: [{ metadata: { name: 'd' } }] },
      status: { replicas: 3 },
    };
    expect(targetState(sts, ['spec.template', 'spec.volumeClaimTemplates'])).toEqual({
      spec: { template: { metadata: { labels: { a: 'b' } }, $patch: 'replace' }, volumeClaimTemplates: [{ metadata: { name: 'd' } }] },
    });
    expect(targetState({ spec: { replicas: 1 } }, ['spec.template'])).toEqual({ spec: { template: null } });
  });

  test('paths must be dotted and outside metadata and status', () => {
    expect(() => parsePath('spec..template')).toThrow('is not a dotted path');
    expect(() => parsePath('status.replicas')).toThrow('is not target state');
    expect(parsePath('spec.template')).toEqual(['spec', 'template']);
  });

  test('scaling never changes it', () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), (a, b) => {
        const t = { spec: { containers: [{ image: 'x' }] } };
        expect(
          semanticallyEqual(
            targetState({ spec: { replicas: a, template: t } }, ['spec.template']),
            targetState({ spec: { replicas: b, template: t } }, ['spec.template']),
          ),
        ).toBe(true);
      }),
    );
  });
});

describe('semantic equality', () => {
  const json: fc.Arbitrary<Json> = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(fc.string({ minLength: 1, maxLength: 4 }), tie('value'), { maxKeys: 4 }),
    ),
  })).value as fc.Arbitrary<Json>;

  // An empty map or list is a value (M4 in docs/controllers/history.md#the-2026-11-26-history-reviews-findings-and-where-each-stands): a pod-affinity term's `namespaceSelector: {}` selects every
  // namespace where an absent one selects the pod's own, and a custom resource's `tracing: {}` may switch tracing on.
  // Only null is the same as absent (it was `{ d: {}, e: [] }` ≡ absent here until then).
  test('ignores key order, nulls and $patch; an empty map or list is a value, not an absent field', () => {
    expect(semanticallyEqual({ a: 1, b: { c: null }, $patch: 'replace' }, { a: 1 })).toBe(true);
    expect(semanticallyEqual({ a: 1, b: { $patch: 'replace' } }, { b: {}, a: 1 })).toBe(true);
    expect(semanticallyEqual({ a: 1, b: { d: {} } }, { a: 1, b: {} })).toBe(false);
    expect(semanticallyEqual({ a: 1, b: { e: [] } }, { a: 1, b: {} })).toBe(false);
    expect(semanticallyEqual({ a: 1, b: {} }, { a: 1 })).toBe(false);
    expect(semanticallyEqual({ term: { topologyKey: 'zone', namespaceSelector: {} } }, { term: { topologyKey: 'zone' } })).toBe(false);
    expect(semanticallyEqual({ metadata: { creationTimestamp: null, labels: { x: 'y' } } }, { metadata: { labels: { x: 'y' } } })).toBe(
      true,
    );
    expect(semanticallyEqual({ a: 1 }, { a: 2 })).toBe(false);
    expect(semanticallyEqual({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
    expect(semanticallyEqual({ a: false }, {})).toBe(false);
  });

  test('is an equivalence, and canonical JSON does not depend on key order', () => {
    fc.assert(
      fc.property(json, json, (a, b) => {
        expect(semanticallyEqual(a, a)).toBe(true);
        expect(semanticallyEqual(a, b)).toBe(semanticallyEqual(b, a));
        const reversed = JSON.parse(
          JSON.stringify(a, (_k, v: unknown) =>
            v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
          ),
        ) as Json;
        expect(canonicalJson(reversed)).toBe(canonicalJson(a));
      }),
    );
  });

  test('null is the same as absent anywhere; an empty map or list added anywhere is a difference', () => {
    // Every place in a value where a field can go, by its path of keys.
    const places = (v: Json, at: string[] = []): string[][] =>
      v && typeof v === 'object' && !Array.isArray(v) ? [at, ...Object.entries(v).flatMap(([k, w]) => places(w, [...at, k]))] : [];
    const withField = (v: Json, at: string[], field: Json): Json => {
      const copy = JSON.parse(JSON.stringify(v)) as JsonObject;
      let o = copy;
      for (const k of at) o = o[k] as JsonObject;
      o['\u0000new'] = field;
      return copy;
    };
    const object = fc.dictionary(fc.string({ minLength: 1, maxLength: 4 }), json, { maxKeys: 4 });
    fc.assert(
      fc.property(object, fc.nat(), fc.constantFrom<Json>({}, []), (a, i, empty) => {
        const all = places(a);
        const at = all[i % all.length]!;
        expect(semanticallyEqual(withField(a, at, empty), a)).toBe(false);
        // (A null in an empty map leaves an object of nulls only, which is an absent one: not `{}`.)
        const enclosing = at.reduce<Json>((o, k) => (o as JsonObject)[k]!, a) as JsonObject;
        fc.pre(Object.keys(enclosing).length > 0);
        expect(semanticallyEqual(withField(a, at, null), a)).toBe(true);
        expect(semanticallyEqual(withField(a, at, empty), a)).toBe(false);
        // Digests follow: one per semantic class.
        expect(targetDigest(withField(a, at, empty), undefined)).not.toBe(targetDigest(a, undefined));
        expect(targetDigest(withField(a, at, null), undefined)).toBe(targetDigest(a, undefined));
      }),
    );
  });
});

describe('names and hashes', () => {
  test('the hash is vowel-free, depends on the collision count, and the name is a valid label value', () => {
    // Parent names as Kubernetes allows them (a DNS label here: the usual case), up to 253 characters.
    const parentName = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$/);
    fc.assert(
      fc.property(parentName, fc.nat({ max: 9 }), (parent, count) => {
        const hash = revisionHash({ spec: parent }, count);
        expect(hash).toMatch(/^[bcdfghjklmnpqrstvwxz2456789]{1,10}$/);
        const name = revisionName(parent, hash);
        expect(name.length).toBeLessThanOrEqual(63);
        expect(name.endsWith(`-${hash}`)).toBe(true);
        expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      }),
    );
    expect(revisionHash({ a: 1 }, 0)).not.toBe(revisionHash({ a: 1 }, 1));
    expect(revisionHash({ b: 1, a: 2 }, 0)).toBe(revisionHash({ a: 2, b: 1 }, 0));
  });

  test('names made before `{}` became a value are the names the same data gets now: empty maps and lists are not hashed', () => {
    // Pinned from the code before (15f809b's shortHash): an upgrade renames nothing and recreates nothing.
    const template = { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'app:1' }] } };
    const withEmpties = {
      metadata: { labels: { app: 'web' } },
      spec: { containers: [{ name: 'c', image: 'app:1', resources: {} }], securityContext: {}, tolerations: [] },
    };
    expect(revisionHash({ spec: { template: { $patch: 'replace', ...template } } }, 0)).toBe('6495cdf845');
    expect(revisionHash({ spec: { template: { $patch: 'replace', ...template } } }, 3)).toBe('644589b988');
    expect(revisionHash({ spec: { template: { $patch: 'replace', ...withEmpties } } }, 0)).toBe('6495cdf845');
  });
});

describe('history decisions', () => {
  const history = fc
    .uniqueArray(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.constantFrom('a', 'b', 'c', 'd', 'e')), {
      selector: (t) => t[0],
      maxLength: 8,
    })
    .map((ts) => ts.map(([n, img], i) => rev(`p-${i}x${n}`, n, img, `2026-01-0${(i % 9) + 1}T00:00:00Z`)));

  test('ordering is by number, then creation time, then name', () => {
    const sorted = sortRevisions([
      rev('p-b', 2, 'x', '2026-01-01T00:00:00Z'),
      rev('p-a', 2, 'x', '2026-01-01T00:00:00Z'),
      rev('p-c', 1, 'x', '2026-01-05T00:00:00Z'),
      rev('p-d', 2, 'x', '2025-12-31T00:00:00Z'),
    ]);
    expect(sorted.map((r) => r.metadata.name)).toEqual(['p-c', 'p-d', 'p-a', 'p-b']);
    fc.assert(
      fc.property(history, (h) => {
        const s = sortRevisions(h);
        for (let i = 1; i < s.length; i += 1) expect(s[i - 1]!.revision).toBeLessThanOrEqual(s[i]!.revision);
        expect(sortRevisions([...h].reverse())).toEqual(s);
      }),
    );
  });

  test('re-running a sync after carrying out its decision changes nothing (idempotent)', () => {
    fc.assert(
      fc.property(history, fc.constantFrom('a', 'b', 'c', 'f'), (h, image) => {
        const candidate = { spec: { template: { spec: { image } } } };
        const first = decide(candidate, h);
        let after = h;
        if (first.kind === 'create') after = [...h, rev('p-new', first.number, image)];
        if (first.kind === 'rollback') after = h.map((r) => (r === first.revision ? { ...r, revision: first.number } : r));
        expect(decide(candidate, after).kind).toBe('unchanged');
        if (first.kind !== 'unchanged') expect(first.number).toBeGreaterThan(Math.max(0, ...h.map((r) => r.revision)));
      }),
    );
  });

  test('truncation never removes a live revision or the latest, and keeps at most the limit of the rest', () => {
    fc.assert(
      fc.property(history, fc.subarray(['a', 'b', 'c', 'd', 'e']), fc.nat({ max: 5 }), (h, liveImages, limit) => {
        const live = new Set(
          h
            .filter((r) => liveImages.includes((r.data as { spec: { template: { spec: { image: string } } } }).spec.template.spec.image))
            .map((r) => r.metadata.name!),
        );
        const doomed = truncationPlan(h, live, limit);
        const latest = sortRevisions(h).at(-1);
        for (const r of doomed) {
          expect(live.has(r.metadata.name!)).toBe(false);
          expect(r).not.toBe(latest);
        }
        // The sync asks for truncation whenever it could delete something.
        if (doomed.length > 0) expect(truncationMayDelete(h.length, limit)).toBe(true);
        const remainingDead = h.filter((r) => !doomed.includes(r) && !live.has(r.metadata.name!) && r !== latest);
        expect(remainingDead.length).toBeLessThanOrEqual(limit);
        // Oldest first: nothing deleted is newer than something dead that is kept.
        for (const d of doomed) for (const k of remainingDead) expect(sortRevisions([d, k])[0]).toBe(d);
      }),
    );
  });
});

describe('revision labels for stock kubectl', () => {
  const labels = fc.dictionary(fc.constantFrom('app', 'tier', 'env'), fc.constantFrom('a', 'b', ''), { maxKeys: 3 });
  const requirement = fc.oneof(
    fc.record({
      key: fc.constantFrom('app', 'tier', 'env'),
      operator: fc.constantFrom('In' as const, 'NotIn' as const),
      values: fc.uniqueArray(fc.constantFrom('a', 'b', ''), { minLength: 1 }),
    }),
    fc.record({ key: fc.constantFrom('app', 'tier', 'env'), operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const) }),
  );
  const selector: fc.Arbitrary<LabelSelector> = fc.record(
    { matchLabels: labels, matchExpressions: fc.array(requirement, { maxLength: 3 }) },
    { requiredKeys: [] },
  );

  test("whatever the selector's form, a template the selector matches gives labels it matches; otherwise its matchLabels", () => {
    fc.assert(
      fc.property(selector, labels, (sel, templateLabels) => {
        const data = targetState({ spec: { template: { metadata: { labels: templateLabels } } } }, ['spec.template']);
        const got = selectorLabels(sel, data, ['spec.template']);
        if (matches(compileSelector(sel), templateLabels)) {
          expect(got).toEqual(templateLabels);
          expect(matches(compileSelector(sel), got)).toBe(true);
        } else {
          expect(got).toEqual(sel.matchLabels ?? {});
        }
      }),
    );
  });

  test('a selector of expressions alone is matched through the template; invalid labels are never returned', () => {
    const data = targetState({ spec: { template: { metadata: { labels: { app: 'web', version: '2' } } } } }, ['spec.template']);
    expect(selectorLabels({ matchExpressions: [{ key: 'app', operator: 'In', values: ['web'] }] }, data, ['spec.template'])).toEqual({
      app: 'web',
      version: '2',
    });
    const bad = targetState({ spec: { template: { metadata: { labels: { app: 'not valid!' } } } } }, ['spec.template']);
    expect(selectorLabels({}, bad, ['spec.template'])).toEqual({});
    expect(selectorLabels(undefined, data, ['spec.template'])).toEqual({});
  });
});

describe('rollback patches', () => {
  const applyPatch = applyRollback;
  const paths = ['spec.template', 'spec.sidecar', 'spec.deep.leaf'];
  const value = fc.oneof(
    fc.constant(undefined),
    fc.constantFrom('a', 'b'),
    fc.dictionary(fc.constantFrom('x', 'y'), fc.constantFrom('1', '2'), { maxKeys: 2 }),
  );
  const spec = fc.record(
    {
      template: value,
      sidecar: value,
      deep: fc.oneof(fc.constant(undefined), fc.constant('scalar'), fc.record({ leaf: value }, { requiredKeys: [] })),
      replicas: fc.nat(3),
    },
    { requiredKeys: ['replicas'] },
  );
  const object = spec.map((s) => JSON.parse(JSON.stringify({ metadata: { name: 'p', uid: 'u' }, spec: s })) as JsonObject);

  test("applied to the parent as it is, it makes the parent's target state the revision's, absent paths included, and touches nothing else", () => {
    fc.assert(
      fc.property(object, object, (parent, earlier) => {
        const data = targetState(earlier, paths);
        const after = applyPatch(parent, rollbackPatch(data, parent));
        expect(semanticallyEqual(targetState(after, paths), data)).toBe(true);
        expect((after.spec as JsonObject).replicas).toBe((parent.spec as JsonObject).replicas);
        // What the CLI calls the current revision: after the rollback the parent holds it, and the parent holds it
        // exactly when a sync sees the revision's target state in it.
        expect(matchesRevision(data, after)).toBe(true);
        expect(matchesRevision(data, parent)).toBe(semanticallyEqual(targetState(parent, paths), data));
      }),
    );
  });

  test('a rollback to a revision that held `{}` restores it, and the CLI does not take the parent without it for that revision', () => {
    const revision = targetState({ spec: { template: { affinity: { namespaceSelector: {}, topologyKey: 'zone' } }, tracing: {} } }, [
      'spec.template',
      'spec.tracing',
    ]);
    const parent = { metadata: { uid: 'u' }, spec: { template: { affinity: { topologyKey: 'zone' } } } };
    expect(matchesRevision(revision, parent)).toBe(false);
    const after = applyPatch(parent, rollbackPatch(revision, parent));
    expect(after.spec).toEqual({ template: { affinity: { namespaceSelector: {}, topologyKey: 'zone' } }, tracing: {} });
    expect(matchesRevision(revision, after)).toBe(true);
  });

  test('a path it removes fails the patch when it changed since the parent was read; so does another uid', () => {
    const parent = { metadata: { uid: 'u' }, spec: { template: { a: '1' }, sidecar: { image: 's:1' } } };
    const ops = rollbackPatch(targetState({ spec: { template: { a: '1' } } }, paths), parent);
    expect(ops).toContainEqual({ op: 'remove', path: '/spec/sidecar' });
    expect(() => applyPatch({ ...parent, spec: { ...parent.spec, sidecar: { image: 's:2' } } }, ops)).toThrow('/spec/sidecar: test failed');
    expect(() => applyPatch({ ...parent, metadata: { uid: 'v' } }, ops)).toThrow('/metadata/uid: test failed');
    expect(applyPatch(parent, ops)).toEqual({ metadata: { uid: 'u' }, spec: { template: { a: '1' } } });
  });
});

describe('policy parsing (the handler side of validation)', () => {
  test.each([
    [{ target: { apiVersion: 'apps/v1', kind: 'X' }, targetState: [] }, 'RevisionPolicy p: spec.targetState: names no field path'],
    [
      { target: { apiVersion: 'apps/v1', kind: 'X' }, targetState: ['status.x'] },
      'RevisionPolicy p: spec.targetState.0: field path "status.x" is not target state',
    ],
    [
      { target: { apiVersion: 'apps/v1', kind: 'X' }, targetState: ['spec.t'], revisionHistoryLimit: -2 },
      'RevisionPolicy p: spec.revisionHistoryLimit: must be 0 or more',
    ],
    [{ targetState: ['spec.t'] }, 'RevisionPolicy p: spec.target: Invalid input'],
  ])('rejects %j', (spec, message) => {
    expect(() => parsePolicy({ metadata: { name: 'p' }, spec })).toThrow(message);
  });

  test("a parent's limit: its annotation, else its own spec.revisionHistoryLimit, else the policy's", () => {
    const policy = parsePolicy({
      metadata: { name: 'p' },
      spec: {
        target: { apiVersion: 'apps/v1', kind: 'X' },
        targetState: ['spec.t'],
        revisionHistoryLimit: 7,
        statusRevisionPaths: ['status.current'],
      },
    });
    const parent = (annotations: Record<string, string>, spec: Record<string, unknown>, status: Record<string, unknown> = {}) => ({
      metadata: { annotations },
      spec,
      status,
    });
    expect(historyLimit(policy, parent({ 'outrigger.dev/revision-history-limit': '2' }, { revisionHistoryLimit: 3 }))).toBe(2);
    expect(historyLimit(policy, parent({}, { revisionHistoryLimit: 3 }))).toBe(3);
    expect(historyLimit(policy, parent({}, { revisionHistoryLimit: 0 }))).toBe(0);
    expect(historyLimit(policy, parent({ 'outrigger.dev/revision-history-limit': 'x' }, { revisionHistoryLimit: -1 }))).toBe(7);
    expect(historyLimit(policy, parent({}, { revisionHistoryLimit: '3' }))).toBe(7);
    // What truncation decides by from the parent alone: a change to either asks for a truncation.
    const inputs = (a: Record<string, string>, spec: Record<string, unknown>, status: Record<string, unknown>) =>
      truncationInputs(policy, parent(a, spec, status));
    expect(inputs({}, { replicas: 1 }, { current: 'r1' })).toBe(inputs({}, { replicas: 5 }, { current: 'r1', replicas: 5 }));
    expect(inputs({}, {}, { current: 'r1' })).not.toBe(inputs({}, {}, { current: 'r2' }));
    expect(inputs({}, { revisionHistoryLimit: 3 }, {})).not.toBe(inputs({}, { revisionHistoryLimit: 2 }, {}));
  });

  test('fills in the defaults', () => {
    expect(
      parsePolicy({ metadata: { name: 'p' }, spec: { target: { apiVersion: 'apps/v1', kind: 'X' }, targetState: ['spec.t'] } }).spec,
    ).toMatchObject({ revisionHistoryLimit: 10, mode: 'snapshot', statusRevisionPaths: [] });
  });
});

describe('which sync requests the history record answers', () => {
  const record = {
    digest: 'd1',
    revision: 'p-abc',
    number: 3,
    revisionsVersion: '120',
    revisionUid: 'rev-latest',
    truncation: '[10]',
    parentVersion: '118',
  };
  const cause = (kind: string, uid: string, rv: string, type: string) => `${kind}/c1/${uid}/${rv}/${type}`;
  const read = { resourceVersion: '119', digest: 'd1', truncation: '[10]', current: true };
  const observed = (resourceVersion: string, digest = 'd1', truncation = '[10]') => ({
    resourceVersion,
    digest,
    truncation,
    current: false,
  });

  test("the parent's own events, the echo of the record's write and deletions of older revisions", () => {
    expect(recordAnswers([cause('StatefulSet', 'p', '130', 'modified')], 'p', record, read)).toBe(true);
    expect(
      recordAnswers(
        [cause('ControllerRevision', 'rev-latest', '120', 'added'), cause('ControllerRevision', 'rev-old', '125', 'deleted')],
        'p',
        record,
      ),
    ).toBe(true);
  });

  test('not: a revision changed by someone else, the latest deleted, a generated object, another parent, no cause', () => {
    expect(recordAnswers([cause('ControllerRevision', 'rev-old', '121', 'modified')], 'p', record)).toBe(false);
    expect(recordAnswers([cause('ControllerRevision', 'rev-latest', '122', 'deleted')], 'p', record)).toBe(false);
    expect(recordAnswers([cause('Pod', 'pod-1', '123', 'deleted')], 'p', record, read)).toBe(false);
    expect(recordAnswers([cause('StatefulSet', 'q', '124', 'modified')], 'p', record, read)).toBe(false);
    expect(recordAnswers([], 'p', record, read)).toBe(false);
    expect(
      recordAnswers([cause('ControllerRevision', 'rev-latest', '120', 'added')], 'p', { digest: 'd1', revision: 'p-abc', number: 3 }),
    ).toBe(false);
  });

  test("a parent's event needs its state: another target state or truncation inputs, or none, is not answered", () => {
    const own = [cause('StatefulSet', 'p', '130', 'modified')];
    expect(recordAnswers(own, 'p', record)).toBe(false);
    expect(recordAnswers(own, 'p', record, { ...read, digest: 'd2' })).toBe(false);
    expect(recordAnswers(own, 'p', record, { ...read, truncation: '[3]' })).toBe(false);
  });

  test("an event's object answers without a read when at least as new as the record's state and the event", () => {
    // A label, annotation, status or replica change: the event's object holds the recorded target state.
    expect(recordAnswers([cause('StatefulSet', 'p', '130', 'modified')], 'p', record, observed('130'))).toBe(true);
    expect(recordAnswers([cause('StatefulSet', 'p', '118', 'modified')], 'p', record, observed('118'))).toBe(true);
    // Several events of one batch, the object of the latest: it stands for the earlier ones too.
    expect(
      recordAnswers(
        [
          cause('StatefulSet', 'p', '125', 'modified'),
          cause('ControllerRevision', 'rev-latest', '120', 'added'),
          cause('StatefulSet', 'p', '130', 'modified'),
        ],
        'p',
        record,
        observed('130'),
      ),
    ).toBe(true);
    // 1000 > 999: resourceVersions order as integers, not as strings.
    expect(recordAnswers([cause('StatefulSet', 'p', '1000', 'modified')], 'p', { ...record, parentVersion: '999' }, observed('1000'))).toBe(
      true,
    );
  });

  test("not: an event's object older than the record (a reordered or repeated delivery), older than an event, of no known order, or a deletion", () => {
    expect(recordAnswers([cause('StatefulSet', 'p', '117', 'modified')], 'p', record, observed('117'))).toBe(false);
    expect(recordAnswers([cause('StatefulSet', 'p', '131', 'modified')], 'p', record, observed('130'))).toBe(false);
    expect(
      recordAnswers([cause('StatefulSet', 'p', '130', 'modified')], 'p', { ...record, parentVersion: undefined }, observed('130')),
    ).toBe(false);
    expect(recordAnswers([cause('StatefulSet', 'p', 'x1', 'modified')], 'p', { ...record, parentVersion: 'x0' }, observed('x1'))).toBe(
      false,
    );
    expect(recordAnswers([cause('StatefulSet', 'p', '130', 'deleted')], 'p', record, observed('130'))).toBe(false);
    expect(recordAnswers([cause('StatefulSet', 'p', '130', 'modified')], 'p', record, observed('130', 'd2'))).toBe(false);
  });

  test('an event object stands in for the read under the lease only when at least as new as what the last holder decided on', () => {
    expect(observedSuffices('130', record)).toBe(true);
    expect(observedSuffices('118', record)).toBe(true);
    expect(observedSuffices('117', record)).toBe(false);
    expect(observedSuffices('130', undefined)).toBe(false);
    expect(observedSuffices('130', {})).toBe(false);
  });

  test('resourceVersions compare as apimachinery compares them', () => {
    expect(compareResourceVersions('9', '10')).toBe(-1);
    expect(compareResourceVersions('10', '10')).toBe(0);
    expect(compareResourceVersions('20', '19')).toBe(1);
    for (const bad of ['', '0', '010', 'a1', '-1', undefined]) expect(compareResourceVersions(bad, '5')).toBeUndefined();
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 10n ** 30n }),
        fc.bigInt({ min: 1n, max: 10n ** 30n }),
        (a, b) => compareResourceVersions(String(a), String(b)) === (a < b ? -1 : a > b ? 1 : 0),
      ),
    );
  });

  test("its revisions stand in for a list only for the parent's events and the echoes it accounts for, with the same defaults", () => {
    const withRevisions = {
      ...record,
      revisions: [{ name: 'p-a', uid: 'rev-old', resourceVersion: '100', number: 2, digest: 'd0' }],
      defaults: 'k',
    };
    expect(
      recordListSuffices(
        [cause('StatefulSet', 'p', '130', 'modified'), cause('ControllerRevision', 'rev-latest', '120', 'added')],
        'p',
        withRevisions,
        'k',
      ),
    ).toBe(true);
    expect(recordListSuffices([cause('ControllerRevision', 'rev-gone', '125', 'deleted')], 'p', withRevisions, 'k')).toBe(true);
    expect(recordListSuffices([cause('StatefulSet', 'p', '130', 'modified')], 'p', withRevisions, 'other defaults')).toBe(false);
    expect(recordListSuffices([cause('StatefulSet', 'p', '130', 'modified')], 'p', record, 'k')).toBe(false);
    expect(recordListSuffices([cause('ControllerRevision', 'orphan', '126', 'added')], 'p', withRevisions, 'k')).toBe(false);
    expect(recordListSuffices([cause('Pod', 'pod-1', '127', 'deleted')], 'p', withRevisions, 'k')).toBe(false);
  });

  test('a resync is answered only when the revisions listed now are the ones the record holds (M1: the record never vouches for what it cannot see)', () => {
    const resync = [`StatefulSet/c1/p/0/${RESYNC_TYPE}/stamp`];
    const owned = (uid: string) => ({
      metadata: { uid, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'p', uid: 'p', controller: true }] },
    });
    const orphan = (uid: string) => ({ metadata: { uid } });
    const others = (uid: string) => ({
      metadata: { uid, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'p', uid: 'old-p', controller: true }] },
    });
    const withRevisions = {
      ...record,
      revisions: [
        { name: 'p-a', uid: 'rev-old', resourceVersion: '100', number: 2, digest: 'd0' },
        { name: 'p-abc', uid: 'rev-latest', resourceVersion: '120', number: 3, digest: 'd1' },
      ],
    };
    expect(resyncCauses(resync)).toBe(true);
    expect(resyncCauses([cause('StatefulSet', 'p', '130', 'modified')])).toBe(false);
    // Listed as recorded (another parent's leftovers aside): answered.
    expect(recordHoldsListed(withRevisions, [owned('rev-old'), owned('rev-latest'), others('x')], 'p')).toBe(true);
    expect(recordHoldsListed(record, [owned('rev-latest')], 'p')).toBe(true);
    expect(recordAnswers(resync, 'p', record, read, true)).toBe(true);
    // The latest gone, a recorded one gone, one the record does not know, an orphan to adopt: not answered.
    expect(recordHoldsListed(withRevisions, [owned('rev-old')], 'p')).toBe(false);
    expect(recordHoldsListed(record, [], 'p')).toBe(false);
    expect(recordHoldsListed(withRevisions, [owned('rev-latest')], 'p')).toBe(false);
    expect(recordHoldsListed(withRevisions, [owned('rev-old'), owned('rev-latest'), owned('new')], 'p')).toBe(false);
    expect(recordHoldsListed(record, [owned('rev-latest'), orphan('o')], 'p')).toBe(false);
    expect(recordAnswers(resync, 'p', record, read)).toBe(false);
    // Nor by an event's object, nor by the record's revisions in place of a list.
    expect(recordAnswers(resync, 'p', record, { ...read, current: false }, true)).toBe(false);
    expect(recordListSuffices(resync, 'p', { ...withRevisions, defaults: 'k' }, 'k')).toBe(false);
  });

  test('deciding by digests is deciding by semantic equality, for revisions kept in the record', () => {
    const parent = { apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'p', namespace: 'n', uid: 'p' } };
    const images = ['a', 'b', 'c', 'b'];
    const revs = images.map((image, i) => ({
      ...rev(`p-${i}`, i + 1, image),
      metadata: { ...rev(`p-${i}`, i + 1, image).metadata, uid: `u${i}`, resourceVersion: String(10 + i) },
    }));
    const kept = recordedRevisions(recordRevisions(revs, undefined)!, parent);
    for (const image of ['a', 'b', 'c', 'd']) {
      const candidate = { spec: { template: { spec: { image } } } };
      const byData = decide(candidate, revs);
      const byDigest = decideByDigest(targetDigest(candidate, undefined), kept);
      expect({
        kind: byDigest.kind,
        name: 'revision' in byDigest ? byDigest.revision.metadata.name : undefined,
        number: 'number' in byDigest ? byDigest.number : undefined,
      }).toEqual({
        kind: byData.kind,
        name: 'revision' in byData ? byData.revision.metadata.name : undefined,
        number: 'number' in byData ? byData.number : undefined,
      });
    }
    expect(kept[0]?.metadata.ownerReferences?.[0]).toMatchObject({ uid: 'p', controller: true });
  });

  test('is read only when it may answer: never for a generated object', () => {
    expect(recordMayAnswer([cause('ControllerRevision', 'x', '1', 'added'), cause('StatefulSet', 'p', '2', 'modified')], 'p')).toBe(true);
    expect(recordMayAnswer([cause('Pod', 'pod-1', '3', 'deleted')], 'p')).toBe(false);
  });
});

describe('coexistence (docs/controllers/history.md#coexistence)', () => {
  const ref = (kind: string, apiVersion = 'apps/v1', uid = 'p', controller = true) => ({ apiVersion, kind, name: 'web', uid, controller });
  const rev = (name: string, labels: Record<string, string>, owners: ReturnType<typeof ref>[]) => ({
    metadata: { name, labels, ownerReferences: owners },
  });
  const sts = { group: 'apps', kind: 'StatefulSet' };

  test.each([
    [
      "the in-tree controller's: controlled, the hash label, none of ours",
      rev('a', { [HASH_LABEL]: 'h', app: 'web' }, [ref('StatefulSet')]),
      true,
    ],
    ["Outrigger's own (its parent label)", rev('b', { [HASH_LABEL]: 'h', [PARENT_LABEL]: 'web' }, [ref('StatefulSet')]), false],
    [
      "Outrigger's own (its parent-kind label only)",
      rev('c', { [HASH_LABEL]: 'h', [PARENT_KIND_LABEL]: 'StatefulSet.apps' }, [ref('StatefulSet')]),
      false,
    ],
    ['without the hash label: controlled by the parent all the same', rev('d', { app: 'web' }, [ref('StatefulSet')]), true],
    ['controlled by another kind', rev('e', { [HASH_LABEL]: 'h' }, [ref('DaemonSet')]), false],
    ['controlled by the kind of another group', rev('f', { [HASH_LABEL]: 'h' }, [ref('StatefulSet', 'example.com/v1')]), false],
    ['owned but not controlled', rev('g', { [HASH_LABEL]: 'h' }, [ref('StatefulSet', 'apps/v1', 'p', false)]), false],
    ['controlled by another parent of the kind', rev('h', { [HASH_LABEL]: 'h' }, [ref('StatefulSet', 'apps/v1', 'other')]), false],
  ])('%s', (_, revision, foreign) => {
    expect(foreignRevisions([revision], sts, 'p').map((r) => r.metadata.name)).toEqual(foreign ? [revision.metadata.name] : []);
  });

  test("LWS's own revisions (its name and key labels, no hash label) are another controller's history of a LeaderWorkerSet", () => {
    const lws = { group: 'leaderworkerset.x-k8s.io', kind: 'LeaderWorkerSet' };
    const own = rev(
      'serve-5c9b7f8d9-1',
      { 'leaderworkerset.sigs.k8s.io/name': 'serve', 'leaderworkerset.sigs.k8s.io/template-revision-hash': '5c9b7f8d9' },
      [ref('LeaderWorkerSet', 'leaderworkerset.x-k8s.io/v1')],
    );
    const outriggers = rev('serve-b6f5', { [PARENT_LABEL]: 'serve', [HASH_LABEL]: 'b6f5' }, [
      ref('LeaderWorkerSet', 'leaderworkerset.x-k8s.io/v1', 'p', false),
    ]);
    expect(foreignRevisions([own, outriggers], lws, 'p').map((r) => r.metadata.name)).toEqual(['serve-5c9b7f8d9-1']);
  });

  test("across the cluster (no parent uid), any parent of the kind's", () => {
    expect(foreignRevisions([rev('h', { [HASH_LABEL]: 'h' }, [ref('StatefulSet', 'apps/v1', 'other')])], sts)).toHaveLength(1);
  });

  test("a parent's selector selects a revision when it matches its labels, in either form; none, or a malformed one, selects nothing", () => {
    const ours = { [PARENT_LABEL]: 'web', [PARENT_KIND_LABEL]: 'statefulset.apps', [HASH_LABEL]: 'b6f5' };
    expect(selectsRevision({ matchLabels: { app: 'web' } }, ours)).toBe(false);
    expect(selectsRevision({ matchLabels: { app: 'web' } }, { ...ours, app: 'web' })).toBe(true);
    expect(selectsRevision({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['cache'] }] }, ours)).toBe(true);
    expect(selectsRevision({ matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, ours)).toBe(true);
    expect(selectsRevision({ matchExpressions: [{ key: 'app', operator: 'Exists' }] }, ours)).toBe(false);
    expect(selectsRevision('outrigger.dev/parent=web', ours)).toBe(true);
    expect(selectsRevision('app=web', ours)).toBe(false);
    expect(selectsRevision(undefined, ours)).toBe(false);
    expect(selectsRevision('app in (', ours)).toBe(false);
  });

  test('a policy is out of effect only for a ForeignHistory verdict on its current generation', () => {
    const policy = (generation: number, observedGeneration: number, status: string, reason: string) => ({
      metadata: { name: 'p', generation },
      status: { observedGeneration, conditions: [{ type: 'Ready', status, reason }] },
    });
    expect(reportedNotReady(policy(2, 2, 'False', FOREIGN_HISTORY))).toBe(true);
    expect(reportedNotReady(policy(3, 2, 'False', FOREIGN_HISTORY))).toBe(false); // a new spec (Coexist, perhaps) is checked again
    expect(reportedNotReady(policy(2, 2, 'True', 'Valid'))).toBe(false);
    // Found again from discovery by every reader, so a CRD installed later takes effect without a new check.
    expect(reportedNotReady(policy(2, 2, 'False', 'UnknownKind'))).toBe(false);
  });
});

describe('revisionKey mode (seed 001): decideByKey and currentKeyOf', () => {
  const LABEL = 'example.com/key';
  const rev = (name: string, revision: number, image: string, key?: string): ControllerRevision => ({
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: { name, ...(key ? { labels: { [LABEL]: key } } : {}) },
    data: { spec: { image } },
    revision,
  });
  const state = (image: string): Json => ({ spec: { image } });

  test('the four cases: an unknown current key keeps the key; its own state is unchanged; another revision holding the state answers; else a new key', () => {
    const owned = [rev('a', 1, 'v1', 'k1'), rev('b', 2, 'v2', 'k2')];
    expect(decideByKey(state('v3'), owned, LABEL, 'k9', 'h3')).toEqual({ kind: 'create', key: 'k9' });
    expect(decideByKey(state('v2'), owned, LABEL, 'k2', 'h2')).toEqual({ kind: 'unchanged', revision: owned[1] });
    expect(decideByKey(state('v1'), owned, LABEL, 'k2', 'h1')).toEqual({ kind: 'unchanged', revision: owned[0] });
    expect(decideByKey(state('v3'), owned, LABEL, 'k2', 'h3')).toEqual({ kind: 'create', key: 'h3' });
    expect(decideByKey(state('v3'), owned, LABEL, undefined, 'h3')).toEqual({ kind: 'create', key: 'h3' });
  });

  test('whatever the history: an unchanged answer holds the state, and a key other than the hash is the current one, which no revision has', () => {
    const images = fc.constantFrom('v1', 'v2', 'v3', 'v4');
    const keys = fc.constantFrom('k1', 'k2', 'k3');
    fc.assert(
      fc.property(
        fc.array(fc.tuple(images, fc.option(keys, { nil: undefined })), { maxLength: 8 }),
        images,
        fc.option(keys, { nil: undefined }),
        (history, image, current) => {
          const owned = history.map(([img, key], i) => rev(`r${i}`, i + 1, img, key));
          const d = decideByKey(state(image), owned, LABEL, current, 'hash');
          if (d.kind === 'unchanged') expect(d.revision.data).toEqual(state(image));
          else if (d.key !== 'hash') {
            expect(d.key).toBe(current);
            expect(owned.some((r) => r.metadata.labels?.[LABEL] === current)).toBe(false);
          } else expect(owned.some((r) => JSON.stringify(r.data) === JSON.stringify(state(image)))).toBe(false);
        },
      ),
    );
  });

  test('currentKeyOf: the object named like the parent, else the first by name; one being deleted, or without the key, does not count', () => {
    const obj = (name: string, key?: string, deleting = false) => ({
      metadata: { name, ...(key ? { labels: { [LABEL]: key } } : {}), ...(deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}) },
    });
    expect(currentKeyOf('web', [obj('b', 'kb'), obj('web', 'kw'), obj('a', 'ka')], LABEL)).toBe('kw');
    expect(currentKeyOf('web', [obj('b', 'kb'), obj('web', 'kw', true), obj('a', 'ka')], LABEL)).toBe('ka');
    expect(currentKeyOf('web', [obj('a'), obj('b', 'kb')], LABEL)).toBe('kb');
    expect(currentKeyOf('web', [], LABEL)).toBeUndefined();
  });
});

describe('the history record as DynamoDB keeps it (a head, and its revisions as parts)', () => {
  const revision = fc.record({
    name: fc.string({ maxLength: 8 }),
    uid: fc.uuid(),
    resourceVersion: fc.nat().map(String),
    number: fc.nat(),
    digest: fc.stringMatching(/^[0-9a-f]{4}$/),
  });
  const record = fc.record({
    digest: fc.stringMatching(/^[0-9a-f]{0,4}$/),
    revision: fc.string({ maxLength: 8 }),
    number: fc.nat(),
    parentVersion: fc.nat().map(String),
    revisions: fc.option(fc.uniqueArray(revision, { selector: (r) => r.uid, maxLength: 6 }), { nil: undefined }),
  });

  test('a record stored whole reads back as it was left, its revisions in the order of their numbers', () => {
    fc.assert(
      fc.property(record, (r) => {
        const { head, parts } = storedRecord(r);
        expect(JSON.stringify(head)).not.toContain('"revisions"');
        const back = recordFrom(JSON.parse(JSON.stringify(head)), JSON.parse(JSON.stringify(parts)));
        const { revisions, ...rest } = r;
        expect(back).toEqual(revisions ? { ...rest, revisions: [...revisions].sort((a, b) => a.number - b.number) } : rest);
      }),
    );
  });

  test('parts that do not add up (unknown, or other than the head counts) give a record with no revisions, never wrong ones', () => {
    fc.assert(
      fc.property(record, fc.option(fc.dictionary(fc.uuid(), revision, { maxKeys: 6 }), { nil: undefined }), (r, others) => {
        const { head, parts } = storedRecord(r);
        fc.pre(others === undefined || Object.keys(others).length !== Object.keys(parts).length);
        expect(recordFrom(head, others)?.revisions).toBeUndefined();
      }),
    );
  });

  test('a head left before the split keeps its revisions inside: they are not read (the next sync lists once)', () => {
    expect(recordFrom({ digest: 'd', revision: 'r', number: 1, revisions: [] } as never, {})).toEqual({
      digest: 'd',
      revision: 'r',
      number: 1,
    });
  });
});
