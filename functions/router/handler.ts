import middy from '@middy/core';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { SQSEvent } from 'aws-lambda';
import { environment } from '../../shared/lambda/environment.ts';
import { functionLogger } from '../../shared/lambda/logger.ts';
import { controllerSources, type ControllerSource } from '../controllers.ts';
import { routeBatch } from './route.ts';

const logger = functionLogger('router');

export function createRouterHandler(sources: readonly ControllerSource[]) {
  return middy(async (event: SQSEvent) => {
    const env = environment();
    const { batchItemFailures, stats } = await routeBatch(event, {
      clusters: env.clusters,
      sources,
      sink: env.syncSink,
      deadLetter: () => env.deadLetter,
      log: (level, message, fields) => logger[level](message, fields ?? {}),
    });
    logger.debug('routed', { ...stats });
    return { batchItemFailures };
  }).use(injectLambdaContext(logger));
}

export const handler = createRouterHandler(controllerSources);
