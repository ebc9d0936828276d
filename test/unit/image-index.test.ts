// The forwarder image's index, as manifests (infra/image-index/manifests.ts): what a platform's tag holds, the
// platform an image's config says, and the index over the images. The same against a real registry:
// test/integration/forwarder-image.test.ts.
import fc from 'fast-check';
import {
  composeIndex,
  indexTag,
  MEDIA,
  parsePlatform,
  platformOf,
  readTag,
  sha256,
  type Platform,
} from '../../infra/image-index/manifests.ts';

const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const arm64: Platform = { os: 'linux', architecture: 'arm64' };
const amd64: Platform = { os: 'linux', architecture: 'amd64' };

const dockerImage = bytes({
  schemaVersion: 2,
  mediaType: MEDIA.dockerManifest,
  config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: 10, digest: digest(1) },
  layers: [],
});

describe("a platform's tag", () => {
  test('as an image manifest: the descriptor over its very bytes, and its config', () => {
    expect(readTag({ mediaType: MEDIA.dockerManifest, bytes: dockerImage }, arm64, 'fwd:a')).toEqual({
      kind: 'image',
      descriptor: { mediaType: MEDIA.dockerManifest, digest: sha256(dockerImage), size: dockerImage.byteLength },
      config: digest(1),
    });
  });

  test("as an index (Docker's containerd image store pushes one, with an attestation): the one image for the platform", () => {
    const image = { mediaType: MEDIA.ociManifest, digest: digest(2), size: 500, platform: arm64 };
    const attestation = {
      mediaType: MEDIA.ociManifest,
      digest: digest(3),
      size: 800,
      platform: { os: 'unknown', architecture: 'unknown' },
    };
    const index = bytes({ schemaVersion: 2, mediaType: MEDIA.ociIndex, manifests: [image, attestation] });
    expect(readTag({ mediaType: `${MEDIA.ociIndex}; charset=utf-8`, bytes: index }, arm64, 'fwd:a')).toEqual({ kind: 'index', image });
    expect(() => readTag({ mediaType: MEDIA.ociIndex, bytes: index }, amd64, 'fwd:a')).toThrow(
      'fwd:a is an index with 0 images for linux/amd64, not one',
    );
  });

  test.each([
    [
      'another media type',
      { mediaType: 'application/vnd.oci.image.config.v1+json', bytes: dockerImage },
      'fwd:a is application/vnd.oci.image.config.v1+json, not an image manifest or index',
    ],
    ['not JSON', { mediaType: MEDIA.ociManifest, bytes: new TextEncoder().encode('{') }, 'fwd:a is not JSON'],
    ['no config', { mediaType: MEDIA.ociManifest, bytes: bytes({ schemaVersion: 2, layers: [] }) }, 'fwd:a: config:'],
    [
      'a bad digest',
      { mediaType: MEDIA.ociManifest, bytes: bytes({ schemaVersion: 2, config: { mediaType: 'x', size: 1, digest: 'md5:00' } }) },
      'fwd:a: config.digest: must be a sha256 digest',
    ],
  ])('%s is refused by name', (_, served, message) => {
    expect(() => readTag(served, arm64, 'fwd:a')).toThrow(message);
  });
});

describe("an image's platform", () => {
  test('is what its config says, which must fit the platform asked for', () => {
    expect(platformOf(bytes({ os: 'linux', architecture: 'arm64', variant: 'v8', rootfs: {} }), arm64, 'fwd:a')).toEqual({
      ...arm64,
      variant: 'v8',
    });
    expect(() => platformOf(bytes({ os: 'linux', architecture: 'amd64' }), arm64, 'fwd:a')).toThrow(
      'fwd:a is an image for linux/amd64, not linux/arm64',
    );
    expect(() =>
      platformOf(bytes({ os: 'linux', architecture: 'arm64', variant: 'v7' }), parsePlatform('linux/arm64/v8'), 'fwd:a'),
    ).toThrow('fwd:a is an image for linux/arm64/v7, not linux/arm64/v8');
  });

  test.each(['linux', 'linux/', 'linux/arm64/', 'linux/arm64/v8/x'])('%j is not a platform', (text) => {
    expect(() => parsePlatform(text)).toThrow(`platform ${JSON.stringify(text)} is not os/architecture[/variant]`);
  });
});

describe('the index', () => {
  test('is a Docker manifest list over Docker manifests, an OCI index otherwise, and its digest is over its bytes', () => {
    const docker = composeIndex([
      { mediaType: MEDIA.dockerManifest, digest: digest(1), size: 1, platform: amd64 },
      { mediaType: MEDIA.dockerManifest, digest: digest(2), size: 2, platform: arm64 },
    ]);
    expect(docker.mediaType).toBe(MEDIA.dockerList);
    expect(docker.digest).toBe(sha256(docker.bytes));
    expect(JSON.parse(new TextDecoder().decode(docker.bytes))).toEqual({
      schemaVersion: 2,
      mediaType: MEDIA.dockerList,
      manifests: [
        { mediaType: MEDIA.dockerManifest, digest: digest(1), size: 1, platform: { architecture: 'amd64', os: 'linux' } },
        { mediaType: MEDIA.dockerManifest, digest: digest(2), size: 2, platform: { architecture: 'arm64', os: 'linux' } },
      ],
    });
    const mixed = composeIndex([
      { mediaType: MEDIA.dockerManifest, digest: digest(1), size: 1, platform: amd64 },
      { mediaType: MEDIA.ociManifest, digest: digest(2), size: 2, platform: arm64 },
    ]);
    expect(mixed.mediaType).toBe(MEDIA.ociIndex);
  });

  test('refuses no image, and two for one platform', () => {
    expect(() => composeIndex([])).toThrow('an index needs at least one image');
    expect(() =>
      composeIndex([
        { mediaType: MEDIA.ociManifest, digest: digest(1), size: 1, platform: arm64 },
        { mediaType: MEDIA.ociManifest, digest: digest(2), size: 1, platform: arm64 },
      ]),
    ).toThrow('two images for linux/arm64');
  });

  test('is fixed by its images: the same images give the same bytes, any other image another digest', () => {
    // Small ranges, so that equal images are drawn too.
    const image = fc.record({
      mediaType: fc.constantFrom(MEDIA.dockerManifest, MEDIA.ociManifest),
      digest: fc.integer({ min: 0, max: 3 }).map(digest),
      size: fc.nat({ max: 3 }),
    });
    fc.assert(
      fc.property(image, image, image, (a, b, c) => {
        const index = (arm: typeof b) =>
          composeIndex([
            { ...a, platform: amd64 },
            { ...arm, platform: arm64 },
          ]);
        expect(index(structuredClone(b)).bytes).toEqual(index(b).bytes);
        const same = b.digest === c.digest && b.size === c.size && b.mediaType === c.mediaType;
        expect(index(b).digest === index(c).digest).toBe(same);
      }),
    );
  });
});

describe("the index's tag", () => {
  const images = [
    { platform: 'linux/amd64', tag: 'a1' },
    { platform: 'linux/arm64', tag: 'b2' },
  ];

  test('is a valid image tag, fixed by the platforms and their image tags, and by nothing else', () => {
    expect(indexTag(images)).toMatch(/^index-[0-9a-f]{64}$/);
    expect(indexTag(structuredClone(images))).toBe(indexTag(images));
    expect(indexTag([images[0]!, { ...images[1]!, tag: 'b3' }])).not.toBe(indexTag(images));
    expect(indexTag([images[0]!, { ...images[1]!, platform: 'linux/arm64/v8' }])).not.toBe(indexTag(images));
    expect(indexTag([images[0]!])).not.toBe(indexTag(images));
  });
});
