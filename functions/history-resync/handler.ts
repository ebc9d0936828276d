import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { revisionPolicies } from '../history/policies.ts';
import { RESYNC_CAUSE } from '../history/resync.ts';

const logger = functionLogger('history-resync');

/**
 * Queues a check of every RevisionPolicy with a resync cause; the history handler re-reports each and queues a
 * sync of every parent of those in effect (docs/controllers/history.md#policy-conditions). One list per cluster per period.
 */
export const handler = middy(async (event: { cluster?: string }) => {
  const env = environment();
  const cause = `${RESYNC_CAUSE}${new Date().toISOString()}`;
  let queued = 0;
  for (const cluster of event.cluster ? [event.cluster] : env.clusters.ids()) {
    const policies = await env.clusters.client(cluster).listMetadata(revisionPolicies);
    const requests = policies.items.map((p) =>
      makeSyncRequest(
        { cluster, group: revisionPolicies.group, kind: 'RevisionPolicy', name: p.metadata.name ?? '', uid: p.metadata.uid ?? '' },
        [cause],
      ),
    );
    await env.syncSink.send('history', requests);
    queued += requests.length;
  }
  logger.info('history resync', { queued });
  return { queued };
}).use(injectLambdaContext(logger));
