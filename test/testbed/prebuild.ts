// The Go programs only a few integration files need (Helm, crane, kwok, LWS's manager) and the images of the
// container tests (local/base-images.ts, local/forwarder-image.ts), built ahead of them while
// the other files run: the global setup starts this at a low CPU priority once the default bed's own builds are
// under way, and the files that need a program wait for its build (buildOnce's lock) or find it built. Run alone,
// it builds them all (docs/contributing/test-beds.md#cost).
import { startContainerEngine } from '../../local/container-engine.ts';
import { buildForwarderImage } from '../../local/forwarder-image.ts';
import { ensureHelmBinary } from '../../local/helm.ts';
import { ensureKwok } from '../../local/kwok.ts';
import { ensureCrane } from '../../local/registry.ts';
import { ensureLwsManager } from './lws.ts';

const log = (m: string) => process.stderr.write(`[testbed] ${m}\n`);

/** The base images and the forwarder's image, in the engine the global setup starts (held by this process too while it builds). */
async function baseImages(): Promise<void> {
  const engine = await startContainerEngine({ log });
  try {
    await buildForwarderImage(log);
  } finally {
    await engine.release();
  }
}

const built = await Promise.allSettled([ensureCrane(log), ensureHelmBinary(log), ensureKwok(log), ensureLwsManager(log), baseImages()]);
const failed = built.filter((b): b is PromiseRejectedResult => b.status === 'rejected');
// A failed build is the business of the file that needs the program: it builds again and fails with the reason.
for (const f of failed) log(`a build ahead of need failed: ${String(f.reason)}`);
process.exitCode = failed.length ? 1 : 0;
