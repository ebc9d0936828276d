// The map handler's hook caller, built once per process: Lambda hooks go to AWS Lambda, or to the local
// runtime's Invoke endpoint when OUTRIGGER_LAMBDA_ENDPOINT names one. Webhook requests are signed with the secret
// in Secrets Manager (OUTRIGGER_HOOK_SECRET_ARN, set by the stack) or, locally, in a file
// (OUTRIGGER_HOOK_SECRET_FILE); docs/reference/hooks.md#the-webhook-contract has the contract. Where webhooks may go
// is the deployment's allow-list, OUTRIGGER_WEBHOOK_ALLOW (docs/reference/hooks.md#where-webhooks-may-go).
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
  }));
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
