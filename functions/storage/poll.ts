// One reporter's poll (docs/controllers/storage-migration.md; every 10 minutes): read the reporter's discovery, and for every resource with
// a storage version hash write this reporter's entry into its StorageState (created when missing, recreated
// with Unknown when nobody heartbeated for a period), each write a compare-and-set on the resourceVersion.
// Except the steady-state write, a heartbeat: a JSON patch whose test operations pin what decisions read (see
// heartbeatPatch), so reporters heartbeating into one state at once do not conflict with each other.
// A hash change increments the resource's epoch in DynamoDB before the status is written, so a migration made
// before it can never narrow persisted. Then the leader step runs (see leader.ts).
// Where the apiservers sit behind one endpoint, the one reporter samples discovery over several fresh
// connections and reads the apiservers' identity leases: every hash any sample saw is reported (so persisted
// holds each), and the control plane's record moves on any change (shared/storage/control-plane.ts).
import pLimit from 'p-limit';
import {
  apiVersionOf,
  discoverStorageVersions,
  isKubeError,
  Resources,
  type KubeClient,
  type KubeObject,
  type StorageDiscovery,
  type StorageVersionEntry,
} from '../../shared/kube/index.ts';
import { VersionConflictError } from '../../shared/state/index.ts';
import {
  discoveryFailed,
  heartbeatPatch,
  isStale,
  mergeSamples,
  missedPolls,
  observeControlPlane,
  report,
  storageStateName,
  type ControlPlaneRecord,
  type SampledResource,
  type StorageState,
  type StorageStateStatus,
} from '../../shared/storage/index.ts';
import { controlPlaneKey, epochKey, pollKey, storageStates, type PollRecord, type StorageContext } from './context.ts';
import { lead, type LeadResult } from './leader.ts';

export interface PollResult {
  reporter: string;
  resources: number;
  created: number;
  changed: number;
  heartbeats: number;
  reset: number;
  conflicts: number;
  failedGroups: StorageDiscovery['failed'];
  /**
   * StorageStates of a group whose discovery failed that this poll could not report: they carry the condition
   * DiscoveryFailed (docs/controllers/storage-migration.md#a-group-version-whose-discovery-fails).
   */
  undiscovered: string[];
  /** Configured reporters that missed polls since their last successful one, and how many (docs/operations/operating.md#a-missed-poll). */
  missedPolls: Record<string, number>;
  leader?: LeadResult | undefined;
  /** Wall time of the reporting part and of the leader step. */
  reportMs?: number;
  leaderMs?: number;
}

const WRITE_CONCURRENCY = 16;
const CAS_ATTEMPTS = 6;

/** A reporter: its id and client; `sample` makes a client on a fresh connection (one endpoint, sampled). */
export interface Reporter {
  id: string;
  client: KubeClient;
  sample?: (() => KubeClient) | undefined;
}

export async function pollReporter(
  ctx: StorageContext,
  reporter: Reporter,
  opts: { groups?: readonly string[] | undefined; lead?: boolean } = {},
): Promise<PollResult> {
  const now = ctx.now();
  const started = Date.now();
  const [discovery, listed, lastPolls] = await Promise.all([
    discover(ctx, reporter, opts.groups, now),
    ctx.kube.listAll<StorageState>(storageStates),
    readLastPolls(ctx, reporter.id),
  ]);
  const existing = new Map<string, StorageState>(listed.map((s) => [s.metadata.name ?? '', s]));
  const missed = Object.entries(lastPolls)
    .map(([id, t]) => [id, missedPolls(t, now, ctx.periodMs)] as const)
    .filter(([, n]) => n > 0);
  const result: PollResult = {
    reporter: reporter.id,
    resources: discovery.resources.length,
    created: 0,
    changed: 0,
    heartbeats: 0,
    reset: 0,
    conflicts: 0,
    failedGroups: discovery.failed,
    undiscovered: [],
    missedPolls: Object.fromEntries(missed),
  };
  for (const f of discovery.failed)
    ctx.log?.('warn', 'discovery failed for a group version; resources served only there keep their last heartbeat', {
      reporter: reporter.id,
      ...f,
    });
  const round: Round = { reporter: reporter.id, now, lastPolls, result };
  const limit = pLimit(WRITE_CONCURRENCY);
  const reported = await Promise.all(
    discovery.resources.map((r) =>
      limit(async () => {
        // Each hash a sample saw, in turn: persisted gains every one of them.
        let state = existing.get(storageStateName(r));
        for (const hash of r.hashes) state = await reportResource(ctx, round, { ...r, storageVersionHash: hash }, state);
        return state!;
      }),
    ),
  );
  const marked = await markUndiscovered(ctx, reporter.id, now, {
    failed: discovery.failed,
    existing,
    reported: new Set(reported.map((s) => s.metadata.name ?? '')),
  });
  result.undiscovered = marked.map((s) => s.metadata.name ?? '');
  // Discovery listed and every entry it listed written: a successful poll. It vouches only for the entries it
  // wrote (silent() compares each entry's heartbeat with it), so a group version that failed neither counts as a
  // missed poll nor lets its resources' older entries pass as seen (docs/operations/operating.md#a-missed-poll).
  await ctx.state.records.put<PollRecord>(pollKey(ctx.cluster, reporter.id), { time: now.toISOString() }, 'any');
  result.reportMs = Date.now() - started;
  if (opts.lead !== false) {
    const leading = Date.now();
    // The states as this poll's writes left them: no second list of every state.
    result.leader = await lead(ctx, { states: reported });
    result.leaderMs = Date.now() - leading;
  }
  return result;
}

/**
 * The reporter's discovery: one read, or with `ctx.samples` that many over fresh connections, merged, with the
 * apiservers' identities recorded in the control plane's record (a compare-and-set).
 */
async function discover(
  ctx: StorageContext,
  reporter: Reporter,
  groups: readonly string[] | undefined,
  now: Date,
): Promise<{ resources: SampledResource[]; failed: StorageDiscovery['failed'] }> {
  if (!ctx.samples || !reporter.sample) {
    const one = await discoverStorageVersions(reporter.client, { groups });
    return { resources: one.resources.map((r) => ({ ...r, hashes: [r.storageVersionHash] })), failed: one.failed };
  }
  // One connection per sample, one sample after another: a sample's reads in parallel would spread over several
  // connections, and with as many connections per sample as apiservers a round-robin balancer would hand every
  // sample's first read to the same apiserver.
  const sampled = async () => {
    const out = [];
    for (let i = 0; i < ctx.samples!; i += 1) out.push(await discoverStorageVersions(reporter.sample!(), { groups, concurrency: 1 }));
    return out;
  };
  const [samples, identities] = await Promise.all([sampled(), apiserverIdentities(reporter.client)]);
  const merged = mergeSamples(samples.map((s) => s.resources));
  for (let attempt = 1; ; attempt += 1) {
    const previous = await ctx.state.records.get<ControlPlaneRecord>(controlPlaneKey(ctx.cluster));
    const next = observeControlPlane(previous?.value, { identities, disagreeing: merged.disagreeing }, now);
    if (next === previous?.value) break;
    try {
      await ctx.state.records.put(controlPlaneKey(ctx.cluster), next, previous?.version ?? 'absent');
      ctx.log?.('info', 'control plane changed', {
        generation: next.generation,
        identities: next.identities.length,
        disagreeing: merged.disagreeing.slice(0, 10),
      });
      break;
    } catch (err) {
      // Another poll wrote first: observe again on top of what it wrote.
      if (!(err instanceof VersionConflictError) || attempt >= CAS_ATTEMPTS) throw err;
    }
  }
  return { resources: merged.resources, failed: samples.flatMap((s) => s.failed) };
}

/** The apiservers' identity leases in kube-system, as `<lease>/<holder>`: a restarted apiserver holds its lease anew. */
async function apiserverIdentities(kube: KubeClient): Promise<string[]> {
  const leases = await kube.listAll<KubeObject & { spec?: { holderIdentity?: string } }>(Resources.leases, {
    namespace: 'kube-system',
    labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver',
  });
  return leases.map((l) => `${l.metadata.name ?? ''}/${l.spec?.holderIdentity ?? ''}`);
}

/** Each configured reporter's (and this one's) last successful poll: one read each, whatever the number of resources. */
async function readLastPolls(ctx: StorageContext, self: string): Promise<Record<string, Date>> {
  const ids = [...new Set([...ctx.reporters, self])];
  const records = await Promise.all(ids.map((id) => ctx.state.records.get<PollRecord>(pollKey(ctx.cluster, id))));
  const times = ids.map((id, i) => [id, new Date(records[i]?.value.time ?? NaN)] as const);
  return Object.fromEntries(times.filter(([, t]) => Number.isFinite(t.getTime())));
}

/** One reporter's poll, which each of its resources is reported within. */
interface Round {
  reporter: string;
  now: Date;
  lastPolls: Readonly<Record<string, Date>>;
  result: PollResult;
}

/** Writes this reporter's entry; returns the state as written. */
async function reportResource(
  ctx: StorageContext,
  { reporter, now, lastPolls, result }: Round,
  r: StorageVersionEntry,
  listed: StorageState | undefined,
): Promise<StorageState> {
  const name = storageStateName(r);
  let current = listed;
  for (let attempt = 1; ; attempt += 1) {
    try {
      if (current && isStale(current.status, now, ctx.periodMs, lastPolls)) {
        // Nobody has heartbeated for a period: changes may have been missed (the start-up check).
        await ctx.kube.delete(
          storageStates,
          { name },
          {
            preconditions: { uid: current.metadata.uid!, resourceVersion: current.metadata.resourceVersion! },
          },
        );
        result.reset += 1;
        current = undefined;
      }
      if (!current) {
        // POST drops status (a status subresource); the status is written next, as a compare-and-set.
        current = await ctx.kube.create<StorageState>(storageStates, {
          apiVersion: apiVersionOf(storageStates),
          kind: 'StorageState',
          metadata: { name },
          spec: { resource: { group: r.group, resource: r.resource } },
        });
      }
      const next = report(current.status, { reporter, hash: r.storageVersionHash, now, lastPoll: lastPolls[reporter] }, ctx.periodMs);
      if (next.change === 'heartbeat' && attempt === 1) {
        const written = await ctx.kube.patch<StorageState>(
          storageStates,
          { name, subresource: 'status' },
          heartbeatPatch(current, { reporter, hash: r.storageVersionHash, now }),
          'json',
        );
        result.heartbeats += 1;
        return written;
      }
      if (next.change === 'created' || next.change === 'hash') await ctx.state.records.increment(epochKey(ctx.cluster, name));
      const written = await ctx.kube.patch<StorageState>(
        storageStates,
        { name, subresource: 'status' },
        { metadata: { resourceVersion: current.metadata.resourceVersion }, status: mergeable(next.status) },
        'merge',
      );
      if (next.change === 'created') result.created += 1;
      else if (next.change === 'hash') result.changed += 1;
      else result.heartbeats += 1;
      return written;
    } catch (err) {
      // A failed test operation answers 422; the retry is a plain compare-and-set, where a real 422 shows again.
      const raced =
        isKubeError(err, 'Conflict') ||
        isKubeError(err, 'AlreadyExists') ||
        isKubeError(err, 'NotFound') ||
        (attempt === 1 && isKubeError(err, 'Invalid'));
      if (!raced || attempt >= CAS_ATTEMPTS) throw err;
      // Another reporter wrote first (or the state was recreated): read it again and redo the step.
      result.conflicts += 1;
      current = await ctx.kube.find<StorageState>(storageStates, { name });
    }
  }
}

/** A status as a merge patch: the optional fields report() left out are removed, not kept as they were. */
function mergeable(status: StorageStateStatus): Record<string, unknown> {
  return { ...status, currentStorageVersionHash: status.currentStorageVersionHash ?? null, conditions: status.conditions ?? null };
}

/**
 * Sets DiscoveryFailed on the states of every group with a failed group version that the poll did not report
 * (their resources are served only there, or no longer at all), each a compare-and-set; returns every such state,
 * as written or as it was when it already said so.
 */
async function markUndiscovered(
  ctx: StorageContext,
  reporter: string,
  now: Date,
  {
    failed,
    existing,
    reported,
  }: { failed: StorageDiscovery['failed']; existing: ReadonlyMap<string, StorageState>; reported: ReadonlySet<string> },
): Promise<StorageState[]> {
  if (!failed.length) return [];
  const byGroup = new Map<string, StorageDiscovery['failed']>();
  for (const f of failed) byGroup.set(f.group, [...(byGroup.get(f.group) ?? []), f]);
  const affected = [...existing.values()].filter((s) => byGroup.has(s.spec.resource.group) && !reported.has(s.metadata.name ?? ''));
  const limit = pLimit(WRITE_CONCURRENCY);
  return Promise.all(
    affected.map((listed) =>
      limit(async () => {
        const fails = byGroup.get(listed.spec.resource.group)!;
        const failure = {
          reporter,
          groupVersions: fails.map((f) => (f.group ? `${f.group}/${f.version}` : f.version)),
          error: fails[0]!.error,
          now,
        };
        let current: StorageState | undefined = listed;
        for (let attempt = 1; current; attempt += 1) {
          const status = discoveryFailed(current.status, failure);
          if (!status) return current;
          try {
            return await ctx.kube.patch<StorageState>(
              storageStates,
              { name: current.metadata.name ?? '', subresource: 'status' },
              { metadata: { resourceVersion: current.metadata.resourceVersion }, status: { conditions: status.conditions } },
              'merge',
            );
          } catch (err) {
            if (!isKubeError(err, 'Conflict') || attempt >= CAS_ATTEMPTS) throw err;
            current = await ctx.kube.find<StorageState>(storageStates, { name: current.metadata.name ?? '' });
          }
        }
        return listed;
      }),
    ),
  );
}
