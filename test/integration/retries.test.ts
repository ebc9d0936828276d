// Transient failures are retried, with backoff and a bound; definite answers are not. Through a proxy that
// answers about 20% of requests to the real apiserver with 429, 500 or a hang.
import { Resources, connect, type KubeObject } from '../../shared/kube/index.ts';
import { startFaultProxy, type FaultProxy } from '../testbed/fault-proxy.ts';
import { createNamespace, outriggerClient, testbed } from '../testbed/index.ts';

const revision = (namespace: string, name: string): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'ControllerRevision',
  metadata: { name, namespace },
  data: { n: name },
  revision: 1,
});

describe('retries through a fault-injecting proxy', () => {
  let proxy: FaultProxy;
  beforeAll(async () => {
    const bed = testbed();
    proxy = await startFaultProxy({
      target: bed.server,
      caFile: bed.caFile,
      token: bed.tokens.outrigger,
      faultRate: 0.2,
      hangMs: 600,
      seed: 7,
    });
  });
  afterAll(async () => {
    await proxy.close();
  });

  test('every operation succeeds at a 20% fault rate, and the result equals a clean run', async () => {
    const ns = await createNamespace('faults');
    proxy.faultRate = 0.2;
    // The proxy drops a hung connection itself (after hangMs), so the client's own timeout need not be short: at
    // 400 ms a real create on a busy apiserver timed out after it was made, and its retry met AlreadyExists.
    const kube = connect(
      { kind: 'kubeconfig', path: proxy.kubeconfig },
      { timeoutMs: 5_000, retry: { retries: 8, minDelayMs: 5, maxDelayMs: 50 } },
    );
    const names = Array.from({ length: 40 }, (_, i) => `r-${i}`);
    for (const name of names) {
      await kube.create(Resources.controllerRevisions, revision(ns, name));
      expect((await kube.get(Resources.controllerRevisions, { name, namespace: ns })).data).toEqual({ n: name });
    }
    const clean = await outriggerClient().list(Resources.controllerRevisions, { namespace: ns });
    expect(clean.items.map((i) => i.metadata.name).sort()).toEqual([...names].sort());
    const injected = proxy.stats.injected;
    expect(injected['429'] + injected['500'] + injected.timeout).toBeGreaterThan(5);
    expect(injected['429']).toBeGreaterThan(0);
    expect(injected['500']).toBeGreaterThan(0);
    expect(injected.timeout).toBeGreaterThan(0);
    // A create whose first attempt never reached the apiserver is simply retried; nothing is created twice.
    expect(kube.stats.total).toBeGreaterThan(80);
  }, 60_000);

  test('a definite answer (NotFound) is not retried', async () => {
    proxy.faultRate = 0;
    const kube = connect({ kind: 'kubeconfig', path: proxy.kubeconfig }, { retry: { retries: 8 } });
    await expect(kube.get(Resources.controllerRevisions, { name: 'nope', namespace: 'default' })).rejects.toMatchObject({
      kind: 'NotFound',
    });
    expect(kube.stats.total).toBe(1);
  });

  test('retries are bounded: a server that always fails gives a Transient error after retries + 1 attempts', async () => {
    proxy.faultRate = 1;
    const kube = connect(
      { kind: 'kubeconfig', path: proxy.kubeconfig },
      { timeoutMs: 300, retry: { retries: 3, minDelayMs: 1, maxDelayMs: 5 } },
    );
    const started = Date.now();
    await expect(kube.get(Resources.controllerRevisions, { name: 'x', namespace: 'default' })).rejects.toMatchObject({ kind: 'Transient' });
    expect(kube.stats.total).toBe(4);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
