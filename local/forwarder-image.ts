// The forwarder's image as shipped (docs/operations/forwarder.md#run-the-image-locally): forwarder/Dockerfile built
// in the project's container engine (local/container-engine.ts) FROM the node:24-slim stand-in
// (local/base-images.ts), from the files the stack's image asset stages (infra/forwarder-image.ts).
//   node local/forwarder-image.ts   builds it as outrigger-forwarder:local (starting the engine if need be)
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBaseImages } from './base-images.ts';
import { docker, engineDir, startContainerEngine } from './container-engine.ts';
import { projectRoot } from './paths.ts';
import { withLock, type Log } from './process.ts';

export const FORWARDER_IMAGE = 'outrigger-forwarder:local';

/** What the image's build reads (its COPY lines), as the stack's asset stages it. */
const CONTEXT = ['package.json', 'package-lock.json', 'shared', 'functions', 'forwarder'];

/**
 * forwarder/Dockerfile for the engine's classic builder. The file builds its first stage on the builder's own
 * platform (`FROM --platform=$BUILDPLATFORM`) so that a multi-platform build needs no emulator; BuildKit defines
 * BUILDPLATFORM, the classic builder does not (20.10 refuses the empty platform), and it builds one platform, its
 * own, where the flag changes nothing: it is dropped here, and the Dockerfile stays as users' buildx needs it.
 */
export function classicDockerfile(text: string): string {
  return text.replace(/^(FROM\s+)--platform=\$BUILDPLATFORM\s+/gm, '$1');
}

/**
 * Builds the image (the engine's layer cache keeps the npm ci step while package*.json are unchanged); RUN steps
 * use the host's network, the engine having no bridge, for npm ci to reach the registry.
 */
export async function buildForwarderImage(log: Log = () => {}): Promise<string> {
  await ensureBaseImages(log);
  // One build at a time (the builds ahead of need and a test file may ask at once): the second finds every step cached.
  await withLock(join(engineDir, 'forwarder-image.lock'), () => build(log), log);
  return FORWARDER_IMAGE;
}

async function build(log: Log): Promise<void> {
  const context = await mkdtemp(join(tmpdir(), 'outrigger-forwarder-image-'));
  try {
    for (const entry of CONTEXT) await cp(join(projectRoot, entry), join(context, entry), { recursive: true });
    const dockerfile = join(context, '.build', 'Dockerfile');
    await mkdir(join(context, '.build'));
    await writeFile(dockerfile, classicDockerfile(await readFile(join(projectRoot, 'forwarder', 'Dockerfile'), 'utf8')));
    const started = Date.now();
    await docker('build', '--network', 'host', '--file', dockerfile, '--tag', FORWARDER_IMAGE, context);
    log(`built ${FORWARDER_IMAGE} in ${Math.round((Date.now() - started) / 1000)} s`);
    // Untagged images go once a week old: the build stage's layers are untagged too, and are the cache that spares
    // a build after a source change the npm ci step (pruned at once, every build would run it again).
    await docker('image', 'prune', '--force', '--filter', 'until=168h');
  } finally {
    await rm(context, { recursive: true, force: true });
  }
}

// No top-level await: jest's global setup loads this module with require(), which refuses one.
if (import.meta.main) {
  const log = (m: string) => process.stderr.write(`${m}\n`);
  void (async () => {
    const engine = await startContainerEngine({ log });
    try {
      process.stdout.write(`${await buildForwarderImage(log)}\n`);
    } finally {
      await engine.release();
    }
  })().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
