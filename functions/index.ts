import { gvrString, type GVR } from '../shared/kube/index.ts';
import { controllerSources, definitionResources, forgetControllers } from './controllers.ts';
import { HISTORY_RESYNC_MINUTES } from './history/resync.ts';
import type { FunctionSpec } from './spec.ts';

export const functions: FunctionSpec[] = [
  {
    name: 'heartbeat',
    description: 'Records, for each cluster, whether its apiserver answered and which version it runs',
    entry: 'functions/heartbeat/handler.ts',
    load: () => import('./heartbeat/handler.ts'),
    schedule: { everyMinutes: 1 },
    timeoutSeconds: 30,
  },
  {
    name: 'router',
    description: 'Turns watch events into sync requests for the controllers that must reconcile (ControllerRef rules)',
    entry: 'functions/router/handler.ts',
    load: () => import('./router/handler.ts'),
    events: {
      resources: async (cluster, kube) => {
        const all = (await Promise.all(controllerSources.map((s) => s.watches(cluster, kube)))).flat();
        return [...new Map<string, GVR>(all.map((r) => [gvrString(r), r])).values()];
      },
      definitions: definitionResources,
      forget: forgetControllers,
      // The parents (and the definitions, parents of their own); children and inputs route by metadata alone.
      wholeObjects: async (cluster, kube) => [...definitionResources, ...(await Promise.all(controllerSources.map((s) => s.kinds(cluster, kube)))).flat().map((k) => k.resource)],
    },
    // The targets of the controllers it routes for (history, storage, map); never truncate or migrator.
    sends: controllerSources.map((s) => s.target),
    timeoutSeconds: 60,
  },
  {
    name: 'history',
    description: 'Controller history: keeps every revision of a RevisionPolicy target as a ControllerRevision, recognises rollbacks',
    entry: 'functions/history/handler.ts',
    load: () => import('./history/handler.ts'),
    sync: { target: 'history' },
    // To itself: a policy's check queues a baseline sync of each of its parents.
    sends: ['truncate', 'history'],
    timeoutSeconds: 60,
  },
  {
    name: 'history-resync',
    description: 'Controller history: checks every RevisionPolicy again and syncs every parent of those in effect, without events',
    entry: 'functions/history-resync/handler.ts',
    load: () => import('./history-resync/handler.ts'),
    schedule: { everyMinutes: HISTORY_RESYNC_MINUTES },
    sends: ['history'],
    timeoutSeconds: 60,
  },
  {
    name: 'truncate',
    description: 'Controller history: deletes the oldest non-live revisions beyond the history limit',
    entry: 'functions/truncate/handler.ts',
    load: () => import('./truncate/handler.ts'),
    sync: { target: 'truncate' },
    timeoutSeconds: 60,
  },
  {
    name: 'storage-poll',
    description: 'Storage migration: reads each reporter\'s discovery, records storage version hashes in StorageStates, leads migrations',
    entry: 'functions/storage-poll/handler.ts',
    load: () => import('./storage-poll/handler.ts'),
    schedule: { everyMinutes: 10, perReporter: true },
    // Its leader step queues stranded migrations for the migrator again.
    sends: ['migrator'],
    timeoutSeconds: 300,
  },
  {
    name: 'storage',
    description: 'Storage migration: reacts to StorageVersionMigration changes (narrows persisted hashes, hands work to the migrator)',
    entry: 'functions/storage/handler.ts',
    load: () => import('./storage/handler.ts'),
    sync: { target: 'storage' },
    sends: ['migrator'],
    timeoutSeconds: 120,
  },
  {
    name: 'migrator',
    description: 'Storage migration: rewrites every object of a StorageVersionMigration in chunks, resuming from its continue token',
    entry: 'functions/migrator/handler.ts',
    load: () => import('./migrator/handler.ts'),
    sync: { target: 'migrator' },
    sends: ['migrator'],
    timeoutSeconds: 900,
  },
  {
    name: 'map',
    description: 'MapController: for every matching input, calls the map hook and reconciles its outputs; tombstones; status',
    entry: 'functions/map/handler.ts',
    load: () => import('./map/handler.ts'),
    sync: { target: 'map' },
    sends: ['map'],
    timeoutSeconds: 300,
  },
  {
    name: 'map-resync',
    description: 'MapController: queues a sync of every parent once per resyncPeriodSeconds, without events',
    entry: 'functions/map-resync/handler.ts',
    load: () => import('./map-resync/handler.ts'),
    schedule: { everyMinutes: 1 },
    sends: ['map'],
    timeoutSeconds: 60,
  },
  {
    name: 'ingest',
    description: 'Takes watch events over HTTPS (our envelopes, Knative ApiServerSource events) and queues them for the router',
    entry: 'functions/ingest/handler.ts',
    load: () => import('./ingest/handler.ts'),
    functionUrl: true,
    timeoutSeconds: 30,
  },
];

/** The functions of the storage migration feature, which act on every resource of a cluster. */
export const STORAGE_FUNCTIONS = ['storage-poll', 'storage', 'migrator'];
