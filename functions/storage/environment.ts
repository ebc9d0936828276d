// The storage functions' context for one cluster, from the Lambda environment.
import type { Environment } from '../../shared/lambda/environment.ts';
import { storagePlan } from '../../shared/clusters.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { DEFAULT_PERIOD_MS } from '../../shared/storage/index.ts';
import { migrations, type StorageContext } from './context.ts';

export function storageContext(env: Environment, cluster: string, holder: string, log?: StorageContext['log']): StorageContext {
  const config = env.clusters.config(cluster);
  const plan = storagePlan(config);
  return {
    cluster,
    kube: env.clusters.client(cluster),
    state: env.state,
    holder,
    reporters: plan.reporters,
    mode: config.storage?.migrations ?? 'outrigger',
    samples: plan.samples,
    periodMs: DEFAULT_PERIOD_MS,
    now: () => new Date(),
    ...(log ? { log } : {}),
    queueMigrations: (ms, cause) =>
      env.syncSink.send(
        'migrator',
        ms.map((m) =>
          makeSyncRequest(
            { cluster, group: migrations.group, kind: 'StorageVersionMigration', name: m.metadata.name ?? '', uid: m.metadata.uid ?? '' },
            [`StorageVersionMigration/${cause}/${m.metadata.resourceVersion ?? ''}`],
          ),
        ),
      ),
  };
}
