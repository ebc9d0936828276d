import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { recordHeartbeat } from './heartbeat.ts';

const logger = functionLogger('heartbeat');

export const handler = middy(async () => {
  const env = environment();
  const results = await Promise.all(env.clusters.ids().map(async (id) => ({ id, ...(await recordHeartbeat(id, env.clusters.client(id), env.state)) })));
  for (const r of results) {
    if (r.lastError) logger.warn('cluster unreachable', { cluster: r.id, error: r.lastError });
    else logger.debug('cluster reached', { cluster: r.id, gitVersion: r.gitVersion });
  }
  return { clusters: results.length, unreachable: results.filter((r) => r.lastError).length };
}).use(injectLambdaContext(logger));
