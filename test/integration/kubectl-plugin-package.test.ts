// The kubectl plugin installed outside a checkout (docs/controllers/history.md#the-kubectl-plugin): the npm package
// `npm run build:plugin` makes is packed, installed into a prefix of its own with npm, and run by the project's
// kubectl as `kubectl outrigger`, with nothing of the checkout on PATH but Node: it lists a StatefulSet's
// revisions from the test bed, and says that `run` needs a checkout. The krew manifest names the same package.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import { syncHistory } from '../../functions/history/sync.ts';
import { kubectlBinary } from '../../local/apiserver.ts';
import { projectRoot } from '../../local/paths.ts';
import { buildPlugin, pluginPackage } from '../../scripts/build-plugin.ts';
import { gvr } from '../../shared/kube/index.ts';
import { adminClient, createNamespace, outriggerClient, testbed, testState } from '../testbed/index.ts';
import { statefulSetPolicy } from '../testbed/policies.ts';

const run = promisify(execFile);

test('the plugin, packed and installed with npm outside the checkout, works as kubectl outrigger', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'outrigger-plugin-'));
  const { tarball, sha256 } = await buildPlugin({ pack: join(dir, 'pack') });
  expect(sha256).toMatch(/^[0-9a-f]{64}$/);
  const prefix = join(dir, 'prefix');
  await run('npm', ['install', '--global', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', tarball!], { cwd: dir });
  // Only the installed plugin and Node (the project's 24) on PATH; run from outside the checkout.
  const env = {
    HOME: dir,
    KUBECONFIG: testbed().kubeconfigs.admin,
    PATH: `${join(prefix, 'bin')}:${dirname(process.execPath)}:/usr/bin:/bin`,
  };
  const kubectl = async (...args: string[]) => (await run(kubectlBinary, args, { env, cwd: dir })).stdout;

  const ns = await createNamespace('plugin');
  const policy = await statefulSetPolicy(outriggerClient());
  const statefulSets = gvr('apps', 'v1', 'statefulsets');
  const spec = (image: string) => ({
    serviceName: 'web',
    replicas: 0,
    selector: { matchLabels: { app: 'web' } },
    template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image }] } },
  });
  const sync = async () => {
    const obj = await adminClient().get(statefulSets, { name: 'web', namespace: ns });
    const kube = outriggerClient();
    await syncHistory(
      { kube, state: testState(), holder: 'plugin-test' },
      policy,
      { cluster: 'it', group: 'apps', kind: 'StatefulSet', namespace: ns, name: 'web', uid: obj.metadata.uid! },
      ['ControllerRevision/x'],
    );
  };
  await adminClient().create(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: ns },
    spec: spec('registry.example/app:1'),
  });
  await sync();
  await adminClient().patch(
    statefulSets,
    { name: 'web', namespace: ns },
    { spec: { template: { spec: { containers: [{ name: 'c', image: 'registry.example/app:2' }] } } } },
    'strategic',
  );
  await sync();

  const listed = JSON.parse(await kubectl('outrigger', 'history', 'statefulset/web', '-n', ns, '-o', 'json')) as {
    revisions: Array<{ revision: number; current: boolean }>;
  };
  expect(listed.revisions.map((r) => [r.revision, r.current])).toEqual([
    [1, false],
    [2, true],
  ]);
  expect(await kubectl('outrigger', 'rollback', 'statefulset/web', '-n', ns, '--dry-run')).toMatch(
    /would be rolled back to revision 1 .*\(dry run\)/,
  );
  await expect(kubectl('outrigger', 'run')).rejects.toMatchObject({
    stderr: expect.stringMatching(/^outrigger: run needs a checkout of Outrigger/),
  });
  await expect(kubectl('outrigger', 'doctor')).rejects.toMatchObject({
    stderr: expect.stringMatching(/^outrigger: doctor needs a checkout of Outrigger/),
  });

  // The krew manifest installs the same package's file.
  const pkg = JSON.parse(await readFile(join(pluginPackage, 'package.json'), 'utf8')) as {
    name: string;
    version: string;
    bin: Record<string, string>;
  };
  const krew = load(await readFile(join(projectRoot, 'deploy', 'krew', 'outrigger.yaml'), 'utf8')) as {
    spec: { version: string; platforms: Array<{ uri: string; bin: string; files: Array<{ from: string }> }> };
  };
  expect(krew.spec.version).toBe(`v${pkg.version}`);
  for (const p of krew.spec.platforms) {
    expect(p.uri).toBe(`https://registry.npmjs.org/${pkg.name}/-/${pkg.name}-${pkg.version}.tgz`);
    expect(p.bin).toBe(pkg.bin['kubectl-outrigger']);
    expect(p.files.map((f) => f.from)).toContain(`package/${pkg.bin['kubectl-outrigger']}`);
  }
}, 120_000);
