// The map handler's hook caller, built once per process: Lambda hooks go to AWS Lambda, or to the local
// runtime's Invoke endpoint when OUTRIGGER_LAMBDA_ENDPOINT names one. Webhook requests are signed with the secret
// in Secrets Manager (OUTRIGGER_HOOK_SECRET_ARN, set by the stack) or, locally, in a file
// (OUTRIGGER_HOOK_SECRET_FILE); docs/reference/hooks.md#the-webhook-contract has the contract. Where webhooks may go
// is the deployment's allow-list, OUTRIGGER_WEBHOOK_ALLOW (docs/reference/hooks.md#where-webhooks-may-go).
import { readFile } from 'node:fs/promises';
import { Hooks } from '../../shared/hooks/index.ts';
import { secretTokenSource } from '../../shared/kube/secret-token.ts';

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

/** The deployment's signing secret, as the map function reads it (and `outrigger hook-key`, with the same variables). */
export function signingSecret(env: NodeJS.ProcessEnv): (() => Promise<string>) | undefined {
  // Read again every few minutes, as a cluster token is, so a rotated secret is picked up without a redeploy.
  if (env.OUTRIGGER_HOOK_SECRET_ARN) return secretTokenSource(env.OUTRIGGER_HOOK_SECRET_ARN, { region: env.AWS_REGION });
  const file = env.OUTRIGGER_HOOK_SECRET_FILE;
  if (!file) return undefined;
  let secret: Promise<string> | undefined;
  return () =>
    (secret ??= readFile(file, 'utf8').then((text) => {
      if (!text.trim()) throw new Error(`the hook signing secret file ${file} is empty`);
      return text.trim();
    }));
}
