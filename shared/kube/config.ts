// How Outrigger reaches a cluster. Three ways, one result (a KubeClient):
//  - a kubeconfig file (local runtime, CLI, tests);
//  - an explicit server, CA and bearer token (tests, and the CLI);
//  - a server, CA and a bearer token kept in AWS Secrets Manager (a cluster outside EKS), re-read every 5 minutes;
//  - an EKS cluster, authenticated with an IAM token made from the caller's own AWS credentials.
import { KubeConfig } from '@kubernetes/client-node';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import { KubeClient, type KubeClientOptions } from './client.ts';
import { eksTokenSource } from './eks-token.ts';
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

export function kubeConfigFromFile(path?: string, context?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  if (context) kc.setCurrentContext(context);
  if (!kc.getCurrentCluster()) {
    throw new Error(`no cluster in ${path ?? 'the default kubeconfig'}${context ? ` for context ${context}` : ''}`);
  }
  return kc;
}

function kubeConfigForServer(server: string, caData: string | undefined): KubeConfig {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new Error(`cluster server ${JSON.stringify(server)} is not a URL`);
  }
  if (url.protocol !== 'https:') throw new Error(`cluster server ${server} must use https`);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'target', server, ...(caData ? { caData } : {}), skipTLSVerify: false }],
    // The bearer token is supplied per request (KubeClientOptions.bearerToken) so that it can rotate.
    users: [{ name: 'outrigger' }],
    contexts: [{ name: 'target', cluster: 'target', user: 'outrigger' }],
    currentContext: 'target',
  });
  return kc;
}

export function connect(access: ClusterAccess, opts: KubeClientOptions = {}): KubeClient {
  switch (access.kind) {
    case 'kubeconfig':
      return new KubeClient(kubeConfigFromFile(access.path, access.context), opts);
    case 'token': {
      const { token } = access;
      if (typeof token === 'string' && token.trim() === '') throw new Error('cluster access: the bearer token is empty');
      const bearerToken = typeof token === 'string' ? () => Promise.resolve(token) : token;
      return new KubeClient(kubeConfigForServer(access.server, access.caData), { ...opts, bearerToken });
    }
    case 'secret':
      return new KubeClient(kubeConfigForServer(access.server, access.caData), { ...opts, bearerToken: secretTokenSource(access.secretArn, { region: access.region ?? access.secretArn.split(':')[3] }) });
    case 'eks': {
      const bearerToken = eksTokenSource({
        clusterName: access.clusterName,
        region: access.region,
        credentials: access.credentials ?? defaultProvider(),
      });
      return new KubeClient(kubeConfigForServer(access.server, access.caData), { ...opts, bearerToken });
    }
  }
}
