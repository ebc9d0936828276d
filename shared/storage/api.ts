// The storage-migration API as Outrigger reads and writes it (docs/controllers/storage-migration.md): StorageState with the HA status, and
// StorageVersionMigration in kube-storage-version-migrator's shape (migration.k8s.io) or the in-tree one
// (storagemigration.k8s.io). Pure types and helpers; no I/O.
import type { KubeObject } from '../kube/resource.ts';

export const MIGRATION_GROUP = 'migration.k8s.io';
export const MIGRATION_VERSION = 'v1alpha1';
export const IN_TREE_GROUP = 'storagemigration.k8s.io';
export const IN_TREE_VERSION = 'v1beta1';

/** A persisted hash that stands for "any version": nothing is known about what is stored. */
export const UNKNOWN = 'Unknown';

/** What a migration was created for, recorded on it so that its completion can be judged against the state. */
export const HASH_ANNOTATION = 'outrigger.dev/storage-version-hash';
export const PERSISTED_ANNOTATION = 'outrigger.dev/persisted-storage-version-hashes';
/** On the migrations Outrigger makes: the uid of their StorageState, so a state's migrations are listed alone. */
export const STATE_LABEL = 'outrigger.dev/storage-state';

export interface GroupResource {
  group: string;
  resource: string;
}

/** One reporter's observation: the storage version hash its apiserver's discovery showed. */
export interface ReporterEntry {
  reporterID: string;
  currentStorageVersionHash: string;
  lastHeartbeatTime: string;
}

/** A StorageState's condition (docs/controllers/storage-migration.md#a-group-version-whose-discovery-fails). */
export interface StorageStateCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface StorageStateStatus {
  currentStorageVersionHashes?: ReporterEntry[];
  persistedStorageVersionHashes?: string[];
  /**
   * kube-storage-version-migrator's non-HA fields, kept for its tools: the hash discovery shows (here: the one
   * every reporter's entry agrees on; absent while they disagree), and when a reporter last checked discovery
   * for the resource and wrote the state.
   */
  currentStorageVersionHash?: string;
  lastHeartbeatTime?: string;
  conditions?: StorageStateCondition[];
}

export interface StorageState extends KubeObject {
  spec: { resource: GroupResource };
  status?: StorageStateStatus;
}

export type MigrationPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

export interface MigrationCondition {
  type: string;
  status: string;
  lastUpdateTime?: string;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
}

export interface StorageVersionMigration extends KubeObject {
  spec: { resource: { group?: string; version?: string; resource: string }; continueToken?: string };
  status?: { conditions?: MigrationCondition[] };
}

/** `<resource>.<group>`, or just `<resource>` for the core group (the upstream trigger's names). */
export function storageStateName(gr: GroupResource): string {
  return gr.group === '' ? gr.resource : `${gr.resource}.${gr.group}`;
}

export function phaseOf(m: Pick<StorageVersionMigration, 'status'>): MigrationPhase {
  const isTrue = (type: string) => m.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
  if (isTrue('Succeeded')) return 'Succeeded';
  if (isTrue('Failed')) return 'Failed';
  if (isTrue('Running')) return 'Running';
  return 'Pending';
}

export function isTerminal(phase: MigrationPhase): boolean {
  return phase === 'Succeeded' || phase === 'Failed';
}

/** When the migration reached its current phase (the condition's time), or undefined when pending. */
export function phaseTime(m: Pick<StorageVersionMigration, 'status'>, phase: MigrationPhase): string | undefined {
  const c = m.status?.conditions?.find((x) => x.type === phase && x.status === 'True');
  return c?.lastUpdateTime ?? c?.lastTransitionTime;
}

/**
 * The out-of-tree condition list after moving to `phase`: Running, Succeeded and Failed are exclusive (one
 * True condition), other condition types are kept.
 */
export function conditionsFor(
  current: readonly MigrationCondition[] | undefined,
  phase: Exclude<MigrationPhase, 'Pending'>,
  now: Date,
  reason: string,
  message = '',
): MigrationCondition[] {
  const kept = (current ?? []).filter((c) => !['Running', 'Succeeded', 'Failed'].includes(c.type));
  return [...kept, { type: phase, status: 'True', lastUpdateTime: now.toISOString(), reason, message }];
}
