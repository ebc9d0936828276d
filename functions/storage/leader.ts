// The leader step (seed 004, HA): one holder of the cluster's storage lease at a time decides, for each
// StorageState, whether to cancel migrations, start one, or narrow persisted after one succeeded. Each
// action is first written to the resource's decision record in DynamoDB fenced on the lease (a deposed
// leader's write fails with LeaseLostError and it stops), and each Kubernetes write is a compare-and-set
// (uid preconditions on deletes, resourceVersion on the status) or a create with a fixed name.
import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { apiVersionOf, isKubeError, parseApiVersion } from '../../shared/kube/index.ts';
import { newControllerRef } from '../../shared/ownership/index.ts';
import { LeaseLostError, type Lease } from '../../shared/state/index.ts';
import {
  decide,
  HASH_ANNOTATION,
  isMigrated,
  isTerminal,
  migrationName,
  PERSISTED_ANNOTATION,
  phaseOf,
  type Decision,
  type MigrationView,
  type StorageState,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';
import { decisionKey, EPOCH_ANNOTATION, epochKey, LEADER_LEASE, migrationResource, stateNameOfMigration, storageStates, viewOf, type StorageContext } from './context.ts';

const LEASE_TTL_MS = 60_000;
/** Stop acting with this much of the lease left: a Kubernetes write must land before a successor can act. */
const LEASE_MARGIN_MS = 20_000;
/** How long a reporter waits for another reporter's leader step to finish before leaving it to the next one. */
const LEASE_WAIT_MS = 30_000;

export interface LeadResult {
  leader: boolean;
  term?: number;
  states: number;
  created: string[];
  cancelled: string[];
  narrowed: string[];
  epochReads: number;
}

/**
 * `states`: the StorageStates to look at, as the caller last read or wrote them (a poll's own heartbeats
 * answer with the state as written); by default all of them, listed. A state that may need an action is read
 * again under the lease, so an older copy costs at most a missed action, which the next step takes.
 */
export async function lead(ctx: StorageContext, opts: { states?: readonly StorageState[] } = {}): Promise<LeadResult> {
  const result: LeadResult = { leader: false, states: 0, created: [], cancelled: [], narrowed: [], epochReads: 0 };
  // One holder per step: reporters polled concurrently in one process must not share (and release) one lease.
  const lease = await ctx.state.leases.acquireWithin(ctx.cluster, LEADER_LEASE, `${ctx.holder}/${randomUUID()}`, LEASE_TTL_MS, LEASE_WAIT_MS);
  if (!lease) return result;
  result.leader = true;
  result.term = lease.term;
  try {
    const [states, all] = await Promise.all([
      opts.states ?? ctx.kube.listAll<StorageState>(storageStates),
      ctx.kube.listAll<StorageVersionMigration>(migrationResource(ctx)),
    ]);
    const byState = new Map<string, StorageVersionMigration[]>();
    for (const m of all) {
      const name = stateNameOfMigration(m);
      byState.set(name, [...(byState.get(name) ?? []), m]);
    }
    const limit = pLimit(8);
    await Promise.all(
      states.map((s) =>
        limit(async () => {
          result.states += 1;
          await leadOne(ctx, lease, s, byState.get(s.metadata.name ?? '') ?? [], result);
        }),
      ),
    );
  } finally {
    await ctx.state.leases.release(lease).catch(() => undefined);
  }
  return result;
}

async function leadOne(ctx: StorageContext, lease: Lease, listed: StorageState, migrations: StorageVersionMigration[], result: LeadResult): Promise<void> {
  let state = listed;
  let epoch = Number.NaN;
  // Only a state with something to migrate, or a migration in flight, needs its epoch (a DynamoDB read).
  if (!isMigrated(state.status) || migrations.some((m) => !isTerminal(phaseOf(m)))) {
    // The epoch is read before the state, so a hash change racing with this step carries a newer epoch.
    epoch = await ctx.state.records.counter(epochKey(ctx.cluster, state.metadata.name ?? ''));
    result.epochReads += 1;
    state = await ctx.kube.get<StorageState>(storageStates, state.metadata.name ?? '');
  }
  const views = migrations.map((m) => viewOf(m, state));
  const decision = decide({ state, reporters: ctx.reporters, migrations: views, epoch, now: ctx.now(), periodMs: ctx.periodMs });
  if (decision.action === 'none') return;
  await act(ctx, lease, state, decision, result);
}

async function act(ctx: StorageContext, lease: Lease, state: StorageState, d: Exclude<Decision, { action: 'none' }>, result: LeadResult): Promise<void> {
  const name = state.metadata.name ?? '';
  const guard = () => {
    if (!ctx.state.leases.stillHeld(lease, LEASE_MARGIN_MS)) throw new LeaseLostError(lease.name, lease.term);
  };
  // The decision is recorded, fenced on the lease, before anything in the cluster changes.
  await ctx.state.records.put(decisionKey(ctx.cluster, name), { action: d.action, reason: d.reason, term: lease.term, at: ctx.now().toISOString(), ...('hash' in d ? { hash: d.hash } : {}) }, 'any', { fence: lease });
  ctx.log?.('storage leader decision', { state: name, action: d.action, reason: d.reason });
  for (const m of d.cancel ?? []) {
    guard();
    await deleteMigration(ctx, m);
    result.cancelled.push(m.name);
  }
  if (d.action === 'create') {
    guard();
    const mname = migrationName(state, d.hash, d.epoch);
    const resource = state.spec.resource;
    const meta = {
      name: mname,
      ownerReferences: [newControllerRef(state)],
      annotations: { [HASH_ANNOTATION]: d.hash, [EPOCH_ANNOTATION]: String(d.epoch), [PERSISTED_ANNOTATION]: JSON.stringify(d.persisted) },
    };
    const r = migrationResource(ctx);
    const spec = ctx.mode === 'in-tree' ? { resource } : { resource: { ...resource, version: await servedVersion(ctx, resource.group) } };
    try {
      await ctx.kube.create(r, { apiVersion: apiVersionOf(r), kind: 'StorageVersionMigration', metadata: meta, spec });
      result.created.push(mname);
    } catch (err) {
      // The same decision made before (a duplicated pass): the migration it names is already there.
      if (!isKubeError(err, 'AlreadyExists')) throw err;
    }
  }
  if (d.action === 'narrow') {
    guard();
    try {
      await ctx.kube.patch(storageStates, name, undefined, { metadata: { resourceVersion: state.metadata.resourceVersion }, status: { persistedStorageVersionHashes: [d.hash] } }, 'merge', { subresource: 'status' });
      result.narrowed.push(name);
    } catch (err) {
      // A reporter wrote in between; the next pass decides again on what it wrote.
      if (!isKubeError(err, 'Conflict')) throw err;
    }
  }
}

async function deleteMigration(ctx: StorageContext, m: MigrationView): Promise<void> {
  try {
    await ctx.kube.delete(migrationResource(ctx), m.name, undefined, { preconditions: { uid: m.uid } });
  } catch (err) {
    if (!isKubeError(err, 'NotFound') && !isKubeError(err, 'Conflict')) throw err;
  }
}

/** The group's preferred served version, through which the migrator lists and rewrites (as upstream does). */
async function servedVersion(ctx: StorageContext, group: string): Promise<string> {
  if (group === '') return 'v1';
  const g = await ctx.kube.getPath<{ preferredVersion?: { groupVersion: string } }>(`/apis/${group}`);
  const gv = g.preferredVersion?.groupVersion;
  if (!gv) throw new Error(`the cluster serves no version of API group ${group}`);
  return parseApiVersion(gv).version;
}
