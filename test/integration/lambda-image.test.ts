// The base images built here from registry packages (docs/contributing/test-beds.md#the-base-images), in the
// bed's container engine. The Lambda image runs a handler as Lambda does: its own entrypoint and the runtime
// interface emulator, the code mounted at /var/task, a read-only root filesystem with a writable /tmp, a non-root
// user, no network (the invoke is made from inside the container: the engine has no bridge to publish a port on).
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureBaseImages, LAMBDA_NODEJS_IMAGE, NODE_SLIM_IMAGE } from '../../local/base-images.ts';
import { docker } from '../../local/container-engine.ts';
import { capture } from '../../local/process.ts';
import { containerEngineHost, uniqueName } from '../testbed/index.ts';

const log = (m: string) => process.stderr.write(`[lambda-image] ${m}\n`);
let taskRoot: string;
let container: string;

beforeAll(async () => {
  containerEngineHost();
  taskRoot = await mkdtemp(join(tmpdir(), 'outrigger-lambda-task-'));
  // Readable by the function's user, as a deployment package's files are (mkdtemp makes it 0700; the emulator stops
  // at once when it cannot read its working directory).
  await chmod(taskRoot, 0o755);
  await writeFile(
    join(taskRoot, 'index.mjs'),
    `import { writeFileSync } from 'node:fs';
export const handler = async (event, context) => {
  if (event.fail) throw new TypeError('asked to fail');
  const wrote = (path) => { try { writeFileSync(path, 'x'); return 'ok'; } catch (err) { return err.code; } };
  return {
    echo: event,
    node: process.version,
    uid: process.getuid(),
    handler: process.env._HANDLER,
    taskRoot: process.env.LAMBDA_TASK_ROOT,
    requestId: typeof context.awsRequestId,
    tmp: wrote('/tmp/x'),
    task: wrote('/var/task/x'),
  };
};
`,
  );
  // A cold run builds the images (about 5 minutes, aws-lambda-ric's native client most of it), unless
  // test/testbed/prebuild.ts already has.
  await ensureBaseImages(log);
  container = uniqueName('lambda-image');
  await docker(
    'run',
    '--detach',
    '--name',
    container,
    '--network',
    'none',
    '--read-only',
    '--tmpfs',
    '/tmp',
    '--user',
    '993:993',
    '--volume',
    `${taskRoot}:/var/task:ro`,
    LAMBDA_NODEJS_IMAGE,
    'index.handler',
  );
}, 900_000);

afterAll(async () => {
  if (container) await docker('rm', '--force', container).catch(() => {});
  await rm(taskRoot, { recursive: true, force: true });
});

/** POSTs `event` to the emulator's invoke URL from inside the container, as a client of Lambda's Invoke API would. */
async function invoke(event: unknown): Promise<unknown> {
  const script = `fetch('http://127.0.0.1:8080/2015-03-31/functions/function/invocations', { method: 'POST', body: process.argv[1] })
    .then((r) => r.text()).then((t) => process.stdout.write(t), (e) => { console.error(e.message); process.exit(1); })`;
  for (let attempt = 0; ; attempt += 1) {
    const out = await capture('docker', ['exec', container, '/var/lang/bin/node', '-e', script, JSON.stringify(event)], {
      env: { ...process.env, DOCKER_HOST: containerEngineHost() },
    });
    if (out.code === 0) return JSON.parse(out.stdout);
    // The emulator listens a moment after the container starts.
    if (attempt === 50) throw new Error(`invoke failed: ${out.stderr}\n${await docker('logs', container).catch(String)}`);
    await sleep(100);
  }
}

test("a handler answers through the image's entrypoint and emulator, as a non-root user on a read-only root", async () => {
  expect(await invoke({ hello: 'lambda' })).toEqual({
    echo: { hello: 'lambda' },
    node: expect.stringMatching(/^v24\./),
    uid: 993,
    handler: 'index.handler',
    taskRoot: '/var/task',
    requestId: 'string',
    tmp: 'ok',
    task: 'EROFS',
  });
});

test("a handler's error answers Lambda's error shape", async () => {
  expect(await invoke({ fail: true })).toEqual({
    errorType: 'TypeError',
    errorMessage: 'asked to fail',
    trace: expect.arrayContaining([expect.stringContaining('TypeError: asked to fail')]),
  });
});

test('the image is laid out as Lambda base images are', async () => {
  const config = JSON.parse(await docker('image', 'inspect', '--format', '{{json .Config}}', LAMBDA_NODEJS_IMAGE)) as {
    Entrypoint: string[];
    WorkingDir: string;
    Env: string[];
  };
  expect(config.Entrypoint).toEqual(['/lambda-entrypoint.sh']);
  expect(config.WorkingDir).toBe('/var/task');
  expect(config.Env).toEqual(
    expect.arrayContaining([
      'LAMBDA_TASK_ROOT=/var/task',
      'LAMBDA_RUNTIME_DIR=/var/runtime',
      expect.stringMatching(/^PATH=\/var\/lang\/bin:/),
    ]),
  );
  // What SAM CLI's build over it runs (`mv`, `chmod`), and the files it relies on.
  const ls = await docker(
    'run',
    '--rm',
    '--network',
    'none',
    '--entrypoint',
    '/bin/sh',
    LAMBDA_NODEJS_IMAGE,
    '-c',
    'ls /var/lang/bin/node /var/runtime/bootstrap /usr/local/bin/aws-lambda-rie /bin/mv /bin/chmod && ls -d /opt /var/task',
  );
  expect(ls.split('\n').filter(Boolean)).toHaveLength(7);
});

test('the node:24-slim stand-in has Node.js 24, npm 11 and the node user, as forwarder/Dockerfile expects', async () => {
  const out = await docker(
    'run',
    '--rm',
    '--network',
    'none',
    '--user',
    'node',
    NODE_SLIM_IMAGE,
    'sh',
    '-c',
    'node --version && npm --version && echo ~',
  );
  expect(out.split('\n').filter(Boolean)).toEqual([expect.stringMatching(/^v24\./), expect.stringMatching(/^11\./), '/home/node']);
});
