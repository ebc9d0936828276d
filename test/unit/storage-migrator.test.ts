// The migrator's pure part (shared/storage/migrator.ts): progress adds up over chunks and invocations, an expired
// token goes on or restarts without losing counts, storedVersions is narrowed only for a run verified end to end,
// only Outrigger's migrations that nothing works on are queued again, only what the leader recorded is trusted,
// and the narrowed migrator role names only the StorageStates' resources.
import fc from 'fast-check';
import {
  afterChunk,
  afterExpiry,
  conditionsFor,
  HASH_ANNOTATION,
  isStranded,
  migratorRole,
  MIGRATOR_LABEL,
  MIGRATOR_LABEL_VALUE,
  progressOf,
  startProgress,
  storedVersionsVerdict,
  untrustedBecause,
  type MigrationProgress,
  type MigrationRecord,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';

const t0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(t0.getTime() + ms);
const chunk = fc.record({ rewritten: fc.nat(500), conflicts: fc.nat(500), notFound: fc.nat(500) });
const token = fc.string({ minLength: 1, maxLength: 20 });

describe("the migrator's progress", () => {
  test('counts are the sums over every chunk, whatever the invocations and expired tokens in between; complete only after a last chunk', () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('chunk' as const), chunk, next: fc.option(token, { nil: undefined }) }),
      fc.record({ kind: fc.constant('expired' as const), token: fc.option(token, { nil: undefined }) }),
      // A new invocation reads the progress back from status: nothing is lost in between.
      fc.record({ kind: fc.constant('reread' as const) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 30 }), (steps) => {
        let p = startProgress(t0, { storageVersion: 'v2', generation: 3 });
        const sum = { rewritten: 0, conflicts: 0, notFound: 0, chunks: 0, expired: 0, restarts: 0 };
        let complete = false;
        steps.forEach((s, i) => {
          if (s.kind === 'chunk') {
            p = afterChunk(p, s.chunk, s.next, at(i));
            sum.rewritten += s.chunk.rewritten;
            sum.conflicts += s.chunk.conflicts;
            sum.notFound += s.chunk.notFound;
            sum.chunks += 1;
            complete = s.next === undefined;
            expect(p.continueToken).toBe(s.next ?? '');
          } else if (s.kind === 'expired') {
            p = afterExpiry(p, s.token, at(i));
            sum.expired += 1;
            if (!s.token) sum.restarts += 1;
            expect(p.continueToken).toBe(s.token ?? '');
          } else {
            p = progressOf({ status: JSON.parse(JSON.stringify({ progress: p })) as StorageVersionMigration['status'] })!;
          }
        });
        expect(p).toMatchObject({
          rewritten: sum.rewritten,
          conflicts: sum.conflicts,
          notFound: sum.notFound,
          chunks: sum.chunks,
          crd: { storageVersion: 'v2', generation: 3 },
        });
        expect(p.expiredTokens ?? 0).toBe(sum.expired);
        expect(p.restarts ?? 0).toBe(sum.restarts);
        // An expiry after the last chunk cannot happen (a complete run lists no more); before it, complete stays false.
        if (!steps.some((s) => s.kind === 'expired')) expect(p.complete ?? false).toBe(complete);
      }),
    );
  });

  test('not started (no progress) and finished listing (complete) are different states', () => {
    expect(progressOf({ status: {} })).toBeUndefined();
    expect(progressOf({ status: { progress: {} } as StorageVersionMigration['status'] })).toMatchObject({ rewritten: 0, chunks: 0 });
    expect(startProgress(t0)).toMatchObject({ complete: false, continueToken: '' });
    expect(afterChunk(startProgress(t0), { rewritten: 1, conflicts: 0, notFound: 0 }, undefined, t0)).toMatchObject({
      complete: true,
      continueToken: '',
    });
  });
});

describe("a CRD's storedVersions", () => {
  const done = (over: Partial<MigrationProgress> = {}): MigrationProgress => ({
    ...startProgress(t0, { storageVersion: 'v2', generation: 4 }),
    complete: true,
    ...over,
  });

  test('are narrowed only when this migrator listed to the end and the CRD is as it was when the run started', () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.boolean(),
        fc.constantFrom('v1', 'v2', undefined),
        fc.integer({ min: 1, max: 6 }),
        (complete, recorded, storageVersion, generation) => {
          const p = { ...done({ complete }), ...(recorded ? {} : { crd: undefined }) };
          const verdict = storedVersionsVerdict(p, { storageVersion, generation });
          expect(verdict.narrow).toBe(complete && recorded && storageVersion === 'v2' && generation === 4);
          if (!verdict.narrow) expect(verdict.reason).toMatch(/\S/);
        },
      ),
    );
    expect(storedVersionsVerdict(undefined, { storageVersion: 'v2', generation: 4 })).toMatchObject({ narrow: false });
    expect(storedVersionsVerdict(done(), { storageVersion: 'v2', generation: 5 })).toEqual({
      narrow: false,
      reason: 'the CRD changed during the run (generation 4 to 5)',
    });
  });
});

describe('stranded migrations', () => {
  const lease = 16 * 60_000;
  const migration = (
    over: {
      labelled?: boolean;
      phase?: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
      createdAgo?: number;
      phaseAgo?: number;
      progressAgo?: number | undefined;
    },
    now: Date,
  ): StorageVersionMigration => {
    const { labelled = true, phase = 'Pending', createdAgo = 0, phaseAgo = 0, progressAgo } = over;
    const conditions = phase === 'Pending' ? [] : conditionsFor([], phase, new Date(now.getTime() - phaseAgo), 'r');
    return {
      metadata: {
        name: 'm',
        creationTimestamp: new Date(now.getTime() - createdAgo).toISOString(),
        labels: labelled ? { [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE } : {},
      },
      spec: { resource: { group: 'example.com', version: 'v1', resource: 'widgets' } },
      status: {
        conditions,
        ...(progressAgo === undefined ? {} : { progress: { ...startProgress(new Date(now.getTime() - progressAgo)) } }),
      },
    } as StorageVersionMigration;
  };

  test("only Outrigger's, not finished, and idle for longer than the lease: Pending since creation, Running since its last progress", () => {
    const ago = fc.integer({ min: 0, max: 3 * lease });
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.constantFrom('Pending', 'Running', 'Succeeded', 'Failed'),
        ago,
        ago,
        fc.option(ago, { nil: undefined }),
        (labelled, phase, createdAgo, phaseAgo, progressAgo) => {
          const now = at(10 * lease);
          const m = migration({ labelled, phase, createdAgo, phaseAgo, progressAgo }, now);
          const idle = phase === 'Pending' ? createdAgo : (progressAgo ?? phaseAgo);
          expect(isStranded(m, now, lease)).toBe(labelled && (phase === 'Pending' || phase === 'Running') && idle > lease);
        },
      ),
    );
  });
});

describe('the trust boundary: what the migrator runs', () => {
  const record: MigrationRecord = {
    state: 'widgets.x.test',
    resource: { group: 'x.test', version: 'v2', resource: 'widgets' },
    hash: 'h2',
    term: 3,
  };
  const svm = (resource: StorageVersionMigration['spec']['resource'], hash?: string): StorageVersionMigration => ({
    apiVersion: 'migration.k8s.io/v1alpha1',
    kind: 'StorageVersionMigration',
    metadata: {
      name: 'm',
      labels: { [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE },
      ...(hash ? { annotations: { [HASH_ANNOTATION]: hash } } : {}),
    },
    spec: { resource },
  });
  test('a labelled migration without a record, or one whose resource, version or hash differs from it, is refused', () => {
    const wanted = { group: 'x.test', version: 'v2', resource: 'widgets' };
    expect(untrustedBecause(svm(wanted, 'h2'), record)).toBeUndefined();
    expect(untrustedBecause(svm(wanted, 'h2'), undefined)).toMatch(/recorded no migration of this name/);
    expect(untrustedBecause(svm({ ...wanted, resource: 'secrets', group: '' }, 'h2'), record)).toMatch(/names secrets\.\/v2/);
    expect(untrustedBecause(svm({ ...wanted, version: 'v1' }, 'h2'), record)).toMatch(/names widgets\.x\.test\/v1/);
    expect(untrustedBecause(svm(wanted, 'h1'), record)).toMatch(/hash h1 is not the recorded h2/);
    expect(untrustedBecause(svm(wanted), record)).toMatch(/hash \(none\)/);
  });
  test("a recorded uid must be the migration's; the leader, which records it once it created one, requires it", () => {
    const wanted = { group: 'x.test', version: 'v2', resource: 'widgets' };
    const withUid = (uid: string) => ({ ...svm(wanted, 'h2'), metadata: { ...svm(wanted, 'h2').metadata, uid } });
    expect(untrustedBecause(withUid('u1'), { ...record, uid: 'u1' })).toBeUndefined();
    expect(untrustedBecause(withUid('u2'), { ...record, uid: 'u1' })).toMatch(/uid u2 is not the one the storage leader recorded \(u1\)/);
    // Made again under a recorded name before the leader wrote the uid: the migrator still runs it, the leader does not believe it.
    expect(untrustedBecause(withUid('u2'), record)).toBeUndefined();
    expect(untrustedBecause(withUid('u2'), record, { requireUid: true })).toMatch(/recorded \(none yet\)/);
  });
});

describe("the migrator's narrowed role", () => {
  test("list and patch on the StorageStates' resources only, per group, and the CRD access the finish needs", () => {
    const state = (group: string, resource: string) => ({ spec: { resource: { group, resource } } });
    expect(
      migratorRole([state('x.test', 'widgets'), state('', 'configmaps'), state('x.test', 'gadgets'), state('x.test', 'widgets')]),
    ).toEqual({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'outrigger-storage-migrator', labels: { 'app.kubernetes.io/name': 'outrigger' } },
      rules: [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'patch'] },
        { apiGroups: ['x.test'], resources: ['gadgets', 'widgets'], verbs: ['list', 'patch'] },
        { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get'] },
        { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions/status'], verbs: ['patch'] },
      ],
    });
  });
});
