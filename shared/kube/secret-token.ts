// A bearer token kept in AWS Secrets Manager, for clusters outside EKS: read on first use and again after
// `ttlMs` (so a rotated token is picked up without a redeploy), never from an environment variable. The secret
// is the token itself, or JSON with a `token` field.
import type { GetSecretValueCommandOutput } from '@aws-sdk/client-secrets-manager';
import { reusableToken } from './token-source.ts';

export type SecretReader = (secretId: string) => Promise<Pick<GetSecretValueCommandOutput, 'SecretString'>>;

/**
 * The SDK's reader, loaded on first use (only clusters reached this way pay for the client). Its endpoint is
 * Secrets Manager's in the region, unless AWS_ENDPOINT_URL_SECRETS_MANAGER names another: a local one, for a function
 * run in its Lambda container on a local cluster (local/secrets-endpoint.ts).
 */
function sdkReader(region: string | undefined): SecretReader {
  let client: Promise<(id: string) => Promise<GetSecretValueCommandOutput>> | undefined;
  return async (secretId) => {
    client ??= import('@aws-sdk/client-secrets-manager').then(({ SecretsManagerClient, GetSecretValueCommand }) => {
      const sm = new SecretsManagerClient(region ? { region } : {});
      return (id: string) => sm.send(new GetSecretValueCommand({ SecretId: id }));
    });
    return (await client)(secretId);
  };
}

export function secretTokenSource(
  secretId: string,
  opts: { region?: string | undefined; ttlMs?: number; read?: SecretReader; now?: () => number } = {},
): () => Promise<string> {
  const read = opts.read ?? sdkReader(opts.region);
  return reusableToken(async () => tokenOf((await read(secretId)).SecretString, secretId), opts.ttlMs ?? 5 * 60_000, opts.now);
}

function tokenOf(value: string | undefined, secretId: string): string {
  const text = value?.trim() ?? '';
  if (!text) throw new Error(`secret ${secretId} has no string value: store the cluster's bearer token, or {"token": "..."}`);
  if (!text.startsWith('{')) return text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`secret ${secretId} looks like JSON but does not parse: store the token, or {"token": "..."}`);
  }
  const token = (parsed as { token?: unknown }).token;
  if (typeof token !== 'string' || !token.trim()) throw new Error(`secret ${secretId} is JSON without a "token" string field`);
  return token.trim();
}
