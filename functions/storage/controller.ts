// Storage version migration (docs/controllers/storage-migration.md#the-migrator): StorageStates, the poll, the migrator.
import type { Controller } from '../spec.ts';
import { storageSource } from './source.ts';

// Epochs (UpdateItem ADD, GetItem), leases (UpdateItem) and the leader's fenced decision log (PutItem in a
// transaction with a ConditionCheckItem on the lease).
const STORAGE_TABLE_ACTIONS = ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem'];

export const storageController: Controller = {
  name: 'storage',
  source: storageSource,
  // storage.enabled: false: no poll, no StorageStates, nothing routed to it (its source watches nothing).
  runsIn: (config) => config.storage?.enabled !== false,
  functions: [
    {
      name: 'storage-poll',
      description: "Storage migration: reads each reporter's discovery, records storage version hashes in StorageStates, leads migrations",
      entry: 'functions/storage-poll/handler.ts',
      schedule: { everyMinutes: 10, perReporter: true },
      // Its leader step queues stranded migrations for the migrator again.
      sends: ['migrator'],
      table: STORAGE_TABLE_ACTIONS,
      clusterAccess: 'controllers',
      timeoutSeconds: 300,
    },
    {
      name: 'storage',
      description: 'Storage migration: reacts to StorageVersionMigration changes (narrows persisted hashes, hands work to the migrator)',
      entry: 'functions/storage/handler.ts',
      sync: { target: 'storage' },
      sends: ['migrator'],
      table: STORAGE_TABLE_ACTIONS,
      clusterAccess: 'controllers',
      timeoutSeconds: 120,
    },
    {
      name: 'migrator',
      description: 'Storage migration: rewrites every object of a StorageVersionMigration in chunks, resuming from its continue token',
      entry: 'functions/migrator/handler.ts',
      sync: { target: 'migrator' },
      sends: ['migrator'],
      // Its per-migration lease, and the leader's record of each migration, which it reads before running one.
      table: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
      clusterAccess: 'migrator',
      timeoutSeconds: 900,
    },
  ],
};
