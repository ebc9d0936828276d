import { parseSyncCause } from '../../shared/lambda/sync-request.ts';
import { fittedSyncFunction } from '../../shared/lambda/sync-function.ts';
import { forgetPolicies, listPolicies, policyFor } from '../history/policies.ts';
import { truncateHistory } from '../history/truncate.ts';

export const handler = fittedSyncFunction('truncate', async ({ key, causes }, { env, logger, metrics }) => {
  const kube = env.clusters.client(key.cluster);
  // Asked because a policy's spec changed: its new limit, not the one a warm process may still hold.
  if (causes.some((c) => parseSyncCause(c).kind === 'RevisionPolicy')) forgetPolicies(key.cluster);
  const policy = policyFor(await listPolicies(kube, key.cluster), key.group, key.kind);
  if (!policy) return;
  const result = await truncateHistory({ kube }, policy, key);
  logger.info('history truncated', { parent: `${key.namespace}/${key.name}`, ...result });
  if (result.deleted.length) metrics.count(key.cluster, 'RevisionsTruncated', result.deleted.length);
});
