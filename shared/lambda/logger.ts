import { Logger } from '@aws-lambda-powertools/logger';

/** One structured logger per function; the level comes from POWERTOOLS_LOG_LEVEL (default INFO). */
export function functionLogger(functionName: string): Logger {
  return new Logger({ serviceName: 'outrigger', persistentKeys: { function: functionName } });
}
