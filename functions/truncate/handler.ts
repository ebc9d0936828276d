import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { syncBatchHandler } from '../../shared/lambda/batch.ts';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { listPolicies, policyFor } from '../history/policies.ts';
import { truncateHistory } from '../history/truncate.ts';

const logger = functionLogger('truncate');
const holder = `truncate-${randomUUID()}`;

export const handler = middy(
  syncBatchHandler({
    source: 'truncate',
    deadLetter: () => environment().deadLetter,
    log: (level, message, fields) => logger[level](message, fields ?? {}),
    process: async ({ key }) => {
      const env = environment();
      const kube = env.clusters.client(key.cluster);
      const policy = policyFor(await listPolicies(kube, key.cluster), key.group, key.kind);
      if (!policy) return;
      const result = await truncateHistory({ kube, state: env.state, holder }, policy, key);
      logger.info('history truncated', { parent: `${key.namespace}/${key.name}`, ...result });
    },
  }),
).use(injectLambdaContext(logger));
