// Outrigger's migrator, its pure part: which migrations it runs, the progress it keeps in a migration's status
// (so that "finished listing" and "not started" differ, and counts add up over invocations), when the leader
// queues a migration again, and when a CRD's status.storedVersions may be narrowed. The shell is
// functions/storage/migrator.ts; docs/controllers/storage-migration.md#the-migrator says why each rule is there.
import type { KubeObject } from '../kube/resource.ts';
import { HASH_ANNOTATION, isTerminal, phaseOf, phaseTime, type StorageState, type StorageVersionMigration } from './api.ts';

/**
 * The label that routes a migration.k8s.io migration to Outrigger's migrator: Outrigger's leader sets it on the
 * migrations it creates. It routes, and grants nothing: anyone who may create a migration may set it, so the
 * migrator runs one only if the leader recorded it (MigrationRecord).
 */
export const MIGRATOR_LABEL = 'outrigger.dev/migrator';
export const MIGRATOR_LABEL_VALUE = 'outrigger';
/** The migrator's lease on one migration: longer than an invocation (15 minutes), so only one runs it at a time. */
export const MIGRATOR_LEASE_MS = 15 * 60_000 + 60_000;

/** What the migrator has done so far for one migration: `status.progress`, written after every chunk. */
export interface MigrationProgress {
  /** Where the list goes on; empty before the first chunk, and once `complete`. */
  continueToken?: string;
  /** Every object has been listed and rewritten: what is left is the finish (storedVersions, conditions). */
  complete?: boolean;
  /** Summed over every invocation (an object rewritten twice, after a restarted list, counts twice). */
  rewritten: number;
  /** Rewritten by someone else between the list and the patch (a Conflict): done. */
  conflicts: number;
  /** Deleted between the list and the patch: done. */
  notFound: number;
  chunks: number;
  /** Continue tokens that had expired (410): gone on from the apiserver's inconsistent token, or restarted without one. */
  expiredTokens?: number;
  restarts?: number;
  /** For a CRD: its storage version and generation when the run started, to judge the finish against. */
  crd?: { storageVersion: string; generation: number };
  startTime?: string;
  /** When the progress last moved: the leader queues a Running migration again once this is older than the migrator's lease. */
  updateTime?: string;
}

export interface ChunkResult {
  rewritten: number;
  conflicts: number;
  notFound: number;
}

/**
 * What the storage leader records in DynamoDB, fenced on its lease, before it creates a migration: the one
 * thing the migrator trusts (docs/operations/security.md#the-migrator). A migration in the cluster, whoever made
 * it and whatever it carries, is run only when its name has a record and its resource and hash match it.
 */
export interface MigrationRecord {
  /** The StorageState it migrates. */
  state: string;
  resource: { group: string; version: string; resource: string };
  /** The storage version hash it was made for (its HASH_ANNOTATION). */
  hash: string;
  /** The leader lease's term the record was written under. */
  term: number;
  /** The migration's uid, recorded once the leader created it: a migration deleted and made again under the name is not it. */
  uid?: string;
}

export const migrationRecordKey = (cluster: string, migration: string) => ({ cluster, kind: 'storage-migration', name: migration });

/**
 * Why `m` must not be run (the migrator) or believed (the leader, which passes `requireUid`: it wrote the uid
 * itself once it created `m`), or undefined when the leader's record vouches for it.
 */
export function untrustedBecause(
  m: Pick<StorageVersionMigration, 'metadata' | 'spec'>,
  record: MigrationRecord | undefined,
  opts: { requireUid?: boolean } = {},
): string | undefined {
  if (!record) return "the storage leader recorded no migration of this name: a label alone hands nothing to Outrigger's migrator";
  const r = m.spec.resource;
  const asked = `${r.resource}.${r.group ?? ''}/${r.version ?? ''}`;
  const recorded = `${record.resource.resource}.${record.resource.group}/${record.resource.version}`;
  if (asked !== recorded) return `it names ${asked}, the storage leader recorded ${recorded}`;
  const hash = m.metadata.annotations?.[HASH_ANNOTATION];
  if (hash !== record.hash) return `its storage version hash ${hash ?? '(none)'} is not the recorded ${record.hash}`;
  if (record.uid ? record.uid !== m.metadata.uid : opts.requireUid)
    return `its uid ${m.metadata.uid ?? '(none)'} is not the one the storage leader recorded (${record.uid ?? 'none yet'})`;
  return undefined;
}

export function isOutriggers(m: Pick<StorageVersionMigration, 'metadata'>): boolean {
  return m.metadata.labels?.[MIGRATOR_LABEL] === MIGRATOR_LABEL_VALUE;
}

export function progressOf(m: Pick<StorageVersionMigration, 'status'>): MigrationProgress | undefined {
  const p = (m.status as { progress?: Partial<MigrationProgress> } | undefined)?.progress;
  if (!p) return undefined;
  return { ...p, rewritten: p.rewritten ?? 0, conflicts: p.conflicts ?? 0, notFound: p.notFound ?? 0, chunks: p.chunks ?? 0 };
}

/** A run's first progress, before any chunk. */
export function startProgress(now: Date, crd?: MigrationProgress['crd']): MigrationProgress {
  const at = now.toISOString();
  return {
    continueToken: '',
    complete: false,
    rewritten: 0,
    conflicts: 0,
    notFound: 0,
    chunks: 0,
    ...(crd ? { crd } : {}),
    startTime: at,
    updateTime: at,
  };
}

/** After one chunk: the counts added, and where the list goes on (nowhere: complete). */
export function afterChunk(p: MigrationProgress, chunk: ChunkResult, next: string | undefined, now: Date): MigrationProgress {
  return {
    ...p,
    continueToken: next ?? '',
    complete: !next,
    rewritten: p.rewritten + chunk.rewritten,
    conflicts: p.conflicts + chunk.conflicts,
    notFound: p.notFound + chunk.notFound,
    chunks: p.chunks + 1,
    updateTime: now.toISOString(),
  };
}

/**
 * The continue token expired (410 Gone). With the apiserver's token the list goes on from there: the rest of
 * the list at the current revision, which is all a migration needs (an object created or written since was
 * written in the current storage version). Without one it starts over; rewriting twice is harmless.
 */
export function afterExpiry(p: MigrationProgress, token: string | undefined, now: Date): MigrationProgress {
  return token
    ? { ...p, continueToken: token, expiredTokens: (p.expiredTokens ?? 0) + 1, updateTime: now.toISOString() }
    : {
        ...p,
        continueToken: '',
        expiredTokens: (p.expiredTokens ?? 0) + 1,
        restarts: (p.restarts ?? 0) + 1,
        updateTime: now.toISOString(),
      };
}

/**
 * Whether a finished run may narrow its CRD's status.storedVersions to the storage version: only when this
 * migrator rewrote the whole list itself, and the CRD is as it was when the run started (same storage version,
 * same generation: any change to its versions in between could have let objects be written in another one).
 * Otherwise the reason it may not.
 */
export function storedVersionsVerdict(
  p: MigrationProgress | undefined,
  crdNow: { storageVersion: string | undefined; generation: number | undefined },
): { narrow: true } | { narrow: false; reason: string } {
  if (!p?.complete) return { narrow: false, reason: 'the list was not rewritten to the end by this migrator' };
  if (!p.crd) return { narrow: false, reason: "the CRD's storage version was not recorded when the run started" };
  if (crdNow.storageVersion !== p.crd.storageVersion)
    return {
      narrow: false,
      reason: `the storage version moved from ${p.crd.storageVersion} to ${crdNow.storageVersion ?? 'none'} during the run`,
    };
  if (crdNow.generation !== p.crd.generation)
    return { narrow: false, reason: `the CRD changed during the run (generation ${p.crd.generation} to ${crdNow.generation ?? 'none'})` };
  return { narrow: true };
}

/**
 * A migration of Outrigger's that nothing is working on: Pending since longer than `staleMs` after its
 * creation, or Running with no progress for longer than that (its message was dead-lettered, or the
 * invocation died). `staleMs` is the migrator's lease: by then no live invocation can still hold it.
 */
export function isStranded(m: Pick<StorageVersionMigration, 'metadata' | 'status'>, now: Date, staleMs: number): boolean {
  if (!isOutriggers(m)) return false;
  const phase = phaseOf(m);
  if (isTerminal(phase)) return false;
  const since = phase === 'Pending' ? m.metadata.creationTimestamp : (progressOf(m)?.updateTime ?? phaseTime(m, phase));
  const at = Date.parse(since ?? '');
  return !Number.isFinite(at) || now.getTime() - at > staleMs;
}

/** The ClusterRole cluster/rbac.yaml binds to outrigger:migrators. */
export const MIGRATOR_ROLE = 'outrigger-storage-migrator';

/**
 * The migrator's ClusterRole narrowed to the resources `states` name (`outrigger migrator-role`;
 * docs/operations/security.md#the-migrator): list and patch on those, per API group, instead of on every
 * resource. What list and patch on a resource allow is unchanged (a list returns Secrets' data; a patch may change
 * a Pod's image): the role narrows which resources, not what may be done to them.
 */
export function migratorRole(states: ReadonlyArray<Pick<StorageState, 'spec'>>): KubeObject & { rules: object[] } {
  const byGroup = new Map<string, Set<string>>();
  for (const { spec } of states) {
    const { group, resource } = spec.resource;
    if (!resource) continue;
    let set = byGroup.get(group);
    if (!set) byGroup.set(group, (set = new Set()));
    set.add(resource);
  }
  const groups = [...byGroup.keys()].sort();
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: MIGRATOR_ROLE, labels: { 'app.kubernetes.io/name': 'outrigger' } },
    rules: [
      ...groups.map((g) => ({ apiGroups: [g], resources: [...byGroup.get(g)!].sort(), verbs: ['list', 'patch'] })),
      { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get'] },
      { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions/status'], verbs: ['patch'] },
    ],
  };
}
