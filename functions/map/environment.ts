// The map handler's hook caller, built once per process: Lambda hooks go to AWS Lambda, or to the local
// runtime's Invoke endpoint when OUTRIGGER_LAMBDA_ENDPOINT names one.
import { Hooks } from '../../shared/hooks/index.ts';

let hooks: Hooks | undefined;

export function hookCaller(env: NodeJS.ProcessEnv = process.env): Hooks {
  return (hooks ??= new Hooks({ lambdaEndpoint: env.OUTRIGGER_LAMBDA_ENDPOINT, region: env.AWS_REGION }));
}
