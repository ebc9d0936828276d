// The leader step (docs/design/storage-trigger.md#ha-and-the-leader): one holder of the cluster's storage lease at a time decides, for each
// StorageState, whether to cancel migrations, start one, or narrow persisted after one succeeded. Each
// action is first written to the resource's decision record in DynamoDB fenced on the lease (a deposed
// leader's write fails with LeaseLostError and it stops), and each Kubernetes write is a compare-and-set
// (uid preconditions on deletes, resourceVersion on the status) or a create with a fixed name.
import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { apiVersionOf, isKubeError, servingVersion } from '../../shared/kube/index.ts';
import { newControllerRef } from '../../shared/ownership/index.ts';
import { LeaseLostError, type Lease } from '../../shared/state/index.ts';
import { Hold, LEASE_TTL_MS } from './hold.ts';
import {
  decide,
  HASH_ANNOTATION,
  isMigrated,
  isStranded,
  isTerminal,
  migrationName,
  migrationRecordKey,
  MIGRATOR_LABEL,
  MIGRATOR_LABEL_VALUE,
  MIGRATOR_LEASE_MS,
  PERSISTED_ANNOTATION,
  phaseOf,
  STATE_LABEL,
  overdue,
  unstableReason,
  type ControlPlaneRecord,
  type Overdue,
  type Decision,
  type DecideInput,
  type MigrationRecord,
  type MigrationView,
  type StorageState,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';
import {
  CONTROL_PLANE_ANNOTATION,
  controlPlaneKey,
  decisionKey,
  EPOCH_ANNOTATION,
  epochKey,
  LEADER_LEASE,
  migrationResource,
  stateNameOfMigration,
  storageStates,
  unrecordedBecause,
  viewOf,
  type StorageContext,
} from './context.ts';

/** How long a reporter waits for another reporter's leader step to finish before leaving it to the next one. */
const LEASE_WAIT_MS = 30_000;
/** Up to this many states (a migration's event) have their migrations listed by label; more (a poll), all in one list. */
const OWN_LISTS_UP_TO = 4;

export interface LeadResult {
  leader: boolean;
  term?: number;
  states: number;
  created: string[];
  cancelled: string[];
  narrowed: string[];
  /** Migrations of Outrigger's nothing was working on, queued for its migrator again. */
  resumed: string[];
  epochReads: number;
  /** States whose step failed; the others were still looked at, and the next step tries these again. */
  failed: Array<{ state: string; error: string }>;
  /** What has been stuck for over an hour, among the states this step looked at (the poll publishes it as metrics). */
  overdue?: Overdue | undefined;
}

/**
 * `states`: the StorageStates to look at, as the caller last read or wrote them (a poll's own heartbeats
 * answer with the state as written); by default all of them, listed. A state that may need an action is read
 * again under the lease, so an older copy costs at most a missed action, which the next step takes.
 */
export async function lead(ctx: StorageContext, opts: { states?: readonly StorageState[] } = {}): Promise<LeadResult> {
  const result: LeadResult = { leader: false, states: 0, created: [], cancelled: [], narrowed: [], resumed: [], epochReads: 0, failed: [] };
  // One holder per step: reporters polled concurrently in one process must not share (and release) one lease.
  const lease = await ctx.state.leases.acquireWithin(
    ctx.cluster,
    LEADER_LEASE,
    `${ctx.holder}/${randomUUID()}`,
    LEASE_TTL_MS,
    LEASE_WAIT_MS,
  );
  if (!lease) return result;
  result.leader = true;
  result.term = lease.term;
  const hold = new Hold(ctx, lease);
  try {
    const [states, all, controlPlane] = await Promise.all([
      opts.states ?? ctx.kube.listAll<StorageState>(storageStates),
      listMigrations(ctx, opts.states),
      sampledControlPlane(ctx),
    ]);
    const byState = new Map<string, StorageVersionMigration[]>();
    for (const m of all) {
      const name = stateNameOfMigration(m);
      byState.set(name, [...(byState.get(name) ?? []), m]);
    }
    // Migrations whose leader record was read and vouches for them, this step: the only ones queued again.
    const step: Step = { ctx, hold, result, controlPlane, recorded: new Set<string>() };
    const limit = pLimit(8);
    // Settled, not raced: one state's error leaves the others to finish, and the lease is released only once
    // no state's work is in flight.
    const outcomes = await Promise.allSettled(
      states.map((s) =>
        limit(async () => {
          if (hold.lost) return;
          result.states += 1;
          try {
            await leadOne(step, s, byState.get(s.metadata.name ?? '') ?? []);
          } catch (err) {
            if (err instanceof LeaseLostError) hold.lost = true;
            throw err;
          }
        }),
      ),
    );
    outcomes.forEach((o, i) => {
      if (o.status === 'fulfilled' || o.reason instanceof LeaseLostError) return;
      const failure = { state: states[i]!.metadata.name ?? '', error: o.reason instanceof Error ? o.reason.message : String(o.reason) };
      result.failed.push(failure);
      ctx.log?.('warn', 'storage leader step failed for a state', failure);
    });
    if (hold.lost) throw new LeaseLostError(lease.name, lease.term);
    const byName = new Map(states.map((st) => [st.metadata.name ?? '', st]));
    result.overdue = overdue(
      states,
      (name) =>
        (byState.get(name) ?? []).map((m) => ({ ...viewOf(m, byName.get(name)!), created: m.metadata.creationTimestamp ?? undefined })),
      ctx.now(),
    );
    await resumeStranded(
      ctx,
      states
        .flatMap((s) => byState.get(s.metadata.name ?? '') ?? [])
        .filter((m) => step.recorded.has(m.metadata.uid ?? '') && !result.cancelled.includes(m.metadata.name ?? '')),
      result,
    );
  } finally {
    await ctx.state.leases.release(lease).catch(() => undefined);
  }
  return result;
}

/** A sampled control plane's generation and stability (one DynamoDB read a step); undefined where reporters are per apiserver. */
async function sampledControlPlane(ctx: StorageContext): Promise<DecideInput['controlPlane']> {
  if (!ctx.samples) return undefined;
  const record = (await ctx.state.records.get<ControlPlaneRecord>(controlPlaneKey(ctx.cluster)))?.value;
  return { generation: record?.generation ?? 0, unstable: unstableReason(record, ctx.now(), ctx.periodMs) };
}

/** One leader step, as each state's part of it shares it. */
interface Step {
  ctx: StorageContext;
  hold: Hold;
  result: LeadResult;
  controlPlane: DecideInput['controlPlane'];
  /** Migrations whose leader record was read and vouches for them. */
  recorded: Set<string>;
}

type Act = Exclude<Decision, { action: 'none' }>;

async function leadOne(step: Step, listed: StorageState, migrations: StorageVersionMigration[]): Promise<void> {
  const { ctx, result, controlPlane } = step;
  let state = listed;
  let epoch = Number.NaN;
  // Only a state with something to migrate, or a migration in flight, needs its epoch (a DynamoDB read).
  if (!isMigrated(state.status) || migrations.some((m) => !isTerminal(phaseOf(m)))) {
    // The epoch is read before the state, so a hash change racing with this step carries a newer epoch.
    epoch = await ctx.state.records.counter(epochKey(ctx.cluster, state.metadata.name ?? ''));
    result.epochReads += 1;
    state = await ctx.kube.get<StorageState>(storageStates, { name: state.metadata.name ?? '' });
  }
  let views = migrations.map((m) => viewOf(m, state));
  if (Number.isFinite(epoch)) views = await withRecords(ctx, state, migrations, views, step.recorded);
  const decision = decide({
    state,
    reporters: ctx.reporters,
    migrations: views,
    epoch,
    now: ctx.now(),
    periodMs: ctx.periodMs,
    controlPlane,
  });
  if (decision.action === 'none') return;
  if (decision.action === 'narrow') {
    const moved = await movedSince(ctx, state, epoch, controlPlane, result);
    if (moved) {
      ctx.log?.('info', 'narrowing left to the next step', { state: state.metadata.name, reason: moved });
      return;
    }
  }
  await act(step, state, decision);
}

/**
 * Why a narrowing decided on this state may be stale: the epoch (or a sampled control plane's generation) moved
 * after it was read. A hash change and its reversal landing between the epoch read and the state read leave the
 * entries agreeing and the migration's epoch matching the old read, so only a second read after the state's shows
 * them (docs/design/storage-trigger.md#ha-and-the-leader). Two reads per narrowing, which is rare.
 */
async function movedSince(
  ctx: StorageContext,
  state: StorageState,
  epoch: number,
  controlPlane: DecideInput['controlPlane'],
  result: LeadResult,
): Promise<string | undefined> {
  const [now, plane] = await Promise.all([
    ctx.state.records.counter(epochKey(ctx.cluster, state.metadata.name ?? '')),
    controlPlane ? sampledControlPlane(ctx) : undefined,
  ]);
  result.epochReads += 1;
  if (now !== epoch) return `the epoch moved from ${epoch} to ${now} while the state was read`;
  if (controlPlane && plane?.generation !== controlPlane.generation)
    return `the control plane's generation moved from ${controlPlane.generation} to ${plane?.generation} while the state was read`;
  return undefined;
}

/**
 * Marks each migration of the state's that the leader's own record does not vouch for (a forged one carries the
 * label, owner reference and annotations the leader sets, and any status its maker patches in): decide acts on
 * none of its outcome. Read only for a state that may need an action: one DynamoDB read per owned migration.
 */
async function withRecords(
  ctx: StorageContext,
  state: StorageState,
  migrations: readonly StorageVersionMigration[],
  views: MigrationView[],
  recorded: Set<string>,
): Promise<MigrationView[]> {
  return Promise.all(
    views.map(async (v, i) => {
      if (!v.owned) return v;
      const unrecorded = await unrecordedBecause(ctx, migrations[i]!, { requireUid: true });
      if (!unrecorded) {
        recorded.add(v.uid);
        return v;
      }
      ctx.log?.('warn', 'migration not recorded by the storage leader: ignored', {
        state: state.metadata.name,
        migration: v.name,
        reason: unrecorded,
      });
      return { ...v, unrecorded };
    }),
  );
}

/** The migrations of `states`: by their label when they are few, else every migration in one (paged) list. */
async function listMigrations(ctx: StorageContext, states: readonly StorageState[] | undefined): Promise<StorageVersionMigration[]> {
  const r = migrationResource(ctx);
  if (!states || states.length > OWN_LISTS_UP_TO) return ctx.kube.listAll<StorageVersionMigration>(r);
  const lists = await Promise.all(
    states.map((s) => ctx.kube.listAll<StorageVersionMigration>(r, { labelSelector: `${STATE_LABEL}=${s.metadata.uid ?? ''}` })),
  );
  return lists.flat();
}

/** The decision, recorded first, then done: the migrations it cancels, then the migration it creates or the narrowing. */
async function act(step: Step, state: StorageState, d: Act): Promise<void> {
  await recordDecision(step, state, d);
  for (const m of d.cancel ?? []) await cancelMigration(step, m);
  if (d.action === 'create') await createMigration(step, state, d);
  if (d.action === 'narrow') await narrowPersisted(step, state, d);
}

/** The decision, recorded fenced on the lease before anything in the cluster changes. */
async function recordDecision({ ctx, hold }: Step, state: StorageState, d: Act): Promise<void> {
  const name = state.metadata.name ?? '';
  const lease = await hold.check();
  await ctx.state.records.put(
    decisionKey(ctx.cluster, name),
    { action: d.action, reason: d.reason, term: lease.term, at: ctx.now().toISOString(), ...('hash' in d ? { hash: d.hash } : {}) },
    'any',
    { fence: lease },
  );
  ctx.log?.('info', 'storage leader decision', { state: name, action: d.action, reason: d.reason });
}

async function cancelMigration({ ctx, hold, result }: Step, m: MigrationView): Promise<void> {
  await hold.check();
  try {
    await ctx.kube.delete(migrationResource(ctx), { name: m.name }, { preconditions: { uid: m.uid } });
  } catch (err) {
    if (!isKubeError(err, 'NotFound') && !isKubeError(err, 'Conflict')) throw err;
  }
  result.cancelled.push(m.name);
}

/**
 * The migration, recorded fenced on the lease before it exists and with its uid once it does: the record, not
 * the label, is what the migrator and this leader trust (docs/operations/security.md#the-migrator).
 */
async function createMigration({ ctx, hold, result }: Step, state: StorageState, d: Extract<Act, { action: 'create' }>): Promise<void> {
  await hold.check();
  const name = migrationName(state, d.hash, d.epoch);
  const resource = state.spec.resource;
  const meta = {
    name,
    ownerReferences: [newControllerRef(state)],
    annotations: {
      [HASH_ANNOTATION]: d.hash,
      [EPOCH_ANNOTATION]: String(d.epoch),
      [PERSISTED_ANNOTATION]: JSON.stringify(d.persisted),
      ...(d.controlPlaneGeneration === undefined ? {} : { [CONTROL_PLANE_ANNOTATION]: String(d.controlPlaneGeneration) }),
    },
    // Outrigger's label routes the migration to its migrator (which runs it for the record below); a
    // migration's event lists its state's migrations by the state's.
    labels: { [STATE_LABEL]: state.metadata.uid ?? '', ...(ctx.mode === 'outrigger' ? { [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE } : {}) },
  };
  const r = migrationResource(ctx);
  // The in-tree migration names no version: the cluster's migrator rewrites through the storage version.
  const version = ctx.mode === 'outrigger' ? await servingVersion(ctx.kube, resource.group, resource.resource) : '';
  const spec = { resource: ctx.mode === 'outrigger' ? { ...resource, version } : resource };
  const record = { state: state.metadata.name ?? '', resource: { ...resource, version }, hash: d.hash };
  await recordMigration(ctx.state, ctx.cluster, await hold.check(), name, record);
  try {
    const made = await ctx.kube.create(r, { apiVersion: apiVersionOf(r), kind: 'StorageVersionMigration', metadata: meta, spec });
    await recordMigration(ctx.state, ctx.cluster, await hold.check(), name, { ...record, uid: made.metadata.uid ?? '' });
    result.created.push(name);
  } catch (err) {
    // The same decision made before (a duplicated pass), or a migration made under the name by someone else:
    // its uid is not recorded, so the next step cancels it and makes the migration again.
    if (!isKubeError(err, 'AlreadyExists')) throw err;
  }
}

/** persisted narrowed to the hash migrated to, on the state as the decision read it. */
async function narrowPersisted({ ctx, hold, result }: Step, state: StorageState, d: Extract<Act, { action: 'narrow' }>): Promise<void> {
  await hold.check();
  const name = state.metadata.name ?? '';
  try {
    await ctx.kube.patch(
      storageStates,
      { name, subresource: 'status' },
      { metadata: { resourceVersion: state.metadata.resourceVersion }, status: { persistedStorageVersionHashes: [d.hash] } },
      'merge',
    );
    result.narrowed.push(name);
  } catch (err) {
    // A reporter wrote in between; the next pass decides again on what it wrote.
    if (!isKubeError(err, 'Conflict')) throw err;
  }
}

/** Records, fenced on the leader's lease, that the leader makes this migration: the migrator runs no other. */
export async function recordMigration(
  state: StorageContext['state'],
  cluster: string,
  lease: Lease,
  migration: string,
  what: Omit<MigrationRecord, 'term'>,
): Promise<void> {
  await state.records.put<MigrationRecord>(migrationRecordKey(cluster, migration), { ...what, term: lease.term }, 'any', { fence: lease });
}

/**
 * Queues the migrator again for migrations of Outrigger's that nothing is working on (a message dead-lettered,
 * an invocation that died): Pending or Running with no progress for longer than the migrator's lease. `listed`
 * holds only migrations the leader's record vouches for: a forged labelled one is not queued every step.
 */
async function resumeStranded(ctx: StorageContext, listed: readonly StorageVersionMigration[], result: LeadResult): Promise<void> {
  if (ctx.mode !== 'outrigger' || !ctx.queueMigrations) return;
  const stranded = listed.filter((m) => isStranded(m, ctx.now(), MIGRATOR_LEASE_MS));
  if (!stranded.length) return;
  await ctx.queueMigrations(stranded, 'resume');
  result.resumed.push(...stranded.map((m) => m.metadata.name ?? ''));
  ctx.log?.('info', 'stranded migrations queued again', { migrations: result.resumed });
}
