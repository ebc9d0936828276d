import { randomUUID } from 'node:crypto';
import { syncFunction } from '../../shared/lambda/sync-function.ts';
import { listPolicies, policyFor } from '../history/policies.ts';
import { truncateHistory } from '../history/truncate.ts';

const holder = `truncate-${randomUUID()}`;

export const handler = syncFunction('truncate', async ({ key }, { env, logger }) => {
  const kube = env.clusters.client(key.cluster);
  const policy = policyFor(await listPolicies(kube, key.cluster), key.group, key.kind);
  if (!policy) return;
  const result = await truncateHistory({ kube, state: env.state, holder }, policy, key);
  logger.info('history truncated', { parent: `${key.namespace}/${key.name}`, ...result });
});
