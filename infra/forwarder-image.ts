// The forwarder's image, built by the stack: a container image asset per platform and, for two or more, the
// multi-platform index over them, written by a custom resource at deploy time (infra/image-index).
import { CustomResource, Duration, IgnoreMode, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import * as iam from 'aws-cdk-lib/aws-iam';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as cr from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import { projectRoot } from '../local/paths.ts';
import { acknowledgeWildcard } from './acknowledge.ts';
import { bundled } from './bundling.ts';
import { roleAndLogs, type FunctionSettings } from './functions.ts';
import type { ImageIndexProperties } from './image-index/handler.ts';
import { indexTag, parsePlatform, platformText } from './image-index/manifests.ts';
import { output, pascal } from './names.ts';

/** The forwarder image's platforms unless forwarderImage.platforms says otherwise: x86 and Graviton nodes. */
export const FORWARDER_PLATFORMS: readonly ecrAssets.Platform[] = [ecrAssets.Platform.LINUX_AMD64, ecrAssets.Platform.LINUX_ARM64];

/**
 * The forwarder's image: an asset per platform and, for two or more, the index over them that a custom
 * resource writes next to them (docs/operations/forwarder.md#the-forwarders-image), output as ForwarderImageUri.
 */
export function addForwarderImage(scope: Construct, platforms: readonly ecrAssets.Platform[], settings: FunctionSettings): void {
  if (platforms.length === 0) throw new Error('forwarderImage.platforms: names no platform');
  const names = platforms.map((p) => parsePlatform(p.platform));
  const twice = names.map(platformText).find((p, i, all) => all.indexOf(p) !== i);
  if (twice) throw new Error(`forwarderImage.platforms: names ${twice} twice`);
  const images = platforms.map(
    (platform, i) =>
      new ecrAssets.DockerImageAsset(scope, `ForwarderImage${pascal(platformText(names[i]!).replace(/\//g, '-'))}`, {
        directory: projectRoot,
        file: 'forwarder/Dockerfile',
        platform,
        // The build reads these only (see the Dockerfile's COPY lines): staging the whole project would copy
        // node_modules and .cache into every cloud assembly.
        ignoreMode: IgnoreMode.DOCKER,
        exclude: ['*', '!package.json', '!package-lock.json', '!shared', '!functions', '!forwarder'],
      }),
  );
  const what = "The forwarder's image (forwarder/Dockerfile), built by the stack";
  if (images.length === 1) {
    output(scope, 'ForwarderImageUri', `${what} for ${platforms[0]!.platform}`, images[0]!.imageUri);
    return;
  }
  const repository = images[0]!.repository;
  const onEvent = new NodejsFunction(scope, 'ForwarderImageIndexFunction', {
    ...bundled('infra/image-index/handler.ts', settings.architecture),
    ...roleAndLogs(scope, settings, 'ForwarderImageIndex', RemovalPolicy.DESTROY, true),
    description: "Writes the index over the forwarder image's platforms into the CDK's asset repository (deploy time only)",
    handler: 'handler',
    memorySize: 256,
    timeout: Duration.minutes(2),
  });
  // Reads each platform's manifest and config, and writes the index's manifest: no layer is pushed.
  onEvent.addToRolePolicy(
    new iam.PolicyStatement({
      actions: ['ecr:BatchGetImage', 'ecr:GetDownloadUrlForLayer', 'ecr:PutImage'],
      resources: [repository.repositoryArn],
    }),
  );
  onEvent.addToRolePolicy(new iam.PolicyStatement({ actions: ['ecr:GetAuthorizationToken'], resources: ['*'] }));
  Validations.of(onEvent.role!).acknowledge({
    id: 'AwsSolutions-IAM5[Resource::*]',
    reason:
      'ecr:GetAuthorizationToken, for the registry credential the index is written with, has no resource-level permissions; the repository actions name the asset repository only',
  });
  const framework = roleAndLogs(scope, settings, 'ForwarderImageIndexProvider', RemovalPolicy.DESTROY, true);
  const provider = new cr.Provider(scope, 'ForwarderImageIndexProvider', {
    onEventHandler: onEvent,
    frameworkOnEventRole: framework.role,
    logGroup: framework.logGroup,
  });
  acknowledgeWildcard(
    framework.role,
    `${onEvent.functionArn}:*`,
    "The provider framework invokes the index function by any of its versions (the CDK's grantInvoke): that function's, no other's",
  );
  const sources = images.map((image, i) => ({ platform: platformText(names[i]!), tag: image.imageTag }));
  const properties: ImageIndexProperties = {
    RepositoryUri: repository.repositoryUri,
    Tag: indexTag(sources),
    Images: sources.map((source) => ({ Platform: source.platform, Tag: source.tag })),
  };
  const index = new CustomResource(scope, 'ForwarderImageIndex', {
    serviceToken: provider.serviceToken,
    resourceType: 'Custom::OutriggerImageIndex',
    properties,
  });
  output(
    scope,
    'ForwarderImageUri',
    `${what} for ${names.map(platformText).join(' and ')}: its index, by digest`,
    index.getAttString('ImageUri'),
  );
}
