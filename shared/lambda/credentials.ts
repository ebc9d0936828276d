// What a Lambda bundle has in place of `@aws-sdk/credential-provider-node` (scripts/bundle.ts ALIASES). In Lambda a
// function's credentials are always its execution role's, which the runtime puts in the environment; the default
// chain's other sources (SSO, shared ini files, web identity, IMDS, container endpoints) would only add code that
// every cold start parses (about 130 KB, an STS and an SSO client among it). Only bundles see this module: tests,
// the local runtime and the forwarder keep the whole chain.
import { fromEnv, type FromEnvInit } from '@aws-sdk/credential-provider-env';
import type { AwsCredentialIdentityProvider } from '@smithy/types';

/** The one export of `@aws-sdk/credential-provider-node` that the SDK clients and shared/kube/config.ts use. */
export const defaultProvider = (init: FromEnvInit = {}): AwsCredentialIdentityProvider => fromEnv(init);
