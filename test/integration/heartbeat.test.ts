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
import { isKubeError, Resources } from '../../shared/kube/index.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { setEnvironment } from '../../shared/lambda/environment.ts';
import { emfOf } from '../testbed/emf.ts';
import { forwarderKubeconfig } from '../testbed/forwarder.ts';
import { adminClient, eventually, outriggerClient, testCluster, testState, uniqueName } from '../testbed/index.ts';

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
});
