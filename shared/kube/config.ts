// How Outrigger reaches a cluster. Four ways, one result (a KubeClient):
//  - a kubeconfig file (local runtime, CLI, tests; not in Lambda, see kubeconfig.ts);
//  - an explicit server, CA and bearer token (tests, and the CLI);
//  - a server, CA and a bearer token kept in AWS Secrets Manager (a cluster outside EKS), re-read every 5 minutes;
//  - an EKS cluster, authenticated with an IAM token made from the caller's own AWS credentials.
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import { KubeClient, type EndpointSource, type KubeClientOptions, type KubeEndpoint } from './client.ts';
import { eksTokenSource } from './eks-token.ts';
import { kubeconfigEndpoint } from './kubeconfig.ts';
import { secretTokenSource } from './secret-token.ts';

export type ClusterAccess =
  | { kind: 'kubeconfig'; path?: string | undefined; context?: string | undefined }
  | {
      kind: 'token';
      server: string;
      /** PEM of the cluster CA, base64-encoded as in a kubeconfig's certificate-authority-data. */
      caData?: string | undefined;
      token: string | (() => Promise<string>);
    }
  | {
      /** A bearer token kept in AWS Secrets Manager (clusters outside EKS). */
      kind: 'secret';
      server: string;
      caData?: string | undefined;
      secretArn: string;
      region?: string | undefined;
    }
  | {
      kind: 'eks';
      server: string;
      caData: string;
      clusterName: string;
      region: string;
      credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
    };

/** A server named in the configuration, its CA, and a bearer token asked for before every request (so that it can rotate). */
function bearerEndpoint(server: string, caData: string | undefined, token: () => Promise<string>): EndpointSource {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new Error(`cluster server ${JSON.stringify(server)} is not a URL`);
  }
  if (url.protocol !== 'https:') throw new Error(`cluster server ${server} must use https`);
  const endpoint: KubeEndpoint = {
    server,
    tls: caData ? { ca: Buffer.from(caData, 'base64') } : {},
    headers: async () => ({ authorization: `Bearer ${await token()}` }),
  };
  return () => Promise.resolve(endpoint);
}

export function connect(access: ClusterAccess, opts: KubeClientOptions = {}): KubeClient {
  switch (access.kind) {
    case 'kubeconfig':
      return new KubeClient(() => kubeconfigEndpoint(access.path, access.context), opts);
    case 'token': {
      const { token } = access;
      if (typeof token === 'string' && token.trim() === '') throw new Error('cluster access: the bearer token is empty');
      return new KubeClient(
        bearerEndpoint(access.server, access.caData, typeof token === 'string' ? () => Promise.resolve(token) : token),
        opts,
      );
    }
    case 'secret':
      return new KubeClient(
        bearerEndpoint(
          access.server,
          access.caData,
          secretTokenSource(access.secretArn, { region: access.region ?? access.secretArn.split(':')[3] }),
        ),
        opts,
      );
    case 'eks': {
      const token = eksTokenSource({
        clusterName: access.clusterName,
        region: access.region,
        credentials: access.credentials ?? defaultProvider(),
      });
      return new KubeClient(bearerEndpoint(access.server, access.caData, token), opts);
    }
  }
}
