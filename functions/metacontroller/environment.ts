// The Metacontroller-style controllers' hook caller, built once per process: Lambda hooks go to AWS Lambda, or to the local
// runtime's Invoke endpoint when OUTRIGGER_LAMBDA_ENDPOINT names one. Webhook requests are signed with the secret
// in Secrets Manager (OUTRIGGER_HOOK_SECRET_ARN, set by the stack) or, locally, in a file
// (OUTRIGGER_HOOK_SECRET_FILE); docs/reference/hooks.md#the-webhook-contract has the contract. Where webhooks may go
// is the deployment's allow-list, OUTRIGGER_WEBHOOK_ALLOW (docs/reference/hooks.md#where-webhooks-may-go); which
// definitions may call each Lambda hook, OUTRIGGER_HOOK_BINDINGS (docs/reference/hooks.md#who-may-call-a-lambda-hook).
import { parseLambdaBindings, type LambdaBinding } from '../../shared/hooks/bindings.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { signingSecret } from '../../shared/lambda/signing-secret.ts';

export { signingSecret };

let hooks: Hooks | undefined;

export function hookCaller(env: NodeJS.ProcessEnv = process.env): Hooks {
  return (hooks ??= new Hooks({
    lambdaEndpoint: env.OUTRIGGER_LAMBDA_ENDPOINT,
    region: env.AWS_REGION,
    // Only the local runtime serves a Lambda endpoint of its own; there, hooks on this machine may be plain http.
    allowLoopbackHttp: Boolean(env.OUTRIGGER_LAMBDA_ENDPOINT),
    webhookAllow: webhookAllow(env),
    signingSecret: signingSecret(env),
    lambdaBindings: lambdaBindings(env),
  }));
}

/**
 * OUTRIGGER_HOOK_BINDINGS: a JSON array of bindings, which the stack always sets. Without it a function in AWS binds
 * no Lambda hook to anyone; the local runtime (its own Invoke endpoint) checks none unless it is set.
 */
export function lambdaBindings(env: NodeJS.ProcessEnv): LambdaBinding[] | undefined {
  const text = env.OUTRIGGER_HOOK_BINDINGS?.trim();
  if (!text) return env.OUTRIGGER_LAMBDA_ENDPOINT ? undefined : [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`OUTRIGGER_HOOK_BINDINGS is not JSON: ${JSON.stringify(text.slice(0, 100))}`);
  }
  return parseLambdaBindings(value);
}

/** OUTRIGGER_WEBHOOK_ALLOW: a JSON array of host names and address ranges (checked by the Hooks constructor). */
export function webhookAllow(env: NodeJS.ProcessEnv): string[] | undefined {
  const text = env.OUTRIGGER_WEBHOOK_ALLOW?.trim();
  if (!text) return undefined;
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch {
    list = undefined;
  }
  if (!Array.isArray(list) || !list.every((e) => typeof e === 'string'))
    throw new Error(
      `OUTRIGGER_WEBHOOK_ALLOW must be a JSON array of host names and address ranges, got ${JSON.stringify(text.slice(0, 100))}`,
    );
  return list;
}
