import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { listPolicies, policyFor } from '../history/policies.ts';
import { truncateHistory } from '../history/truncate.ts';

export const handler = syncFunction('truncate', async ({ key }, { env, logger }) => {
  const kube = env.clusters.client(key.cluster);
  const policy = policyFor(await listPolicies(kube, key.cluster), key.group, key.kind);
  if (!policy) return;
  const result = await truncateHistory({ kube }, policy, key);
  logger.info('history truncated', { parent: `${key.namespace}/${key.name}`, ...result });
});
