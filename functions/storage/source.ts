// What the router does for storage migration: a StorageVersionMigration's changes go to the storage handler
// (a parent with no children: its own events sync it). Which API the migrations live in is per cluster.
import type { ClusterConfig } from '../../shared/clusters.ts';
import type { ControllerKind } from '../../shared/ownership/index.ts';
import type { ControllerSource } from '../controller-source.ts';
import { migrationResource } from './context.ts';

function kinds(cluster: ClusterConfig): ControllerKind[] {
  // Storage migration off (storage.enabled: false) never asks: functions/controllers.ts gates every source on runsIn.
  const storage = cluster.storage;
  const resource = migrationResource({ mode: storage?.migrations ?? 'outrigger' });
  return [{ resource, kind: 'StorageVersionMigration', namespaced: false, selectorOf: () => null, target: 'storage' }];
}

export const storageSource: ControllerSource = {
  target: 'storage',
  kinds: async (cluster) => kinds(cluster),
  watches: async (cluster) => kinds(cluster).map((k) => k.resource),
};
