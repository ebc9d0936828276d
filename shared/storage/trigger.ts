// The storage migration trigger's decisions (docs/controllers/storage-migration.md), pure: what a reporter writes for one resource after a
// poll, and what the leader does about one StorageState. The shell (functions/storage) reads discovery and the
// cluster, applies these with compare-and-set writes, and fences the leader's actions on its DynamoDB lease.
//
// Where this departs from the upstream design's text, and why: docs/design/storage-trigger.md.
import { shortHash } from '../json.ts';
import {
  isTerminal,
  storageStateName,
  UNKNOWN,
  type MigrationPhase,
  type ReporterEntry,
  type StorageState,
  type StorageStateCondition,
  type StorageStateStatus,
} from './api.ts';

export const DEFAULT_PERIOD_MS = 10 * 60_000;
/** Entries of reporters silent for this many periods are removed (reporter ids change on restart). */
export const FORGET_AFTER_PERIODS = 3;
/**
 * A reporter silent for longer than this may have missed a change: one period, and half a period more because
 * scheduled invocations drift by seconds and treating every poll as late would re-migrate everything.
 */
export const MISSED_AFTER_PERIODS = 1.5;

/**
 * Polls a reporter may miss in a row (a throttled or failed invocation) before its silence persists Unknown,
 * when its last successful poll is known: each missed poll raises an alarm instead. With one, the blind window is
 * 25 minutes, not 20: the same half period of grace (docs/operations/operating.md#a-missed-poll).
 */
export const TOLERATED_MISSED_POLLS = 1;

/**
 * What a report writes: a new state; a change a migration must not outlive (hash, entries or persisted: the epoch
 * moves); the state's summary or conditions only (no epoch); or this reporter's heartbeat only.
 */
export type ReportChange = 'created' | 'hash' | 'status' | 'heartbeat';

/**
 * The condition a reporter sets on the states of a group version whose discovery it could not read: those get no
 * heartbeat from it (docs/controllers/storage-migration.md#a-group-version-whose-discovery-fails).
 */
export const DISCOVERY_FAILED = 'DiscoveryFailed';

export interface Observation {
  reporter: string;
  hash: string;
  now: Date;
  /** The reporter's last successful poll before this one (DynamoDB), if one is recorded. */
  lastPoll?: Date | undefined;
}

/** How many polls a reporter has missed since its last successful one (none recorded: none known). */
export function missedPolls(lastPoll: Date | undefined, now: Date, periodMs = DEFAULT_PERIOD_MS): number {
  if (!lastPoll) return 0;
  const periods = (now.getTime() - lastPoll.getTime()) / periodMs;
  return periods <= MISSED_AFTER_PERIODS ? 0 : Math.ceil(periods - MISSED_AFTER_PERIODS);
}

/**
 * Whether a reporter's entry is too old to vouch that no change was missed. An entry the reporter's last
 * successful poll wrote (a poll succeeds only once every resource's entry is written) may be as old as
 * TOLERATED_MISSED_POLLS more periods; any other only MISSED_AFTER_PERIODS, as its heartbeat says.
 */
function silent(e: ReporterEntry, now: Date, periodMs: number, lastPoll: Date | undefined): boolean {
  const seenByLastPoll = lastPoll !== undefined && heartbeatMs(e) >= Math.floor(lastPoll.getTime() / 1000) * 1000;
  if (seenByLastPoll && missedPolls(lastPoll, now, periodMs) <= TOLERATED_MISSED_POLLS) return false;
  return heartbeatMs(e) < now.getTime() - MISSED_AFTER_PERIODS * periodMs;
}

/** The status after one reporter's poll saw `hash` for the resource (the HA reporter steps). */
export function report(
  status: StorageStateStatus | undefined,
  obs: Observation,
  periodMs = DEFAULT_PERIOD_MS,
): { status: StorageStateStatus; change: ReportChange } {
  const entry: ReporterEntry = { reporterID: obs.reporter, currentStorageVersionHash: obs.hash, lastHeartbeatTime: rfc3339(obs.now) };
  if (!status || (!status.currentStorageVersionHashes?.length && !status.persistedStorageVersionHashes?.length)) {
    return {
      status: summarised({ currentStorageVersionHashes: [entry], persistedStorageVersionHashes: [UNKNOWN] }, obs.now),
      change: 'created',
    };
  }
  const before = persistedOf(status);
  const previous = status.currentStorageVersionHashes?.find((e) => e.reporterID === obs.reporter);
  // Missing (new, forgotten, or the state was made by another reporter) or silent: its apiserver may have
  // changed version and back since, writing objects in a version no poll saw. Always a change, so the epoch
  // moves and no migration made before it narrows persisted.
  const missed = !previous || silent(previous, obs.now, periodMs, obs.lastPoll);
  const persisted = missed ? [UNKNOWN] : before.includes(UNKNOWN) || before.includes(obs.hash) ? [...before] : [...before, obs.hash];
  const forgetBefore = obs.now.getTime() - FORGET_AFTER_PERIODS * periodMs;
  const others = (status.currentStorageVersionHashes ?? []).filter((e) => e.reporterID !== obs.reporter && heartbeatMs(e) >= forgetBefore);
  const entries = [...others, entry].sort((a, b) => a.reporterID.localeCompare(b.reporterID));
  const changed =
    missed ||
    previous.currentStorageVersionHash !== obs.hash ||
    persisted.join('\n') !== before.join('\n') ||
    others.length !== (status.currentStorageVersionHashes?.length ?? 0) - 1;
  const conditions = (status.conditions ?? []).filter((c) => !(c.type === DISCOVERY_FAILED && reportedSince(c, entries)));
  const next = summarised(
    { currentStorageVersionHashes: entries, persistedStorageVersionHashes: persisted, ...(conditions.length ? { conditions } : {}) },
    obs.now,
  );
  const restated =
    next.currentStorageVersionHash !== status.currentStorageVersionHash || conditions.length !== (status.conditions?.length ?? 0);
  return { status: next, change: changed ? 'hash' : restated ? 'status' : 'heartbeat' };
}

/**
 * kube-storage-version-migrator's non-HA summary: `currentStorageVersionHash` is the hash discovery shows, which
 * with several reporters is the one every entry shows (absent while they disagree, so "persisted is exactly the
 * current hash" never holds mid-upgrade); `lastHeartbeatTime` is when a reporter last checked discovery and wrote.
 */
function summarised(status: StorageStateStatus, now: Date): StorageStateStatus {
  const hashes = new Set((status.currentStorageVersionHashes ?? []).map((e) => e.currentStorageVersionHash));
  const { currentStorageVersionHash: _, ...rest } = status;
  return { ...rest, ...(hashes.size === 1 ? { currentStorageVersionHash: [...hashes][0]! } : {}), lastHeartbeatTime: rfc3339(now) };
}

/** Every reporter's entry was written after the condition was set: each read the resource's discovery since. */
function reportedSince(c: StorageStateCondition, entries: readonly ReporterEntry[]): boolean {
  const set = Date.parse(c.lastTransitionTime ?? '');
  return Number.isFinite(set) && entries.every((e) => heartbeatMs(e) > set);
}

/**
 * The status that records a reporter's failed read of the group version(s) that serve the state's resource (so it
 * wrote no heartbeat), or undefined when the state already carries the condition. Cleared by a report once every
 * reporter's entry is newer than it.
 */
export function discoveryFailed(
  status: StorageStateStatus | undefined,
  failure: { reporter: string; groupVersions: readonly string[]; error: string; now: Date },
): StorageStateStatus | undefined {
  if (status?.conditions?.some((c) => c.type === DISCOVERY_FAILED && c.status === 'True')) return undefined;
  const condition: StorageStateCondition = {
    type: DISCOVERY_FAILED,
    status: 'True',
    reason: 'GroupVersionUnavailable',
    message: `reporter ${failure.reporter} could not read the discovery of ${failure.groupVersions.join(', ')}: ${failure.error.slice(0, 300)}`,
    lastTransitionTime: rfc3339(failure.now),
  };
  return { ...status, conditions: [...(status?.conditions ?? []).filter((c) => c.type !== DISCOVERY_FAILED), condition] };
}

/**
 * A heartbeat as a JSON patch (RFC 6902) for the status subresource: its test operations pin everything a
 * decision reads (the state's uid, this reporter's entry and hash at its index, the persisted list), so it
 * applies only where `report` would change nothing but this heartbeat, and other reporters' heartbeats, which
 * touch other entries, do not make it fail. Only for a state where `report` answered 'heartbeat'.
 */
export function heartbeatPatch(state: Pick<StorageState, 'metadata' | 'status'>, obs: Observation): object[] {
  const entries = state.status?.currentStorageVersionHashes ?? [];
  const i = entries.findIndex((e) => e.reporterID === obs.reporter);
  if (i < 0 || entries[i]!.currentStorageVersionHash !== obs.hash)
    throw new Error(`heartbeatPatch: reporter ${obs.reporter} has no entry with hash ${obs.hash}`);
  const at = `/status/currentStorageVersionHashes/${i}`;
  return [
    { op: 'test', path: '/metadata/uid', value: state.metadata.uid },
    { op: 'test', path: `${at}/reporterID`, value: obs.reporter },
    { op: 'test', path: `${at}/currentStorageVersionHash`, value: obs.hash },
    { op: 'test', path: '/status/persistedStorageVersionHashes', value: state.status?.persistedStorageVersionHashes ?? [] },
    { op: 'replace', path: `${at}/lastHeartbeatTime`, value: rfc3339(obs.now) },
    // `add` sets it whether or not the state had one (states written before it was kept).
    { op: 'add', path: '/status/lastHeartbeatTime', value: rfc3339(obs.now) },
  ];
}

/**
 * No reporter has heartbeated for over a period (and MISSED_AFTER_PERIODS' grace; with reporters' last
 * successful polls known, TOLERATED_MISSED_POLLS more): what is persisted may have missed changes (seed:
 * recreate with Unknown).
 */
export function isStale(
  status: StorageStateStatus | undefined,
  now: Date,
  periodMs = DEFAULT_PERIOD_MS,
  lastPolls: Readonly<Record<string, Date>> = {},
): boolean {
  // A state nobody reported into yet (just created by another reporter) is not stale: its first report sets Unknown.
  const entries = status?.currentStorageVersionHashes ?? [];
  if (entries.length === 0) return false;
  return entries.every((e) => silent(e, now, periodMs, Object.hasOwn(lastPolls, e.reporterID) ? lastPolls[e.reporterID] : undefined));
}

/** What the leader needs to know of a migration of the resource. */
export interface MigrationView {
  name: string;
  uid: string;
  /** Its ControllerRef is this StorageState: Outrigger made it, for this state's lifetime. */
  owned: boolean;
  /** The hash and the state's epoch it was made for (annotations); absent on migrations made by others. */
  hash?: string | undefined;
  epoch?: number | undefined;
  phase: MigrationPhase;
  /** When it reached its phase (for Failed: when to retry). */
  phaseTime?: string | undefined;
  /** A sampled control plane's generation when it was made (shared/storage/control-plane.ts). */
  controlPlaneGeneration?: number | undefined;
  /**
   * Why the leader's own record does not vouch for it (untrustedBecause): anyone who may create migrations can
   * forge one that looks like Outrigger's. Its outcome is never acted on; it is cancelled like an outdated one.
   */
  unrecorded?: string | undefined;
}

export interface DecideInput {
  state: StorageState;
  /** The reporters configured for the cluster: each must have a fresh entry before a migration starts. */
  reporters: readonly string[];
  migrations: readonly MigrationView[];
  /** The state's epoch: how many hash changes reporters have recorded (DynamoDB). */
  epoch: number;
  now: Date;
  periodMs?: number;
  /**
   * For a control plane reached through one endpoint only: its generation, and why it is not yet stable
   * (shared/storage/control-plane.ts). Absent where every apiserver has a reporter of its own.
   */
  controlPlane?: { generation: number; unstable?: string | undefined } | undefined;
}

export type Decision =
  | { action: 'none'; reason: string; cancel?: never }
  | { action: 'cancel'; reason: string; cancel: MigrationView[] }
  | {
      action: 'create';
      reason: string;
      hash: string;
      epoch: number;
      persisted: string[];
      cancel: MigrationView[];
      controlPlaneGeneration?: number | undefined;
    }
  | { action: 'narrow'; reason: string; hash: string; migration: MigrationView; cancel?: never };

/** The persisted hashes, with an empty or missing list read as Unknown (the default of docs/controllers/storage-migration.md#what-the-states-mean). */
export function persistedOf(status: StorageStateStatus | undefined): string[] {
  return status?.persistedStorageVersionHashes?.length ? status.persistedStorageVersionHashes : [UNKNOWN];
}

/** Reporters agree and persisted is exactly their hash: nothing to migrate (the leader's cheap check). */
export function isMigrated(status: StorageStateStatus | undefined): boolean {
  const hashes = new Set((status?.currentStorageVersionHashes ?? []).map((e) => e.currentStorageVersionHash));
  const persisted = persistedOf(status);
  return hashes.size === 1 && persisted.length === 1 && hashes.has(persisted[0]!);
}

/** The leader's one step for one StorageState (docs/controllers/storage-migration.md#what-the-states-mean). */
export function decide(input: DecideInput): Decision {
  const periodMs = input.periodMs ?? DEFAULT_PERIOD_MS;
  const status = input.state.status ?? {};
  const persisted = persistedOf(status);
  const entries = status.currentStorageVersionHashes ?? [];
  const hashes = new Set(entries.map((e) => e.currentStorageVersionHash));
  const ours = input.migrations.filter((m) => m.owned);
  const pending = ours.filter((m) => !isTerminal(m.phase));

  const unstable = input.controlPlane?.unstable;
  if (unstable) return pending.length ? { action: 'cancel', reason: unstable, cancel: pending } : { action: 'none', reason: unstable };
  if (hashes.size !== 1) {
    if (pending.length)
      return {
        action: 'cancel',
        reason: entries.length ? `reporters disagree (${[...hashes].join(', ')})` : 'no reporter has reported',
        cancel: pending,
      };
    return { action: 'none', reason: entries.length ? `reporters disagree (${[...hashes].join(', ')})` : 'no reporter has reported' };
  }
  const hash = [...hashes][0]!;
  const fits = (m: MigrationView) =>
    m.hash === hash && m.epoch === input.epoch && m.controlPlaneGeneration === input.controlPlane?.generation;
  const outdated = pending.filter((m) => !fits(m) || m.unrecorded);
  const waitOr = (reason: string): Decision =>
    outdated.length
      ? { action: 'cancel', reason: `${reason}; cancelling migrations made for another state`, cancel: outdated }
      : { action: 'none', reason };

  const missing = input.reporters.filter((r) => !entries.some((e) => e.reporterID === r));
  if (missing.length) return waitOr(`waiting for reporters ${missing.join(', ')}`);
  const freshAfter = input.now.getTime() - periodMs;
  const stale = entries.filter((e) => heartbeatMs(e) < freshAfter).map((e) => e.reporterID);
  if (stale.length) return waitOr(`reporters ${stale.join(', ')} have not reported within one period`);
  if (persisted.length === 1 && persisted[0] === hash) return waitOr('migrated');

  // Only the leader's recorded migrations count (docs/operations/security.md#the-migrator).
  const valid = ours.filter((m) => fits(m) && !m.unrecorded);
  const succeeded = valid.find((m) => m.phase === 'Succeeded');
  if (succeeded) {
    const unconfirmed = unconfirmedReporters(succeeded, entries, input.reporters);
    if (unconfirmed.length)
      return waitOr(`migration ${succeeded.name} succeeded; waiting for ${unconfirmed.join(', ')} to report ${hash} again after it`);
    return {
      action: 'narrow',
      reason: `migration ${succeeded.name} succeeded and every reporter confirmed ${hash} since`,
      hash,
      migration: succeeded,
    };
  }
  const running = valid.find((m) => !isTerminal(m.phase));
  if (running) return waitOr(`migration ${running.name} is ${running.phase.toLowerCase()}`);
  const failed = valid.find((m) => m.phase === 'Failed');
  if (failed) {
    const failedAt = Date.parse(failed.phaseTime ?? '');
    if (Number.isFinite(failedAt) && failedAt > freshAfter) return waitOr(`migration ${failed.name} failed; retrying one period after`);
  }
  return {
    action: 'create',
    reason: persisted.includes(UNKNOWN) ? 'what is stored is unknown' : `stored versions ${persisted.join(', ')}`,
    hash,
    epoch: input.epoch,
    persisted: [...persisted],
    cancel: ours,
    ...(input.controlPlane ? { controlPlaneGeneration: input.controlPlane.generation } : {}),
  };
}

/**
 * The configured reporters whose latest heartbeat is not after the migration's success. Compared in whole
 * seconds: heartbeats are written truncated to the second, and in-tree conditions carry seconds only, so a
 * later second is the only proof that a report was made after the success (clocks agreeing, as for leases).
 */
function unconfirmedReporters(m: MigrationView, entries: readonly ReporterEntry[], reporters: readonly string[]): string[] {
  const succeededSecond = Math.floor(Date.parse(m.phaseTime ?? '') / 1000);
  return reporters.filter((r) => {
    const e = entries.find((x) => x.reporterID === r);
    return !e || !(Math.floor(heartbeatMs(e) / 1000) > succeededSecond);
  });
}

/** The migration's name: fixed by the state, its epoch and the hash, so a repeated decision creates nothing new. */
export function migrationName(state: Pick<StorageState, 'metadata' | 'spec'>, hash: string, epoch: number): string {
  const suffix = shortHash({ uid: state.metadata.uid ?? '', hash, epoch }, 0);
  const base = storageStateName(state.spec.resource);
  return `${base.slice(0, 253 - 1 - suffix.length).replace(/[-.]+$/, '')}-${suffix}`;
}

function heartbeatMs(e: ReporterEntry): number {
  const t = Date.parse(e.lastHeartbeatTime);
  return Number.isFinite(t) ? t : -Infinity;
}

/** metav1.Time's wire format: seconds precision. */
export function rfc3339(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}

/**
 * How long a StorageState may list Unknown, or a migration stay Pending, Running or Failed, before an operator
 * should look: first sight takes about two periods (a migration, then the confirmation round), a failure is
 * retried one period after it, so an hour (six periods) is well past anything that is still moving.
 */
export const OVERDUE_AFTER_MS = 60 * 60_000;

/** What an operator should look at (the stack alarms on both; docs/controllers/storage-migration.md#alarms). */
export interface Overdue {
  /** States listing Unknown for over the threshold with no migration of theirs started within it. */
  unknown: string[];
  /** Migrations in their phase (not Succeeded) for over the threshold. */
  migrations: string[];
}

export function overdue(
  states: ReadonlyArray<Pick<StorageState, 'metadata' | 'status'>>,
  migrationsOf: (state: string) => ReadonlyArray<Pick<MigrationView, 'name' | 'phase' | 'phaseTime'> & { created?: string | undefined }>,
  now: Date,
  afterMs = OVERDUE_AFTER_MS,
): Overdue {
  const old = (time: string | undefined) => {
    const t = Date.parse(time ?? '');
    return !Number.isFinite(t) || now.getTime() - t > afterMs;
  };
  const out: Overdue = { unknown: [], migrations: [] };
  for (const s of states) {
    const name = s.metadata.name ?? '';
    const ms = migrationsOf(name);
    for (const m of ms) if (m.phase !== 'Succeeded' && old(m.phaseTime ?? m.created)) out.migrations.push(m.name);
    const moving = ms.some((m) => !isTerminal(m.phase) && !old(m.phaseTime ?? m.created));
    if (persistedOf(s.status).includes(UNKNOWN) && old(s.metadata.creationTimestamp ?? undefined) && !moving) out.unknown.push(name);
  }
  return out;
}
