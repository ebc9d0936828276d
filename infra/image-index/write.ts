// Writes the forwarder's multi-platform image: the index over each platform's image asset, under a tag fixed at
// synth (docs/operations/forwarder.md#the-forwarders-image). Each image is checked to be for its platform first.
import {
  ACCEPTED_MANIFESTS,
  composeIndex,
  indexTag,
  parsePlatform,
  platformOf,
  readTag,
  sha256,
  type Descriptor,
  type Platform,
} from './manifests.ts';
import type { Registry } from './registry.ts';

export interface ImageIndexRequest {
  repository: string;
  /** The index's tag. */
  tag: string;
  /** Each platform's image, by the tag its asset was pushed under. */
  images: readonly { platform: string; tag: string }[];
}

/** Writes the index (or finds it written) and returns its digest. */
export async function writeImageIndex(registry: Registry, req: ImageIndexRequest): Promise<string> {
  // The function may write into a repository other stacks' assets share: the one tag its images determine, no other.
  const expected = indexTag(req.images);
  if (req.tag !== expected) throw new Error(`tag ${req.tag} is not the index tag of these images (${expected})`);
  const images: (Descriptor & { platform: Platform })[] = [];
  for (const image of req.images) images.push(await platformImage(registry, req.repository, image.tag, parsePlatform(image.platform)));
  const index = composeIndex(images);
  /** The digest of what the tag holds now, if anything. */
  const held = async () => {
    const there = await registry.manifest(req.repository, req.tag, ACCEPTED_MANIFESTS);
    return there && sha256(there.bytes);
  };
  // The CDK's asset repository keeps tags immutable: a tag already there must hold this very index.
  const digest = await held();
  if (digest) {
    if (digest !== index.digest)
      throw new Error(
        `${req.repository}:${req.tag} holds ${digest}, not the index of these images (${index.digest}); tags in this ` +
          `repository are immutable: delete that image (aws ecr batch-delete-image --repository-name ${req.repository} ` +
          `--image-ids imageTag=${req.tag}) and deploy again`,
      );
    return digest;
  }
  try {
    await registry.putManifest(req.repository, req.tag, index);
  } catch (err) {
    // Another stack built from the same sources may have written the same index in between (the tag is theirs
    // too); the immutable tag then refuses this write, and what it holds is what this one would have written.
    if ((await held()) === index.digest) return index.digest;
    throw err;
  }
  return index.digest;
}

async function platformImage(
  registry: Registry,
  repository: string,
  tag: string,
  want: Platform,
): Promise<Descriptor & { platform: Platform }> {
  const what = `${repository}:${tag}`;
  const served = await registry.manifest(repository, tag, ACCEPTED_MANIFESTS);
  if (!served) throw new Error(`${what}: no such image (was the asset published?)`);
  let content = readTag(served, want, what);
  if (content.kind === 'index') {
    const inner = await registry.manifest(repository, content.image.digest, ACCEPTED_MANIFESTS);
    if (!inner) throw new Error(`${what}: its image ${content.image.digest} is missing`);
    content = readTag(inner, want, `${what}'s image ${content.image.digest}`);
    if (content.kind !== 'image') throw new Error(`${what}: its image is an index in turn`);
  }
  const platform = platformOf(await registry.blob(repository, content.config), want, what);
  return { ...content.descriptor, platform };
}
