// EKS authenticates an IAM identity from a bearer token that is a presigned STS GetCallerIdentity URL, bound
// to one cluster through the signed `x-k8s-aws-id` header. With it an EKS cluster needs no static secret:
// the Lambda's own role is the identity, mapped to Outrigger's RBAC through an EKS access entry.
import { Hash } from '@smithy/hash-node';
import { HttpRequest } from '@smithy/protocol-http';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import { partition } from '@aws-sdk/core/client';
import { reusableToken } from './token-source.ts';

export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';
const CLUSTER_ID_HEADER = 'x-k8s-aws-id';
/** STS accepts the presigned URL for 60 seconds of signing time; EKS honours the token for 15 minutes. */
const PRESIGN_SECONDS = 60;
const REUSE_MS = 10 * 60 * 1000;

export interface EksTokenOptions {
  clusterName: string;
  region: string;
  credentials: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** For tests: the signing time. */
  now?: () => Date;
}

export async function eksToken(opts: EksTokenOptions): Promise<string> {
  const hostname = stsHostname(opts.region);
  const signer = new SignatureV4({
    service: 'sts',
    region: opts.region,
    credentials: opts.credentials,
    sha256: Hash.bind(null, 'sha256'),
  });
  const request = new HttpRequest({
    method: 'GET',
    protocol: 'https:',
    hostname,
    path: '/',
    query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
    headers: { host: hostname, [CLUSTER_ID_HEADER]: opts.clusterName },
  });
  const signed = await signer.presign(request, {
    expiresIn: PRESIGN_SECONDS,
    ...(opts.now ? { signingDate: opts.now() } : {}),
  });
  const query = Object.entries(signed.query ?? {})
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  const url = `https://${hostname}/?${query}`;
  return EKS_TOKEN_PREFIX + Buffer.from(url, 'utf8').toString('base64url');
}

/**
 * The regional STS endpoint EKS verifies the token against: `sts.<region>.<the partition's DNS suffix>`, the
 * suffix from the AWS SDK's partition table (amazonaws.com.cn in China, amazonaws.com in the commercial and
 * GovCloud regions), so a cluster in any partition gets the host its STS answers on.
 */
export function stsHostname(region: string): string {
  return `sts.${region}.${partition(region).dnsSuffix}`;
}

/** A bearer token source for connect(): one token is reused for ten minutes, then renewed. */
export function eksTokenSource(opts: EksTokenOptions): () => Promise<string> {
  return reusableToken(() => eksToken(opts), REUSE_MS);
}
