// The base images the project's containers start from, built here from registry packages only, since no image
// can be pulled (docs/contributing/test-beds.md#the-base-images): a root filesystem assembled from the project's
// own Node.js (node_modules/node, from the npm registry; dynamically linked, so it comes with the shared libraries
// `ldd` names), this machine's `sh` and a few core utilities with theirs, a CA bundle, /etc/passwd and /etc/group,
// then `docker import`ed into the container engine (local/container-engine.ts).
//   - `node:24-slim`: a stand-in for Docker Hub's image, which forwarder/Dockerfile builds FROM: node and npm
//     (the npm registry's, same major as the real image's) under /usr/local, the `node` user (1000).
//   - `public.ecr.aws/lambda/nodejs:24-x86_64` (and `:24`): laid out as AWS's Lambda base images are. Node.js at
//     /var/lang/bin/node; the runtime under /var/runtime, its `bootstrap` running the npm registry's
//     aws-lambda-ric (its native client built here from the sources it ships); the function's code in /var/task,
//     layers in /opt; /lambda-entrypoint.sh takes the handler as its one argument and runs the runtime interface
//     emulator (SAM CLI's aws-lambda-rie, at /usr/local/bin) when AWS_LAMBDA_RUNTIME_API is unset.
//     That name is the one `sam local invoke` looks for: for a ZIP function of runtime nodejs24.x on x86_64, SAM
//     CLI 1.170 (samcli/local/docker/lambda_image.py) builds `public.ecr.aws/lambda/nodejs:24-rapid-x86_64` FROM
//     `public.ecr.aws/lambda/nodejs:24-x86_64` (the tag carries the architecture since the runtime has two),
//     adding its emulator at /var/rapid/aws-lambda-rie with a RUN of `mv` and `chmod` (hence the core
//     utilities), and with `--skip-pull-image` takes the base from the engine as it is; it runs the container
//     with the entrypoint `/var/rapid/aws-lambda-rie --log-level error`, which starts /var/runtime/bootstrap
//     with _HANDLER set from the AWS_LAMBDA_FUNCTION_HANDLER SAM passes (checked with its emulator).
// Each image is built once per fingerprint of its inputs (this recipe, test/images/*, the Node.js version, SAM
// CLI's pinned requirements for the emulator, the CA NODE_EXTRA_CA_CERTS names) and kept in the engine's
// machine-level data-root under a tag carrying the fingerprint, so a fresh clone finds it there.
//   node local/base-images.ts   builds them (starting the engine if need be)
import { chmod, copyFile, cp, mkdir, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { docker, engineDir, engineEnv, startContainerEngine } from './container-engine.ts';
import { cacheDir, projectRoot } from './paths.ts';
import { capture, fingerprint, run, withLock, type Log } from './process.ts';
import { ensureSam } from './sam.ts';

const recipeDir = join(projectRoot, 'test', 'images');
const nodeBinary = join(projectRoot, 'node_modules', 'node', 'bin', 'node');

export const NODE_SLIM_IMAGE = 'node:24-slim';
/** The name `sam local invoke` looks for as the base of a nodejs24.x x86_64 function; `:24` is the name users pull. */
export const LAMBDA_NODEJS_IMAGE = 'public.ecr.aws/lambda/nodejs:24-x86_64';
const LAMBDA_NODEJS_ALIAS = 'public.ecr.aws/lambda/nodejs:24';

/** Programs of this machine each image carries: a shell for RUN steps and scripts, and what SAM's RUN step calls. */
const HOST_PROGRAMS = ['sh', 'mv', 'chmod', 'cp', 'rm', 'mkdir', 'ln', 'cat', 'ls', 'env'];

async function which(name: string): Promise<string> {
  const out = await capture('sh', ['-c', `command -v ${name}`]);
  const path = out.stdout.trim();
  if (out.code !== 0 || !path.startsWith('/')) throw new Error(`${name} is not on PATH: the base images copy it from this machine`);
  return path;
}

/** The shared libraries `ldd` names for `binaries`, with the dynamic loader. */
async function sharedLibraries(binaries: string[]): Promise<string[]> {
  const libs = new Set<string>();
  for (const b of binaries) {
    const out = await capture('ldd', [b]);
    if (out.code !== 0) continue; // statically linked
    for (const m of out.stdout.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x/g)) libs.add(m[1]!);
  }
  return [...libs].sort();
}

/** Copies `file` to the same path under `root`, resolving symlinks (a library's soname link included). */
async function copyInto(root: string, file: string, as = file): Promise<void> {
  await mkdir(join(root, dirname(as)), { recursive: true });
  await copyFile(file, join(root, as));
}

const CA_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt'];
/** Where the node:24-slim stand-in keeps the CA that NODE_EXTRA_CA_CERTS names on the machine building it. */
const EXTRA_CA = '/usr/local/share/ca-certificates/node-extra-ca.crt';

/**
 * What every image has: Node.js at `nodePath` with its libraries, `sh` and the core utilities at /bin, a CA bundle at
 * both usual places, /etc/passwd, /etc/group and /etc/nsswitch.conf, home directories and a world-writable /tmp.
 */
async function commonRoot(root: string, nodePath: string, users: { name: string; uid: number; home: string }[]): Promise<void> {
  const programs = await Promise.all(HOST_PROGRAMS.map(which));
  for (const lib of await sharedLibraries([nodeBinary, ...programs])) await copyInto(root, lib);
  await copyInto(root, nodeBinary, nodePath);
  for (const [i, p] of programs.entries()) await copyInto(root, p, `/bin/${HOST_PROGRAMS[i]}`);
  await mkdir(join(root, 'usr', 'bin'), { recursive: true });
  await symlink('/bin/env', join(root, 'usr', 'bin', 'env'));
  const bundle = await readFile(CA_BUNDLES[0]!).catch(() => readFile(CA_BUNDLES[1]!));
  for (const b of CA_BUNDLES) {
    await mkdir(join(root, dirname(b)), { recursive: true });
    await writeFile(join(root, b), bundle);
  }
  const all = [{ name: 'root', uid: 0, home: '/root' }, ...users];
  await writeFile(join(root, 'etc', 'passwd'), all.map((u) => `${u.name}:x:${u.uid}:${u.uid}::${u.home}:/bin/sh\n`).join(''));
  await writeFile(join(root, 'etc', 'group'), all.map((u) => `${u.name}:x:${u.uid}:\n`).join(''));
  await writeFile(join(root, 'etc', 'nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  for (const u of all) await mkdir(join(root, u.home), { recursive: true });
  await mkdir(join(root, 'tmp'), { recursive: true });
  await chmod(join(root, 'tmp'), 0o1777);
}

/** `docker import` of `root` as `tag`; files are owned as they are on disk. */
async function importRoot(root: string, tag: string, changes: string[]): Promise<void> {
  const tarball = `${root}.tar`;
  await run('tar', ['--numeric-owner', '-C', root, '-cf', tarball, '.']);
  await docker('import', ...changes.flatMap((c) => ['--change', c]), tarball, tag);
  await rm(tarball, { force: true });
}

/** The npm packages of test/images, installed (without install scripts) into `dir`. */
async function installPackages(dir: string, log: Log): Promise<string> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) await copyFile(join(recipeDir, f), join(dir, f));
  log('installing npm and aws-lambda-ric for the base images from the npm registry');
  await run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir });
  return join(dir, 'node_modules');
}

/**
 * Builds aws-lambda-ric's native client (curl and aws-lambda-cpp from the sources the package ships, then the
 * addon; about 2.5 minutes on 2 cores): the npm package carries no prebuilt one. It is a Node-API addon, so
 * headers of any Node.js version build it; node-gyp would download them, so it is pointed at this machine's
 * (Debian's nodejs package has them under /usr/include/node).
 */
async function buildRuntimeClient(modules: string, log: Log): Promise<void> {
  const nodedir = process.env.npm_config_nodedir ?? '/usr';
  for (const tool of ['cmake', 'make', 'g++'])
    await which(tool).catch(() => {
      throw new Error(`building aws-lambda-ric's native client needs ${tool} (Debian: apt-get install cmake make g++)`);
    });
  await readFile(join(nodedir, 'include', 'node', 'node_api.h')).catch(() => {
    throw new Error(`building aws-lambda-ric's native client needs Node.js headers under ${nodedir}/include/node (set npm_config_nodedir)`);
  });
  log("building aws-lambda-ric's native client (first time: about 2.5 minutes)");
  await run('npm', ['rebuild', 'aws-lambda-ric', '--foreground-scripts'], {
    cwd: dirname(modules),
    env: { ...process.env, npm_config_nodedir: nodedir },
  });
}

async function nodeSlimRoot(root: string, modules: string): Promise<string[]> {
  await commonRoot(root, '/usr/local/bin/node', [{ name: 'node', uid: 1000, home: '/home/node' }]);
  await cp(join(modules, 'npm'), join(root, 'usr', 'local', 'lib', 'node_modules', 'npm'), { recursive: true });
  for (const bin of ['npm', 'npx']) await symlink(`../lib/node_modules/npm/bin/${bin}-cli.js`, join(root, 'usr', 'local', 'bin', bin));
  await run('chown', ['-R', '1000:1000', join(root, 'home', 'node')]);
  const version = (JSON.parse(await readFile(join(projectRoot, 'node_modules', 'node', 'package.json'), 'utf8')) as { version: string })
    .version;
  // A machine whose Node.js trusts an extra CA (a proxy that re-signs TLS between it and the npm registry) has its
  // builds trust it too, or their `npm ci` fails with SELF_SIGNED_CERT_IN_CHAIN; Node.js reads no system store.
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  if (extra) await copyInto(root, extra, EXTRA_CA);
  return [
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    `ENV NODE_VERSION=${version}`,
    ...(extra ? [`ENV NODE_EXTRA_CA_CERTS=${EXTRA_CA}`] : []),
    'CMD ["node"]',
  ];
}

async function lambdaRoot(root: string, modules: string, rie: string): Promise<string[]> {
  await commonRoot(root, '/var/lang/bin/node', [{ name: 'sbx_user1051', uid: 993, home: '/home/sbx_user1051' }]);
  const ric = join(root, 'var', 'runtime', 'node_modules', 'aws-lambda-ric');
  await mkdir(ric, { recursive: true });
  // The bundle (index.mjs, which inlines its JavaScript dependencies), its native client and its package.json
  // (`"type": "module"`, and the licences).
  for (const f of ['index.mjs', 'rapid-client.node', 'package.json', 'LICENSE', 'NOTICE', 'THIRD-PARTY-LICENSES'])
    await copyFile(join(modules, 'aws-lambda-ric', f), join(ric, f));
  for (const lib of await sharedLibraries([join(modules, 'aws-lambda-ric', 'rapid-client.node')])) await copyInto(root, lib);
  await copyFile(join(recipeDir, 'bootstrap'), join(root, 'var', 'runtime', 'bootstrap'));
  await copyFile(join(recipeDir, 'lambda-entrypoint.sh'), join(root, 'lambda-entrypoint.sh'));
  await copyInto(root, rie, '/usr/local/bin/aws-lambda-rie');
  for (const f of ['var/runtime/bootstrap', 'lambda-entrypoint.sh', 'usr/local/bin/aws-lambda-rie']) await chmod(join(root, f), 0o755);
  for (const d of ['var/task', 'opt', 'var/lang/lib']) await mkdir(join(root, d), { recursive: true });
  return [
    'ENV LANG=en_US.UTF-8',
    'ENV TZ=:/etc/localtime',
    'ENV PATH=/var/lang/bin:/usr/local/bin:/usr/bin/:/bin:/opt/bin',
    'ENV LD_LIBRARY_PATH=/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib',
    'ENV LAMBDA_TASK_ROOT=/var/task',
    'ENV LAMBDA_RUNTIME_DIR=/var/runtime',
    'ENV NODE_PATH=/opt/nodejs/node24/node_modules:/opt/nodejs/node_modules:/var/runtime/node_modules:/var/runtime:/var/task',
    'WORKDIR /var/task',
    'ENTRYPOINT ["/lambda-entrypoint.sh"]',
  ];
}

export interface BaseImages {
  nodeSlim: string;
  lambdaNodejs: string;
  /** Whether this call built them (false: found in the engine under their fingerprint). */
  built: boolean;
}

async function exists(image: string): Promise<boolean> {
  return (await capture('docker', ['image', 'inspect', '--format', '{{.Id}}', image], { env: engineEnv() })).code === 0;
}

/**
 * Builds both base images into the running engine unless it holds them at this recipe's fingerprint, and tags
 * them with the names Dockerfiles and SAM CLI use. A lock keeps two runs from building them at once.
 */
export async function ensureBaseImages(log: Log = () => {}): Promise<BaseImages> {
  const recipeFiles = [fileURLToPath(import.meta.url), ...(await readdir(recipeDir)).sort().map((f) => join(recipeDir, f))];
  const samRequirements = join(projectRoot, 'test', 'sam', 'requirements.txt');
  const nodePackage = join(projectRoot, 'node_modules', 'node', 'package.json');
  const extraCa = process.env.NODE_EXTRA_CA_CERTS ? [process.env.NODE_EXTRA_CA_CERTS] : [];
  const fp = (await fingerprint([...recipeFiles, samRequirements, nodePackage, ...extraCa])).slice(0, 16);
  const slim = `outrigger/node-slim:${fp}`;
  const lambda = `outrigger/lambda-nodejs:${fp}`;
  let built = false;
  await withLock(
    join(engineDir, 'images.lock'),
    async () => {
      if ((await exists(slim)) && (await exists(lambda))) return;
      built = true;
      const started = Date.now();
      const work = join(cacheDir, 'base-images');
      const [modules, python] = await Promise.all([installPackages(join(work, 'packages'), log), ensureSam(log)]);
      // Copied at once: the virtualenv is reinstalled whenever SAM CLI's requirements change.
      const rieBinary = join(work, 'aws-lambda-rie');
      await copyFile(await findRie(join(dirname(python), '..', 'lib')), rieBinary);
      await buildRuntimeClient(modules, log);
      for (const [tag, make] of [
        [slim, (root: string) => nodeSlimRoot(root, modules)],
        [lambda, (root: string) => lambdaRoot(root, modules, rieBinary)],
      ] as const) {
        const root = join(work, 'rootfs');
        await rm(root, { recursive: true, force: true });
        await mkdir(root, { recursive: true });
        await importRoot(root, tag, await make(root));
        await rm(root, { recursive: true, force: true });
      }
      // Images of earlier fingerprints go, but for the two newest: another clone's run (another branch's recipe)
      // may be using one at this moment.
      for (const repo of ['outrigger/node-slim', 'outrigger/lambda-nodejs']) {
        const tags = (await docker('image', 'ls', '--format', '{{.Repository}}:{{.Tag}}', repo)).split('\n').filter(Boolean);
        for (const t of tags.slice(3)) await docker('image', 'rm', t).catch(() => undefined);
      }
      log(`built the base images in ${Math.round((Date.now() - started) / 1000)} s`);
    },
    log,
  );
  await docker('tag', slim, NODE_SLIM_IMAGE);
  await docker('tag', lambda, LAMBDA_NODEJS_IMAGE);
  await docker('tag', lambda, LAMBDA_NODEJS_ALIAS);
  return { nodeSlim: NODE_SLIM_IMAGE, lambdaNodejs: LAMBDA_NODEJS_IMAGE, built };
}

/** SAM CLI's runtime interface emulator for x86_64, in its virtualenv's site-packages. */
async function findRie(lib: string): Promise<string> {
  for (const py of await readdir(lib)) {
    const file = join(lib, py, 'site-packages', 'samcli', 'local', 'rapid', 'aws-lambda-rie-x86_64');
    if (
      await readFile(file).then(
        () => true,
        () => false,
      )
    )
      return file;
  }
  throw new Error(`SAM CLI's aws-lambda-rie-x86_64 is not under ${lib}/python*/site-packages/samcli/local/rapid`);
}

// No top-level await: jest's global setup loads this module with require(), which refuses one.
if (import.meta.main) {
  const log = (m: string) => process.stderr.write(`${m}\n`);
  void (async () => {
    const engine = await startContainerEngine({ log });
    try {
      const images = await ensureBaseImages(log);
      process.stdout.write(`${JSON.stringify(images)}\n`);
    } finally {
      await engine.release();
    }
  })().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
