// kubectl interoperability with the project's own kubectl (1.35.4, built with the test cluster): the stock
// `kubectl rollout history` and `kubectl rollout undo --to-revision` work on Outrigger's revisions of a
// StatefulSet and a DaemonSet, Outrigger recognises each undo as a rollback, and `kubectl outrigger` works
// as a plugin.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { forgetPolicies, listPolicies, policyFor } from '../../functions/history/policies.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { kubectlBinary } from '../../local/apiserver.ts';
import { projectRoot } from '../../local/paths.ts';
import { forgetDiscovery, gvr, isKubeError, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testState, testbed } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { DAEMONSET_POLICY, STATEFULSET_POLICY } from '../testbed/policies.ts';
import { controllersGrant } from '../testbed/rbac.ts';
import { rollbackPatch } from '../../shared/history/rollback.ts';
import type { JsonObject } from '../../shared/history/data.ts';

const run = promisify(execFile);
const statefulSets = gvr('apps', 'v1', 'statefulsets');
const daemonSets = gvr('apps', 'v1', 'daemonsets');

const kube = outriggerClient();
const state = testState();

async function kubectl(...args: string[]): Promise<string> {
  // KUBECONFIG, not --kubeconfig: kubectl takes no flags before a plugin's name.
  const env = { ...process.env, KUBECONFIG: testbed().kubeconfigs.admin, PATH: `${join(projectRoot, 'bin')}:${process.env.PATH ?? ''}` };
  const { stdout } = await run(kubectlBinary, args, { env });
  return stdout;
}

async function syncOf(kind: 'StatefulSet' | 'DaemonSet', obj: KubeObject) {
  const policy = policyFor(await listPolicies(kube, 'it'), 'apps', kind)!;
  return syncHistory(
    { kube, state, holder: 'kubectl-test' },
    policy,
    { cluster: 'it', group: 'apps', kind, namespace: obj.metadata.namespace, name: obj.metadata.name!, uid: obj.metadata.uid! },
    ['ControllerRevision/x'],
  );
}

const spec = (image: string, extra: Record<string, unknown> = {}) => ({
  selector: { matchLabels: { app: 'web' } },
  template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image }] } },
  ...extra,
});

beforeAll(async () => {
  await applyManifests(adminClient(), `${STATEFULSET_POLICY}\n---\n${DAEMONSET_POLICY}`);
  forgetPolicies();
});

test.each([
  ['StatefulSet', 'statefulset', statefulSets, { serviceName: 'web', replicas: 0 }],
  ['DaemonSet', 'daemonset', daemonSets, {}],
] as const)(
  'kubectl rollout history and undo work on %s revisions, and the undo is seen as a rollback',
  async (kind, arg, resource, extra) => {
    const ns = await createNamespace('kubectl');
    const admin = adminClient();
    let obj = await admin.create(resource, {
      apiVersion: 'apps/v1',
      kind,
      metadata: { name: 'web', namespace: ns },
      spec: spec('registry.example/app:1', extra),
    });
    await syncOf(kind, obj);
    for (const image of ['registry.example/app:2', 'registry.example/app:3']) {
      obj = await admin.patch(
        resource,
        { name: 'web', namespace: ns },
        { spec: { template: { spec: { containers: [{ name: 'c', image }] } } } },
        'strategic',
      );
      await syncOf(kind, obj);
    }

    const listed = await kubectl('rollout', 'history', `${arg}/web`, '-n', ns);
    expect(listed).toMatch(/REVISION\s+CHANGE-CAUSE/);
    expect(
      listed
        .split('\n')
        .filter((l) => /^\d+\s/.test(l))
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(['1', '2', '3']);
    expect(await kubectl('rollout', 'history', `${arg}/web`, '-n', ns, '--revision', '1')).toContain('registry.example/app:1');

    expect(await kubectl('rollout', 'undo', `${arg}/web`, '-n', ns, '--to-revision', '1')).toMatch(/rolled back/);
    obj = await admin.get(resource, { name: 'web', namespace: ns });
    expect(JSON.stringify(obj.spec)).toContain('registry.example/app:1');
    expect(await syncOf(kind, obj)).toMatchObject({ outcome: 'rollback', number: 4 });
    const after = await kubectl('rollout', 'history', `${arg}/web`, '-n', ns);
    expect(
      after
        .split('\n')
        .filter((l) => /^\d+\s/.test(l))
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(['2', '3', '4']);

    // The same through the plugin: history (the current revision marked, ages), one revision with its diff, and rollbacks.
    const table = await kubectl('outrigger', 'history', `${arg}/web`, '-n', ns);
    expect(table).toMatch(/REVISION\s+NAME\s+CURRENT\s+AGE\s+CHANGE-CAUSE/);
    const rows = table
      .split('\n')
      .filter((l) => /^\d+\s/.test(l))
      .map((l) => l.split(/\s+/));
    expect(rows.map((r) => r[0])).toEqual(['2', '3', '4']);
    expect(rows.map((r) => r[2])).toEqual([expect.stringMatching(/^\d+s$/), expect.stringMatching(/^\d+s$/), '*']);
    const listed4 = JSON.parse(await kubectl('outrigger', 'history', `${arg}/web`, '-n', ns, '-o', 'json')) as {
      revisions: Array<{ revision: number; current: boolean }>;
    };
    expect(listed4.revisions.map((r) => [r.revision, r.current])).toEqual([
      [2, false],
      [3, false],
      [4, true],
    ]);
    expect(await kubectl('outrigger', 'history', `${arg}/web`, '-n', ns, '-o', 'yaml', '--revision', '4')).toMatch(/^current: true$/m);
    const shown = await kubectl('outrigger', 'history', `${arg}/web`, '-n', ns, '--revision', '3');
    expect(shown).toMatch(/^-\s+- image: registry\.example\/app:2$/m);
    expect(shown).toMatch(/^\+\s+- image: registry\.example\/app:3$/m);
    expect(await kubectl('outrigger', 'history', '--help')).toMatch(/^usage: outrigger history/);
    expect(await kubectl('outrigger', 'rollback', '--help')).toMatch(/^usage: outrigger rollback/);
    // By default, back to the previous revision; a dry run shows the patch and changes nothing.
    expect(await kubectl('outrigger', 'rollback', `${arg}/web`, '-n', ns, '--dry-run')).toMatch(
      /would be rolled back to revision 3 .*\(dry run\)[\s\S]*"op": "test"/,
    );
    expect(JSON.stringify((await admin.get(resource, { name: 'web', namespace: ns })).spec)).toContain('registry.example/app:1');
    expect(await kubectl('outrigger', 'rollback', `${arg}/web`, '-n', ns, '--to-revision', '4')).toMatch(
      /already matches revision 4 .*nothing to do/,
    );
    expect(await kubectl('outrigger', 'rollback', `${arg}/web`, '-n', ns, '--to-revision', '2')).toMatch(/rolled back to revision 2/);
    obj = await admin.get(resource, { name: 'web', namespace: ns });
    expect(JSON.stringify(obj.spec)).toContain('registry.example/app:2');
    expect(await syncOf(kind, obj)).toMatchObject({ outcome: 'rollback', number: 5 });
    expect(JSON.parse(await kubectl('outrigger', 'rollback', `${arg}/web`, '-n', ns, '-o', 'json'))).toMatchObject({
      revision: 4,
      changed: true,
      dryRun: false,
    });
    expect(JSON.stringify((await admin.get(resource, { name: 'web', namespace: ns })).spec)).toContain('registry.example/app:1');
  },
  60_000,
);

test.each([
  ['StatefulSet', 'statefulset', statefulSets, { serviceName: 'web', replicas: 0 }],
  ['DaemonSet', 'daemonset', daemonSets, {}],
] as const)(
  'kubectl rollout history and undo find %s revisions when the selector has matchExpressions only',
  async (kind, arg, resource, extra) => {
    const ns = await createNamespace('kubectl-expr');
    const admin = adminClient();
    const selector = {
      matchExpressions: [
        { key: 'app', operator: 'In', values: ['web', 'api'] },
        { key: 'canary', operator: 'DoesNotExist' },
      ],
    };
    let obj = await admin.create(resource, {
      apiVersion: 'apps/v1',
      kind,
      metadata: { name: 'web', namespace: ns },
      spec: { ...spec('registry.example/app:1', extra), selector },
    });
    await syncOf(kind, obj);
    obj = await admin.patch(
      resource,
      { name: 'web', namespace: ns },
      { spec: { template: { spec: { containers: [{ name: 'c', image: 'registry.example/app:2' }] } } } },
      'strategic',
    );
    await syncOf(kind, obj);

    const listed = await kubectl('rollout', 'history', `${arg}/web`, '-n', ns);
    expect(
      listed
        .split('\n')
        .filter((l) => /^\d+\s/.test(l))
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(['1', '2']);
    expect(await kubectl('rollout', 'undo', `${arg}/web`, '-n', ns, '--to-revision', '1')).toMatch(/rolled back/);
    obj = await admin.get(resource, { name: 'web', namespace: ns });
    expect(JSON.stringify(obj.spec)).toContain('registry.example/app:1');
    expect(await syncOf(kind, obj)).toMatchObject({ outcome: 'rollback', number: 3 });
  },
  60_000,
);

describe('a rollback to a revision in which a path was absent', () => {
  // A kind of its own whose target state has two paths, `spec.sidecar` absent at first.
  const gadgets = gvr('kubectl.outrigger.test', 'v1', 'gadgets');
  const MANIFESTS = `
${openCrd('kubectl.outrigger.test', 'Gadget', 'gadgets')}---
${controllersGrant('outrigger-kubectl-gadgets-test', [`{ apiGroups: ["kubectl.outrigger.test"], resources: ["gadgets"], verbs: ["get", "list", "watch"] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: kubectl-gadgets }
spec:
  target: { apiVersion: kubectl.outrigger.test/v1, kind: Gadget }
  targetState: [spec.template, spec.sidecar]
`;
  const gadget = (o: KubeObject): KubeObject => ({ ...o, apiVersion: 'kubectl.outrigger.test/v1', kind: 'Gadget' });
  const sync = async (obj: KubeObject) => {
    const policy = policyFor(await listPolicies(kube, 'it'), 'kubectl.outrigger.test', 'Gadget')!;
    return syncHistory(
      { kube, state, holder: 'kubectl-test' },
      policy,
      {
        cluster: 'it',
        group: 'kubectl.outrigger.test',
        kind: 'Gadget',
        namespace: obj.metadata.namespace,
        name: obj.metadata.name!,
        uid: obj.metadata.uid!,
      },
      ['ControllerRevision/x'],
    );
  };

  beforeAll(async () => {
    await applyManifests(adminClient(), MANIFESTS);
    await eventually(async () => {
      forgetPolicies();
      forgetDiscovery(kube);
      return policyFor(await listPolicies(kube, 'it'), 'kubectl.outrigger.test', 'Gadget') !== undefined;
    });
  });

  test('kubectl outrigger rollback removes it, and the sync sees a rollback, as after kubectl rollout undo: no new revision', async () => {
    const ns = await createNamespace('kubectl-absent');
    const admin = adminClient();
    let obj = await admin.create<KubeObject>(
      gadgets,
      gadget({ metadata: { name: 'g', namespace: ns }, spec: { replicas: 2, template: { image: 'app:1' } } }),
    );
    expect(await sync(obj)).toMatchObject({ outcome: 'created', number: 1 });
    obj = await admin.patch(gadgets, { name: 'g', namespace: ns }, { spec: { sidecar: { image: 'side:1' } } }, 'merge');
    expect(await sync(obj)).toMatchObject({ outcome: 'created', number: 2 });

    expect(await kubectl('outrigger', 'rollback', 'gadgets.kubectl.outrigger.test/g', '-n', ns, '--to-revision', '1')).toMatch(
      /rolled back to revision 1/,
    );
    obj = await admin.get(gadgets, { name: 'g', namespace: ns });
    expect(obj.spec).toEqual({ replicas: 2, template: { image: 'app:1' } });
    expect(await sync(obj)).toMatchObject({ outcome: 'rollback', number: 3 });
    expect(await kubectl('outrigger', 'history', 'gadgets.kubectl.outrigger.test/g', '-n', ns)).toMatch(/^2\s.*\n3\s/m);
    // Another group serving a Gadget too: the short name no longer says which, and nothing is written.
    await applyManifests(admin, openCrd('other.outrigger.test', 'Gadget', 'gadgets'));
    await eventually(
      async () => (await kubectl('api-resources', '--api-group', 'other.outrigger.test', '-o', 'name')).includes('gadgets'),
      30_000,
    );
    await expect(kubectl('outrigger', 'rollback', 'gadget/g', '-n', ns, '--to-revision', '2')).rejects.toMatchObject({
      stderr: expect.stringMatching(/"gadget" is served by (gadgets\.\S+ and )+gadgets\.\S+; name one as <resource>\.<group>\/g/),
    });
    expect((await admin.get(gadgets, { name: 'g', namespace: ns })).spec).toEqual({ replicas: 2, template: { image: 'app:1' } });
  }, 60_000);

  test('a change to that path made after the parent was read fails the rollback instead of being lost', async () => {
    const ns = await createNamespace('kubectl-absent');
    const admin = adminClient();
    let obj = await admin.create<KubeObject>(
      gadgets,
      gadget({ metadata: { name: 'g', namespace: ns }, spec: { template: { image: 'app:1' } } }),
    );
    await sync(obj);
    obj = await admin.patch(gadgets, { name: 'g', namespace: ns }, { spec: { sidecar: { image: 'side:1' } } }, 'merge');
    await sync(obj);
    const [first] = (await kube.list(gvr('apps', 'v1', 'controllerrevisions'), { namespace: ns })).items.filter(
      (r) => (r as unknown as { revision: number }).revision === 1,
    );
    const patch = rollbackPatch(first!.data as JsonObject, gadget(obj) as unknown as JsonObject);
    await admin.patch(gadgets, { name: 'g', namespace: ns }, { spec: { sidecar: { image: 'side:2' } } }, 'merge');
    const err = await admin.patch(gadgets, { name: 'g', namespace: ns }, patch, 'json').catch((e: unknown) => e);
    expect(isKubeError(err)).toBe(true);
    expect(((await admin.get(gadgets, { name: 'g', namespace: ns })).spec as { sidecar: unknown }).sidecar).toEqual({ image: 'side:2' });
  });
});

describe('the history controller in the local runtime (watch, router, history)', () => {
  test('a change to a StatefulSet becomes a revision, a rollback renumbers, truncation trims, with no call by the test', async () => {
    const { mkdtemp } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { startRuntime } = await import('../../runtime/local.ts');
    const { functions, functionsOf } = await import('../../functions/index.ts');
    const ns = await createNamespace('e2e-history');
    const admin = adminClient();
    const runtime = await startRuntime({
      kubeconfig: testbed().kubeconfigs.outrigger,
      clusterId: 'e2e',
      namespace: ns,
      stateDir: await mkdtemp(join(tmpdir(), 'outrigger-e2e-')),
      // Without the storage controller's functions, which act on every resource of a cluster, nor the scheduled
      // ones: the resyncs, run at start, would sync every namespace's parents, other test files' among them.
      functions: functions.filter((f) => !f.schedule && !functionsOf('storage').includes(f.name)),
      // Nor any MapController, CompositeController or DecoratorController (no definition has this label): its map
      // function would serve other files' definitions, and their cluster-scoped parents in every namespace.
      controllerSelector: 'outrigger.test/runtime=kubectl',
    });
    try {
      const revisions = async () =>
        (await kube.list(gvr('apps', 'v1', 'controllerrevisions'), { namespace: ns })).items
          .map((r) => `${(r as unknown as { revision: number }).revision}:${JSON.stringify(r.data).match(/app:(\d)/)?.[1]}`)
          .sort();
      const eventually = async (expected: string[]) => {
        const deadline = Date.now() + 20_000;
        for (;;) {
          const got = await revisions();
          if (JSON.stringify(got) === JSON.stringify(expected) || Date.now() > deadline) return got;
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      await admin.create(statefulSets, {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: { name: 'web', namespace: ns, annotations: { 'outrigger.dev/revision-history-limit': '1' } },
        spec: spec('registry.example/app:1', { serviceName: 'web', replicas: 0 }),
      });
      expect(await eventually(['1:1'])).toEqual(['1:1']);
      for (const n of [2, 3]) {
        await admin.patch(
          statefulSets,
          { name: 'web', namespace: ns },
          { spec: { template: { spec: { containers: [{ name: 'c', image: `registry.example/app:${n}` }] } } } },
          'strategic',
        );
        await runtime.settled();
      }
      // Limit 1: the latest (3) and one older non-live revision (2) remain.
      expect(await eventually(['2:2', '3:3'])).toEqual(['2:2', '3:3']);
      await admin.patch(statefulSets, { name: 'web', namespace: ns }, { spec: { replicas: 3 } }, 'merge');
      await admin.patch(
        statefulSets,
        { name: 'web', namespace: ns },
        { spec: { template: { spec: { containers: [{ name: 'c', image: 'registry.example/app:2' }] } } } },
        'strategic',
      );
      // A rollback to 2: it becomes number 4; 3 is kept as the one non-live revision; scaling made nothing.
      expect(await eventually(['3:3', '4:2'])).toEqual(['3:3', '4:2']);
    } finally {
      await runtime.stop();
    }
  }, 90_000);
});
