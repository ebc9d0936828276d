// The deployment's signing secret, from which each MapController's webhook key and each cluster's forwarder key
// are derived: in Secrets Manager (OUTRIGGER_HOOK_SECRET_ARN, set by the stack for the map function and the
// router) or, locally, in a file (OUTRIGGER_HOOK_SECRET_FILE).
import { readFile } from 'node:fs/promises';
import { secretTokenSource } from '../kube/secret-token.ts';

/** The deployment's signing secret, as the map function and the router read it (and `outrigger hook-key` and `forwarder-key`, with the same variables). */
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
