import { randomUUID } from 'node:crypto';
import { fittedSyncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import {
  isOutriggers,
  isTerminal,
  phaseOf,
  progressOf,
  type StorageState,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';
import { migrationResource, stateNameOfMigration, storageStates } from './context.ts';
import { storageContext } from './environment.ts';
import { lead } from './leader.ts';

const holder = `storage-${randomUUID()}`;

// A migration changed: the leader looks at its StorageState at once (a success narrows persisted without
// waiting for the next poll), and a migration of Outrigger's that its migrator has not started goes to it. One
// it has started is queued by the migrator itself (when it pauses) or by the leader (when it is stranded), not
// on each of its own progress writes.
export const handler = fittedSyncFunction('storage', async ({ key, causes }, { env, logger }) => {
  const ctx = storageContext(env, key.cluster, holder, (level, m, f) => logger[level](m, f ?? {}));
  const svm = await ctx.kube.find<StorageVersionMigration>(migrationResource(ctx), { name: key.name });
  if (!svm || svm.metadata.uid !== key.uid) return;
  // A cluster limited to some API groups leaves the others' migrations alone.
  const groups = env.clusters.config(key.cluster).storage?.groups;
  if (groups && !groups.includes(svm.spec.resource.group ?? '')) return;
  const state = await ctx.kube.find<StorageState>(storageStates, { name: stateNameOfMigration(svm) });
  const result = await lead(ctx, { states: state ? [state] : [] });
  logger.info('storage leader step', { migration: key.name, ...result });
  if (ctx.mode === 'outrigger' && isOutriggers(svm) && !isTerminal(phaseOf(svm)) && !progressOf(svm))
    await env.syncSink.send('migrator', [makeSyncRequest(key, causes)]);
});
