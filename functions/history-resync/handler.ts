import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Context } from 'aws-lambda';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { clusterBudget, eachCluster, throwIfAnyFailed } from '../../shared/lambda/per-cluster.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { revisionPolicies } from '../history/policies.ts';
import { RESYNC_CAUSE } from '../history/resync.ts';

const logger = functionLogger('history-resync');

/**
 * Queues a check of every RevisionPolicy with a resync cause; the history handler re-reports each and queues a
 * sync of every parent of those in effect (docs/controllers/history.md#policy-conditions). One list per cluster per period.
 */
export const handler = middy(async (event: { cluster?: string }, context: Context) => {
  const env = environment();
  const cause = `${RESYNC_CAUSE}${new Date().toISOString()}`;
  // The clusters at once, each on its own budget (docs/operations/operating.md#one-cluster-cannot-stall-another).
  const outcomes = await eachCluster(
    event.cluster ? [event.cluster] : env.clusters.ids(),
    clusterBudget(context.getRemainingTimeInMillis()),
    async (cluster, deadline) => {
      const policies = await env.clusters.client(cluster).within(deadline).listMetadata(revisionPolicies);
      const requests = policies.items.map((p) =>
        makeSyncRequest(
          { cluster, group: revisionPolicies.group, kind: 'RevisionPolicy', name: p.metadata.name ?? '', uid: p.metadata.uid ?? '' },
          [cause],
        ),
      );
      await env.syncSink.send('history', requests);
      return requests.length;
    },
    ({ cluster, value, error }) =>
      error
        ? logger.error('history resync failed', { cluster, error: error.message })
        : logger.info('history resync', { cluster, queued: value }),
  );
  throwIfAnyFailed('history resync', outcomes);
  return { queued: outcomes.reduce((n, o) => n + (o.value ?? 0), 0) };
}).use(injectLambdaContext(logger));
