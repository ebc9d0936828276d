// The forwarder's multi-platform image, as manifests: what the registry holds for each platform's image asset
// (an image manifest, or an index holding one, as Docker's containerd image store pushes it), and the index
// over them that the stack writes (docs/operations/forwarder.md#the-forwarders-image). No I/O: registry.ts reads and
// writes the bytes.
import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import { firstIssue } from '../../shared/validation.ts';

export const MEDIA = {
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
} as const;

const IMAGE_TYPES: readonly string[] = [MEDIA.ociManifest, MEDIA.dockerManifest];
const INDEX_TYPES: readonly string[] = [MEDIA.ociIndex, MEDIA.dockerList];
/** What a registry may answer for a tag the asset publishing pushed. */
export const ACCEPTED_MANIFESTS = [...IMAGE_TYPES, ...INDEX_TYPES];

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: Platform;
}

/** A manifest as the registry served it: its bytes are what its digest is taken over. */
export interface Served {
  mediaType: string;
  bytes: Uint8Array;
}

const digestSchema = z.string().check(z.regex(/^sha256:[0-9a-f]{64}$/, 'must be a sha256 digest'));
const platformSchema = z.looseObject({ os: z.string(), architecture: z.string(), variant: z.optional(z.string()) });
const descriptorSchema = z.looseObject({
  mediaType: z.string(),
  digest: digestSchema,
  size: z.number().check(z.int(), z.nonnegative()),
  platform: z.optional(platformSchema),
});
const imageSchema = z.looseObject({ schemaVersion: z.literal(2), config: descriptorSchema });
const indexSchema = z.looseObject({ schemaVersion: z.literal(2), manifests: z.array(descriptorSchema) });
const configSchema = z.looseObject({ os: z.string(), architecture: z.string(), variant: z.optional(z.string()) });

export const sha256 = (bytes: Uint8Array): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** `linux/arm64` or `linux/arm64/v8`, as `docker build --platform` takes it. */
export function parsePlatform(text: string): Platform {
  const [os, architecture, variant, ...rest] = text.split('/');
  if (!os || !architecture || rest.length > 0 || variant === '')
    throw new Error(`platform ${JSON.stringify(text)} is not os/architecture[/variant] (linux/arm64, say)`);
  return variant ? { os, architecture, variant } : { os, architecture };
}

export const platformText = (p: Platform): string => [p.os, p.architecture, p.variant].filter(Boolean).join('/');

/** Whether `have` runs where `want` is asked for: a variant asked for must match, one not asked for is any. */
const fits = (have: Platform, want: Platform) =>
  have.os === want.os && have.architecture === want.architecture && (want.variant === undefined || have.variant === want.variant);

function parse<T>(schema: z.ZodMiniType<T>, bytes: Uint8Array, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch (err) {
    throw new Error(`${what} is not JSON: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const [field, problem] = firstIssue(parsed.error, '(whole)');
    throw new Error(`${what}: ${field}: ${problem}`);
  }
  return parsed.data;
}

/**
 * What a platform's tag holds: its image manifest's descriptor and config digest, or, when the tag is an index,
 * the descriptor of the one image in it for `want` (attestations, platform `unknown/unknown`, are left out).
 */
export type TagContent = { kind: 'image'; descriptor: Descriptor; config: string } | { kind: 'index'; image: Descriptor };

export function readTag(served: Served, want: Platform, what: string): TagContent {
  const mediaType = served.mediaType.split(';')[0]!.trim();
  const descriptor = { mediaType, digest: sha256(served.bytes), size: served.bytes.byteLength };
  if (IMAGE_TYPES.includes(mediaType)) return { kind: 'image', descriptor, config: parse(imageSchema, served.bytes, what).config.digest };
  if (!INDEX_TYPES.includes(mediaType)) throw new Error(`${what} is ${mediaType}, not an image manifest or index`);
  const images = parse(indexSchema, served.bytes, what).manifests.filter(
    (m) => IMAGE_TYPES.includes(m.mediaType) && m.platform !== undefined && fits(m.platform, want),
  );
  if (images.length !== 1) throw new Error(`${what} is an index with ${images.length} images for ${platformText(want)}, not one`);
  return { kind: 'index', image: images[0]! };
}

/**
 * The platform an image's config says it is for, which must fit the one its asset was built for: an image built
 * for the wrong platform would start on no node of the other kind (exec format error), so it is refused here.
 */
export function platformOf(config: Uint8Array, want: Platform, what: string): Platform {
  const c = parse(configSchema, config, `${what}'s config`);
  const have: Platform = c.variant
    ? { os: c.os, architecture: c.architecture, variant: c.variant }
    : { os: c.os, architecture: c.architecture };
  if (!fits(have, want)) throw new Error(`${what} is an image for ${platformText(have)}, not ${platformText(want)}`);
  return have;
}

/**
 * The index over one image per platform: a Docker manifest list when every image is a Docker manifest (what
 * older runtimes read), an OCI index otherwise. Its bytes are fixed by its images, so its digest is too.
 */
export function composeIndex(images: readonly (Descriptor & { platform: Platform })[]): Served & { digest: string } {
  if (images.length === 0) throw new Error('an index needs at least one image');
  const seen = new Set<string>();
  for (const i of images) {
    const p = platformText(i.platform);
    if (seen.has(p)) throw new Error(`two images for ${p}`);
    seen.add(p);
  }
  const mediaType = images.every((i) => i.mediaType === MEDIA.dockerManifest) ? MEDIA.dockerList : MEDIA.ociIndex;
  const manifests = images.map((i) => ({
    mediaType: i.mediaType,
    digest: i.digest,
    size: i.size,
    platform: i.platform.variant
      ? { architecture: i.platform.architecture, os: i.platform.os, variant: i.platform.variant }
      : { architecture: i.platform.architecture, os: i.platform.os },
  }));
  const bytes = new TextEncoder().encode(JSON.stringify({ schemaVersion: 2, mediaType, manifests }));
  return { mediaType, bytes, digest: sha256(bytes) };
}

/**
 * Bumped when composeIndex writes other bytes for the same images: the tag below would otherwise name an index
 * already in the repository with the old bytes, which its immutable tags keep.
 */
const INDEX_FORMAT = 1;

/**
 * The index's tag: fixed by the platforms' image tags and the index format, so it is known at synth (the stack
 * puts it in the template, where `cdk gc` finds it) and the index function can check it is asked for no other.
 */
export function indexTag(images: readonly { platform: string; tag: string }[]): string {
  const text = [`format=${INDEX_FORMAT}`, ...images.map((i) => `${platformText(parsePlatform(i.platform))}=${i.tag}`)].join('\n');
  return `index-${createHash('sha256').update(text).digest('hex')}`;
}
