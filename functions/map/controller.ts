// MapController (docs/controllers/mapcontroller.md): a hook per input, outputs kept as answered, tombstones.
import { metacontrollerOn } from '../../shared/clusters.ts';
import type { Controller } from '../spec.ts';
import { RETRY_RECEIVES } from '../../shared/metacontroller/problems.ts';
import { mapControllers, mapSource } from './controllers.ts';

export const mapController: Controller = {
  name: 'map',
  source: mapSource,
  // metacontroller.enabled: false: no map queue, nothing routed to it, no resync.
  runsIn: metacontrollerOn,
  definitions: [mapControllers],
  functions: [
    {
      name: 'map',
      description: 'MapController: for every matching input, calls the map hook and reconciles its outputs; tombstones; status',
      entry: 'functions/metacontroller/handler.ts',
      sync: { target: 'map' },
      sends: ['map'],
      // It consumes a failing parent's request itself after RETRY_RECEIVES receives: its queue must not
      // dead-letter it first.
      receives: RETRY_RECEIVES + 1,
      // When each parent's last clean pass started, and the answers it kept.
      table: ['dynamodb:GetItem', 'dynamodb:PutItem'],
      clusterAccess: 'controllers',
      callsHooks: true,
      timeoutSeconds: 300,
    },
    {
      name: 'map-resync',
      description: 'MapController: queues a sync of every parent once per resyncPeriodSeconds, without events',
      entry: 'functions/map-resync/handler.ts',
      schedule: { everyMinutes: 1 },
      sends: ['map'],
      clusterAccess: 'controllers',
      timeoutSeconds: 60,
    },
  ],
};
