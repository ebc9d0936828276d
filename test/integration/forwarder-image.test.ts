// The forwarder's multi-platform image (docs/operations/forwarder.md#the-forwarders-image): the index the stack's custom resource writes over
// each platform's image asset, written by the same code (infra/image-index/write.ts) into a real OCI registry on
// loopback (go-containerregistry's, local/registry.ts), and read back by another client (crane) as a node of
// each platform would pull it. The platforms' images are made here as the asset publishing pushes them: Docker
// manifests (Docker's classic image store) or an OCI index with an attestation beside the image (its containerd
// image store).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { indexTag, MEDIA } from '../../infra/image-index/manifests.ts';
import { httpRegistry, type Registry } from '../../infra/image-index/registry.ts';
import { writeImageIndex } from '../../infra/image-index/write.ts';
import { run } from '../../local/process.ts';
import { startRegistry, type LocalRegistry } from '../../local/registry.ts';

let reg: LocalRegistry;
let registry: Registry;
let layer: string;
let n = 0;

beforeAll(async () => {
  reg = await startRegistry();
  registry = httpRegistry({ origin: reg.endpoint });
  const dir = await mkdtemp(join(tmpdir(), 'outrigger-image-'));
  await writeFile(join(dir, 'forwarder.mjs'), 'console.log("forwarder")\n');
  layer = join(dir, 'layer.tar');
  await run('tar', ['-C', dir, '-cf', layer, 'forwarder.mjs']);
}, 900_000); // a cold run may still be building crane (test/testbed/prebuild.ts)
afterAll(() => reg?.stop());

/** A fresh repository per test: what one test writes cannot answer for another. */
const repository = () => `cdk-assets-${++n}`;

/** Pushes an image for `platform` (one layer, its config saying that platform) as `repo:tag`; `oci` for OCI media types. */
async function pushImage(repo: string, tag: string, platform: string, oci = false): Promise<string> {
  const ref = `${reg.host}/${repo}:${tag}`;
  await reg.crane('append', '-f', layer, '-t', ref, ...(oci ? ['--oci-empty-base'] : []));
  await reg.crane('mutate', ref, '--set-platform', platform, '-t', ref);
  return (await reg.crane('digest', ref)).trim();
}

/** The request the stack's custom resource makes: the amd64 image pushed as `a1`, the arm64 one as `b2`. */
const images = [
  { platform: 'linux/amd64', tag: 'a1' },
  { platform: 'linux/arm64', tag: 'b2' },
];
const TAG = indexTag(images);
const bothPlatforms = (repository: string) => ({ repository, tag: TAG, images });

/** The platforms a node resolves the image to: for each, the architecture its config says. */
async function resolvedPlatforms(ref: string, platforms: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const p of platforms)
    out[p] = (JSON.parse(await reg.crane('config', '--platform', p, ref)) as { architecture: string }).architecture;
  return out;
}

test('writes a Docker manifest list over the amd64 and arm64 images, which each platform resolves to its own image', async () => {
  const repo = repository();
  const amd = await pushImage(repo, 'a1', 'linux/amd64');
  const arm = await pushImage(repo, 'b2', 'linux/arm64');
  const digest = await writeImageIndex(registry, bothPlatforms(repo));
  expect((await reg.crane('digest', `${reg.host}/${repo}:${TAG}`)).trim()).toBe(digest);
  const index = JSON.parse(await reg.crane('manifest', `${reg.host}/${repo}@${digest}`)) as {
    mediaType: string;
    manifests: { digest: string; platform: { architecture: string } }[];
  };
  expect(index.mediaType).toBe(MEDIA.dockerList);
  expect(index.manifests.map((m) => [m.platform.architecture, m.digest])).toEqual([
    ['amd64', amd],
    ['arm64', arm],
  ]);
  expect(await resolvedPlatforms(`${reg.host}/${repo}@${digest}`, ['linux/amd64', 'linux/arm64'])).toEqual({
    'linux/amd64': 'amd64',
    'linux/arm64': 'arm64',
  });
});

test('a second deploy (an update, a retry) finds the same index under the tag and writes nothing', async () => {
  const repo = repository();
  await pushImage(repo, 'a1', 'linux/amd64');
  await pushImage(repo, 'b2', 'linux/arm64');
  const req = bothPlatforms(repo);
  const first = await writeImageIndex(registry, req);
  let puts = 0;
  const counting: Registry = { ...registry, putManifest: async (...a) => (puts++, registry.putManifest(...a)) };
  expect(await writeImageIndex(counting, req)).toBe(first);
  expect(puts).toBe(0);
});

test("takes each platform's image out of an index holding it beside an attestation (Docker's containerd image store)", async () => {
  const repo = repository();
  const arm = await pushImage(repo, 'arm-image', 'linux/arm64', true);
  await pushImage(repo, 'attestation', 'unknown/unknown', true);
  await reg.crane(
    'index',
    'append',
    '-m',
    `${reg.host}/${repo}:arm-image`,
    '-m',
    `${reg.host}/${repo}:attestation`,
    '-t',
    `${reg.host}/${repo}:b2`,
  );
  const amd = await pushImage(repo, 'a1', 'linux/amd64', true);
  const digest = await writeImageIndex(registry, bothPlatforms(repo));
  const index = JSON.parse(await reg.crane('manifest', `${reg.host}/${repo}@${digest}`)) as {
    mediaType: string;
    manifests: { digest: string }[];
  };
  expect(index.mediaType).toBe(MEDIA.ociIndex);
  expect(index.manifests.map((m) => m.digest)).toEqual([amd, arm]);
  expect(await resolvedPlatforms(`${reg.host}/${repo}:${TAG}`, ['linux/amd64', 'linux/arm64'])).toEqual({
    'linux/amd64': 'amd64',
    'linux/arm64': 'arm64',
  });
});

test("a write refused because another deploy wrote the same index first (the tag is both stacks') is taken as done", async () => {
  const repo = repository();
  await pushImage(repo, 'a1', 'linux/amd64');
  await pushImage(repo, 'b2', 'linux/arm64');
  // The other stack's write lands between this one's read of the tag and its own write, which the immutable tag refuses.
  const racing: Registry = {
    ...registry,
    putManifest: async (repository, tag, manifest) => {
      await registry.putManifest(repository, tag, manifest);
      throw new Error(`PUT ${repository}:${tag}: the registry answered 400: TAG_INVALID The image tag already exists`);
    },
  };
  const digest = await writeImageIndex(racing, bothPlatforms(repo));
  expect((await reg.crane('digest', `${reg.host}/${repo}:${TAG}`)).trim()).toBe(digest);
});

describe('refuses, naming the problem, and writes no index', () => {
  const absent = async (repo: string, tag: string) =>
    expect(await registry.manifest(repo, tag, [MEDIA.dockerList, MEDIA.ociIndex])).toBeUndefined();

  test('an asset built for another platform than its own (an x86 image where Graviton nodes would pull it)', async () => {
    const repo = repository();
    await pushImage(repo, 'a1', 'linux/amd64');
    await pushImage(repo, 'b2', 'linux/amd64');
    await expect(writeImageIndex(registry, bothPlatforms(repo))).rejects.toThrow(`${repo}:b2 is an image for linux/amd64, not linux/arm64`);
    await absent(repo, TAG);
  });

  test('a tag other than the one its images determine (the function writes into a repository other stacks share)', async () => {
    const repo = repository();
    await pushImage(repo, 'a1', 'linux/amd64');
    await pushImage(repo, 'b2', 'linux/arm64');
    await expect(writeImageIndex(registry, { ...bothPlatforms(repo), tag: 'latest' })).rejects.toThrow(
      `tag latest is not the index tag of these images (${TAG})`,
    );
    await absent(repo, 'latest');
  });

  test('an asset that was never published', async () => {
    const repo = repository();
    await pushImage(repo, 'a1', 'linux/amd64');
    await expect(writeImageIndex(registry, bothPlatforms(repo))).rejects.toThrow(`${repo}:b2: no such image (was the asset published?)`);
    await absent(repo, TAG);
  });

  test('a tag already holding another image, which it leaves as it is (the asset repository keeps tags immutable)', async () => {
    const repo = repository();
    await pushImage(repo, 'a1', 'linux/amd64');
    await pushImage(repo, 'b2', 'linux/arm64');
    const other = await pushImage(repo, TAG, 'linux/amd64');
    await expect(writeImageIndex(registry, bothPlatforms(repo))).rejects.toThrow(
      `${repo}:${TAG} holds ${other}, not the index of these images`,
    );
    expect((await reg.crane('digest', `${reg.host}/${repo}:${TAG}`)).trim()).toBe(other);
  });
});
