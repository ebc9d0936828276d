// One reporter's poll (seed 004, every 10 minutes): read the reporter's discovery, and for every resource with
// a storage version hash write this reporter's entry into its StorageState (created when missing, recreated
// with Unknown when nobody heartbeated for a period), each write a compare-and-set on the resourceVersion.
// Except the steady-state write, a heartbeat: a JSON patch whose test operations pin what decisions read (see
// heartbeatPatch), so reporters heartbeating into one state at once do not conflict with each other.
// A hash change increments the resource's epoch in DynamoDB before the status is written, so a migration made
// before it can never narrow persisted. Then the leader step runs (see leader.ts).
import pLimit from 'p-limit';
import { apiVersionOf, discoverStorageVersions, isKubeError, type KubeClient, type StorageDiscovery, type StorageVersionEntry } from '../../shared/kube/index.ts';
import { heartbeatPatch, isStale, report, storageStateName, type StorageState } from '../../shared/storage/index.ts';
import { epochKey, storageStates, type StorageContext } from './context.ts';
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
  leader?: LeadResult | undefined;
  /** Wall time of the reporting part and of the leader step. */
  reportMs?: number;
  leaderMs?: number;
}

const WRITE_CONCURRENCY = 16;
const CAS_ATTEMPTS = 6;

export async function pollReporter(
  ctx: StorageContext,
  reporter: { id: string; client: KubeClient },
  opts: { groups?: readonly string[] | undefined; lead?: boolean } = {},
): Promise<PollResult> {
  const now = ctx.now();
  const started = Date.now();
  const [discovery, listed] = await Promise.all([discoverStorageVersions(reporter.client, { groups: opts.groups }), ctx.kube.listAll<StorageState>(storageStates)]);
  const existing = new Map(listed.map((s) => [s.metadata.name ?? '', s]));
  const result: PollResult = { reporter: reporter.id, resources: discovery.resources.length, created: 0, changed: 0, heartbeats: 0, reset: 0, conflicts: 0, failedGroups: discovery.failed };
  for (const f of discovery.failed) ctx.log?.('discovery failed for a group version; resources served only there keep their last heartbeat', { reporter: reporter.id, ...f });
  const limit = pLimit(WRITE_CONCURRENCY);
  const reported = await Promise.all(discovery.resources.map((r) => limit(() => reportResource(ctx, reporter.id, r, existing.get(storageStateName(r)), now, result))));
  result.reportMs = Date.now() - started;
  if (opts.lead !== false) {
    const leading = Date.now();
    // The states as this poll's writes left them: no second list of every state.
    result.leader = await lead(ctx, { states: reported });
    result.leaderMs = Date.now() - leading;
  }
  return result;
}

/** Writes this reporter's entry; returns the state as written. */
async function reportResource(ctx: StorageContext, reporter: string, r: StorageVersionEntry, listed: StorageState | undefined, now: Date, result: PollResult): Promise<StorageState> {
  const name = storageStateName(r);
  let current = listed;
  for (let attempt = 1; ; attempt += 1) {
    try {
      if (current && isStale(current.status, now, ctx.periodMs)) {
        // Nobody has heartbeated for a period: changes may have been missed (the seed's start-up check).
        await ctx.kube.delete(storageStates, name, undefined, { preconditions: { uid: current.metadata.uid!, resourceVersion: current.metadata.resourceVersion! } });
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
      const next = report(current.status, { reporter, hash: r.storageVersionHash, now }, ctx.periodMs);
      if (next.change === 'heartbeat' && attempt === 1) {
        const written = await ctx.kube.patch<StorageState>(storageStates, name, undefined, heartbeatPatch(current, { reporter, hash: r.storageVersionHash, now }), 'json', { subresource: 'status' });
        result.heartbeats += 1;
        return written;
      }
      if (next.change !== 'heartbeat') await ctx.state.records.increment(epochKey(ctx.cluster, name));
      const written = await ctx.kube.patch<StorageState>(storageStates, name, undefined, { metadata: { resourceVersion: current.metadata.resourceVersion }, status: next.status }, 'merge', { subresource: 'status' });
      if (next.change === 'created') result.created += 1;
      else if (next.change === 'hash') result.changed += 1;
      else result.heartbeats += 1;
      return written;
    } catch (err) {
      // A failed test operation answers 422; the retry is a plain compare-and-set, where a real 422 shows again.
      const raced = isKubeError(err, 'Conflict') || isKubeError(err, 'AlreadyExists') || isKubeError(err, 'NotFound') || (attempt === 1 && isKubeError(err, 'Invalid'));
      if (!raced || attempt >= CAS_ATTEMPTS) throw err;
      // Another reporter wrote first (or the state was recreated): read it again and redo the step.
      result.conflicts += 1;
      current = await ctx.kube.find<StorageState>(storageStates, name);
    }
  }
}

