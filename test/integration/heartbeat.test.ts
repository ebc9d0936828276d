// The heartbeat function's metrics on the real apiserver (docs/reference/metrics-and-alarms.md): ClusterUnreachable per cluster,
// and the age of the forwarder leader's Lease as ForwarderSilentSeconds, read through the Role the forwarder's
// kustomize base grants Outrigger (get on that one Lease).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { handler } from '../../functions/heartbeat/handler.ts';
import { FORWARDER_LEASE } from '../../functions/heartbeat/heartbeat.ts';
import { lambdaContext } from '../../runtime/lambda-context.ts';
import { Clusters } from '../../shared/clusters.ts';
import { gvr, isKubeError, Resources } from '../../shared/kube/index.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { setEnvironment } from '../../shared/lambda/environment.ts';
import { emfOf } from '../testbed/emf.ts';
import { forwarderKubeconfig } from '../testbed/forwarder.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testCluster, testState, uniqueName } from '../testbed/index.ts';

describe('heartbeat metrics', () => {
  afterEach(() => setEnvironment(undefined));

  test("a reachable cluster: ClusterUnreachable 0 and the forwarder Lease's age; an unreachable one: ClusterUnreachable 1", async () => {
    // The forwarder base's RBAC (the heartbeat's Role among it), and its leader's Lease, renewed 30 s ago.
    await forwarderKubeconfig();
    const admin = adminClient();
    const renewTime = new Date(Date.now() - 30_000).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: FORWARDER_LEASE.name, namespace: FORWARDER_LEASE.namespace },
      spec: { renewTime },
    };
    await admin.create(Resources.leases, lease).catch(async (err: unknown) => {
      if (!isKubeError(err, 'AlreadyExists')) throw err;
      await admin.patch(
        Resources.leases,
        { name: FORWARDER_LEASE.name, namespace: FORWARDER_LEASE.namespace },
        { spec: { renewTime } },
        'merge',
      );
    });
    const nowhere = join(await mkdtemp(join(tmpdir(), 'outrigger-hb-')), 'kubeconfig');
    await writeFile(
      nowhere,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'n', cluster: { server: 'https://127.0.0.1:1', 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'c', context: { cluster: 'n', user: 'u' } }],
        'current-context': 'c',
      }),
    );
    const up = uniqueName('hb-up');
    const down = uniqueName('hb-down');
    const deadLetter = new MemoryDeadLetterSink();
    setEnvironment({
      clusters: new Clusters([testCluster(up), { id: down, access: { kind: 'kubeconfig', path: nowhere } }]),
      state: testState(),
      deadLetter,
      syncSink: { send: async () => {} },
    });
    // A new RoleBinding takes effect once the authorizer's cache has it.
    await eventually(() =>
      outriggerClient()
        .get(Resources.leases, { name: FORWARDER_LEASE.name, namespace: FORWARDER_LEASE.namespace })
        .then(
          () => true,
          () => false,
        ),
    );
    const docs = await emfOf(() => handler({}, lambdaContext({ name: 'heartbeat', timeoutSeconds: 30 })));
    const of = (cluster: string, name: string) => docs.filter((d) => d.cluster === cluster && name in d).map((d) => d[name]);
    expect(of(up, 'ClusterUnreachable')).toEqual([0]);
    expect(of(down, 'ClusterUnreachable')).toEqual([1]);
    const [silent] = of(up, 'ForwarderSilentSeconds') as number[];
    expect(silent).toBeGreaterThanOrEqual(29);
    expect(silent).toBeLessThan(60);
    expect(of(down, 'ForwarderSilentSeconds')).toEqual([]);
  }, 60_000);

  test("a forwarder installed in another namespace (the construct's forwarder.namespace): its Lease's age is published", async () => {
    const ns = await createNamespace('hb-fwd');
    const admin = adminClient();
    // The base's heartbeat Role and binding, as `kubectl apply -n <ns>` or the chart's namespace value put them.
    await admin.create(gvr('rbac.authorization.k8s.io', 'v1', 'roles'), {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'outrigger-forwarder-heartbeat', namespace: ns },
      rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [FORWARDER_LEASE.name], verbs: ['get'] }],
    });
    await admin.create(gvr('rbac.authorization.k8s.io', 'v1', 'rolebindings'), {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'outrigger-forwarder-heartbeat', namespace: ns },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'outrigger-forwarder-heartbeat' },
      subjects: [{ kind: 'Group', name: 'outrigger:controllers', apiGroup: 'rbac.authorization.k8s.io' }],
    });
    const renewTime = new Date(Date.now() - 90_000).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
    await admin.create(Resources.leases, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: FORWARDER_LEASE.name, namespace: ns },
      spec: { renewTime },
    });
    await eventually(() =>
      outriggerClient()
        .get(Resources.leases, { name: FORWARDER_LEASE.name, namespace: ns })
        .then(
          () => true,
          () => false,
        ),
    );
    const id = uniqueName('hb-ns');
    setEnvironment({
      clusters: new Clusters([testCluster(id)]),
      state: testState(),
      deadLetter: new MemoryDeadLetterSink(),
      syncSink: { send: async () => {} },
    });
    process.env.OUTRIGGER_FORWARDER_NAMESPACE = ns;
    try {
      const docs = await emfOf(() => handler({}, lambdaContext({ name: 'heartbeat', timeoutSeconds: 30 })));
      const [silent] = docs
        .filter((d) => d.cluster === id && 'ForwarderSilentSeconds' in d)
        .map((d) => d.ForwarderSilentSeconds) as number[];
      // 90 s: this Lease's age, not that of one in outrigger-system (the test above renews that one 30 s back).
      expect(silent).toBeGreaterThanOrEqual(89);
      expect(silent).toBeLessThan(120);
    } finally {
      delete process.env.OUTRIGGER_FORWARDER_NAMESPACE;
    }
  }, 60_000);
});
