// Controller history (docs/controllers/history.md): RevisionPolicies, their parents' revisions, truncation.
import type { Controller } from '../spec.ts';
import { historySource, revisionPolicies } from './policies.ts';
import { HISTORY_RESYNC_MINUTES } from './resync.ts';

export const historyController: Controller = {
  name: 'history',
  source: historySource,
  definitions: [revisionPolicies],
  functions: [
    {
      name: 'history',
      description: 'Controller history: keeps every revision of a RevisionPolicy target as a ControllerRevision, recognises rollbacks',
      entry: 'functions/history/handler.ts',
      sync: { target: 'history' },
      // To itself: a policy's check queues a baseline sync of each of its parents, and each sync its parent's
      // truncation (truncation requests share the history queue: docs/operations/cost.md#idle-polling).
      sends: ['history'],
      // The parent's history lease and its memo, and the record's revisions beside it: queried, put and deleted
      // (docs/design/history-sync.md#the-history-record). (Truncation uses no table: its deletes are preconditioned
      // on each revision's resourceVersion instead of a lease.)
      table: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:DeleteItem'],
      clusterAccess: 'controllers',
      timeoutSeconds: 60,
    },
    {
      name: 'history-resync',
      description: 'Controller history: checks every RevisionPolicy again and syncs every parent of those in effect, without events',
      entry: 'functions/history-resync/handler.ts',
      schedule: { everyMinutes: HISTORY_RESYNC_MINUTES },
      sends: ['history'],
      clusterAccess: 'controllers',
      timeoutSeconds: 60,
    },
  ],
};
