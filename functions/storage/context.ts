// What the storage functions share: where the StorageStates and migrations live, how a migration becomes the
// leader's MigrationView, and the per-cluster context the poll, the leader and the migrator run in.
import { gvr, type KubeClient } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import { controllerOf } from '../../shared/ownership/index.ts';
import type { State } from '../../shared/state/index.ts';
import {
  HASH_ANNOTATION,
  IN_TREE_GROUP,
  migrationRecordKey,
  untrustedBecause,
  IN_TREE_VERSION,
  MIGRATION_GROUP,
  MIGRATION_VERSION,
  phaseOf,
  phaseTime,
  storageStateName,
  type MigrationRecord,
  type MigrationView,
  type StorageState,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';

export const storageStates = gvr(MIGRATION_GROUP, MIGRATION_VERSION, 'storagestates');
export const migrations = gvr(MIGRATION_GROUP, MIGRATION_VERSION, 'storageversionmigrations');
export const inTreeMigrations = gvr(IN_TREE_GROUP, IN_TREE_VERSION, 'storageversionmigrations');
export const EPOCH_ANNOTATION = 'outrigger.dev/storage-epoch';
/** A sampled control plane's generation when the migration was made (shared/storage/control-plane.ts). */
export const CONTROL_PLANE_ANNOTATION = 'outrigger.dev/control-plane-generation';

export interface StorageContext {
  cluster: string;
  /** The cluster's client for reads and writes (the poll's discovery goes to each reporter's own endpoint). */
  kube: KubeClient;
  state: State;
  /** This process's identity for leases. */
  holder: string;
  /** The configured reporter ids: each must report before the leader starts a migration. */
  reporters: readonly string[];
  /** Who runs migrations: Outrigger's migrator (migration.k8s.io) or the cluster's own (storagemigration.k8s.io). */
  mode: 'outrigger' | 'in-tree';
  periodMs: number;
  now: () => Date;
  log?: Log;
  /**
   * Set where the apiservers sit behind one endpoint (docs/controllers/storage-migration.md#one-endpoint-eks-and-most-managed-control-planes): the
   * poll samples discovery over this many fresh connections, and the leader waits on the control plane's
   * stability (shared/storage/control-plane.ts).
   */
  samples?: number | undefined;
  /** Hands migrations to Outrigger's migrator (the leader's step queues stranded ones); absent, nothing is queued. */
  queueMigrations?: (migrations: readonly StorageVersionMigration[], cause: string) => Promise<void>;
}

export const migrationResource = (ctx: Pick<StorageContext, 'mode'>) => (ctx.mode === 'in-tree' ? inTreeMigrations : migrations);

/** DynamoDB keys: the per-resource epoch (bumped on every hash change) and the leader's decision log. */
export const epochKey = (cluster: string, stateName: string) => ({ cluster, kind: 'storage-epoch', name: stateName });
export const decisionKey = (cluster: string, stateName: string) => ({ cluster, kind: 'storage-decision', name: stateName });
export const LEADER_LEASE = 'storage-leader';
/** Each reporter's last successful poll (every group version read, every entry written): one write per poll. */
export const pollKey = (cluster: string, reporter: string) => ({ cluster, kind: 'storage-poll', name: reporter });
export interface PollRecord {
  time: string;
}
/** What Outrigger remembers of a sampled control plane. */
export const controlPlaneKey = (cluster: string) => ({ cluster, kind: 'storage-control-plane', name: 'control-plane' });

export function stateNameOfMigration(m: StorageVersionMigration): string {
  return storageStateName({ group: m.spec.resource.group ?? '', resource: m.spec.resource.resource });
}

export function viewOf(m: StorageVersionMigration, state: StorageState): MigrationView {
  const phase = phaseOf(m);
  const epoch = Number(m.metadata.annotations?.[EPOCH_ANNOTATION]);
  const generation = Number(m.metadata.annotations?.[CONTROL_PLANE_ANNOTATION]);
  return {
    name: m.metadata.name ?? '',
    uid: m.metadata.uid ?? '',
    owned: controllerOf(m)?.uid === state.metadata.uid,
    hash: m.metadata.annotations?.[HASH_ANNOTATION],
    epoch: Number.isInteger(epoch) ? epoch : undefined,
    controlPlaneGeneration: Number.isInteger(generation) ? generation : undefined,
    phase,
    phaseTime: phaseTime(m, phase),
  };
}

/**
 * Why the storage leader's DynamoDB record does not vouch for `m` (shared/storage/migrator.ts#untrustedBecause),
 * or undefined when it does: what the migrator checks before running a migration, and the leader before
 * believing one's outcome (docs/operations/security.md#the-migrator).
 */
export async function unrecordedBecause(
  ctx: { cluster: string; state: State },
  m: StorageVersionMigration,
  opts: { requireUid?: boolean } = {},
): Promise<string | undefined> {
  const record = await ctx.state.records.get<MigrationRecord>(migrationRecordKey(ctx.cluster, m.metadata.name ?? ''));
  return untrustedBecause(m, record?.value, opts);
}
