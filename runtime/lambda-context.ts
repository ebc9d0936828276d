// Calling a handler as Lambda would, outside Lambda: with a context whose remaining time counts down from the
// function's timeout, and an error when the timeout passes. The local runtime calls handlers in its own
// process this way; `npm run invoke` calls a function's bundle this way in a process of its own.
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';

export interface LambdaFunction {
  /** The registry's name; the context calls the function `outrigger-<name>`. */
  name: string;
  timeoutSeconds: number;
}

export type Handler = (event: unknown, context: Context) => Promise<unknown>;

export function lambdaContext(fn: LambdaFunction, deadline: number = Date.now() + fn.timeoutSeconds * 1000): Context {
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: `outrigger-${fn.name}`,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:outrigger-${fn.name}`,
    memoryLimitInMB: '512',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/outrigger-${fn.name}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

/** Invokes a handler as Lambda would: with a context and the function's timeout. */
export async function invokeAsLambda(fn: LambdaFunction, handler: Handler, event: unknown): Promise<unknown> {
  const deadline = Date.now() + fn.timeoutSeconds * 1000;
  const context = lambdaContext(fn, deadline);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${fn.name} timed out after ${fn.timeoutSeconds} s`)), fn.timeoutSeconds * 1000);
  });
  try {
    return await Promise.race([handler(event, context), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
