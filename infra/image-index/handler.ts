// The custom resource behind the forwarder's multi-platform image (docs/operations/forwarder.md#the-forwarders-image), called by the CDK's
// custom-resource provider: on create and update it writes the index over the platforms' image assets into
// their ECR repository and answers its digest; on delete it leaves the image, which the asset images it names
// outlive in any case (tags in the CDK's repository are immutable, and `cdk gc` decides what goes).
import { ECRClient, GetAuthorizationTokenCommand } from '@aws-sdk/client-ecr';
import type { CdkCustomResourceEvent, CdkCustomResourceResponse } from 'aws-lambda';
import { httpRegistry } from './registry.ts';
import { writeImageIndex } from './write.ts';

/** The resource's properties, as infra/outrigger.ts writes them. */
export interface ImageIndexProperties {
  /** `<registry host>/<repository>`, the assets' repository. */
  RepositoryUri: string;
  Tag: string;
  Images: { Platform: string; Tag: string }[];
}

const ecr = new ECRClient({});

export async function handler(event: CdkCustomResourceEvent): Promise<CdkCustomResourceResponse> {
  if (event.RequestType === 'Delete') return { PhysicalResourceId: event.PhysicalResourceId };
  const props = event.ResourceProperties as unknown as ImageIndexProperties;
  const slash = props.RepositoryUri.indexOf('/');
  const host = props.RepositoryUri.slice(0, slash);
  const repository = props.RepositoryUri.slice(slash + 1);
  const { authorizationData } = await ecr.send(new GetAuthorizationTokenCommand({}));
  const token = authorizationData?.[0];
  if (!token?.authorizationToken || !token.proxyEndpoint) throw new Error('ECR GetAuthorizationToken answered no token');
  // The token is for this account's registry in this region: a repository elsewhere would answer 401 or 404.
  if (new URL(token.proxyEndpoint).host !== host)
    throw new Error(`the repository ${props.RepositoryUri} is not in the registry the token is for (${token.proxyEndpoint})`);
  const registry = httpRegistry({ origin: `https://${host}`, authorization: `Basic ${token.authorizationToken}` });
  const digest = await writeImageIndex(registry, {
    repository,
    tag: props.Tag,
    images: props.Images.map((i) => ({ platform: i.Platform, tag: i.Tag })),
  });
  const uri = `${props.RepositoryUri}@${digest}`;
  return { PhysicalResourceId: uri, Data: { ImageUri: uri, Digest: digest } };
}
