// The storage functions' context for one cluster, from the Lambda environment.
import type { Environment } from '../../shared/lambda/environment.ts';
import { DEFAULT_PERIOD_MS } from '../../shared/storage/index.ts';
import type { StorageContext } from './context.ts';

export function storageContext(env: Environment, cluster: string, holder: string, log?: StorageContext['log']): StorageContext {
  const config = env.clusters.config(cluster);
  return {
    cluster,
    kube: env.clusters.client(cluster),
    state: env.state,
    holder,
    reporters: env.clusters.reporters(cluster).map((r) => r.id),
    mode: config.storage?.migrations ?? 'outrigger',
    periodMs: DEFAULT_PERIOD_MS,
    now: () => new Date(),
    ...(log ? { log } : {}),
  };
}
