// KubeClient's transport against a plain HTTP server standing in for an apiserver: the endpoint is made on first
// use (and made again after a failure), credentials are asked for on every request, one connection serves many.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeClient, type KubeEndpoint } from '../../shared/kube/index.ts';

let server: Server;
let base: string;
const seen: Array<{ url: string | undefined; headers: IncomingHttpHeaders }> = [];
const sockets = new Set<unknown>();
/** Paths under /busy/ answer 429 with this Retry-After until they have been asked this many times. */
const busy = { retryAfter: '1', times: 1, asked: new Map<string, number>() };

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ url: req.url, headers: req.headers });
    sockets.add(req.socket);
    // Paths under /hang/ are accepted and never answered (an apiserver behind a black hole).
    if (req.url?.startsWith('/hang/')) return;
    res.setHeader('content-type', 'application/json');
    if (req.url?.startsWith('/busy/')) {
      const n = (busy.asked.get(req.url) ?? 0) + 1;
      busy.asked.set(req.url, n);
      if (n <= busy.times) {
        res.writeHead(429, { 'retry-after': busy.retryAfter });
        res.end(JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'TooManyRequests', code: 429, message: 'too many requests' }));
        return;
      }
    }
    res.end(JSON.stringify({ gitVersion: 'v1.34.0' }));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((ok) => server.close(ok));
});

beforeEach(() => {
  seen.length = 0;
  sockets.clear();
});

const endpoint = (headers: KubeEndpoint['headers'], extra: Partial<KubeEndpoint> = {}): KubeEndpoint => ({
  server: `${base}/`,
  tls: {},
  headers,
  ...extra,
});

describe('KubeClient', () => {
  test('asks for credentials before every request, so a rotated token is used at once, over one kept-alive connection', async () => {
    let n = 0;
    const kube = new KubeClient(() => Promise.resolve(endpoint(async () => ({ Authorization: `Bearer token-${++n}` }))));
    for (let i = 0; i < 5; i += 1) await kube.getPath('/version');
    expect(seen.map((s) => s.headers.authorization)).toEqual([
      'Bearer token-1',
      'Bearer token-2',
      'Bearer token-3',
      'Bearer token-4',
      'Bearer token-5',
    ]);
    // A second request may start before the first connection is back in the agent's pool; one per request would be 5.
    expect(sockets.size).toBeLessThanOrEqual(2);
  });

  test('makes its endpoint on first use, once, and again after a failure, which is not retried', async () => {
    let calls = 0;
    const kube = new KubeClient(
      async () => {
        calls += 1;
        if (calls === 1) throw new Error('the kubeconfig is not there yet');
        return endpoint(async () => ({}), { defaultNamespace: 'team' });
      },
      { retry: { retries: 3, minDelayMs: 10_000 } },
    );
    expect(calls).toBe(0);
    await expect(kube.getPath('/version')).rejects.toThrow('the kubeconfig is not there yet');
    expect(kube.stats.total).toBe(1);
    await expect(kube.getPath('/version')).resolves.toEqual({ gitVersion: 'v1.34.0' });
    await expect(kube.endpoint()).resolves.toEqual({ server: base, defaultNamespace: 'team' });
    expect(calls).toBe(2);
  });

  test('talks to another endpoint of the same cluster when told to', async () => {
    const kube = new KubeClient(() => Promise.resolve(endpoint(async () => ({}), { server: 'http://127.0.0.1:1' })), {
      server: `${base}//`,
    });
    await expect(kube.getPath('/version')).resolves.toEqual({ gitVersion: 'v1.34.0' });
    await expect(kube.endpoint()).resolves.toMatchObject({ server: base });
  });

  test('a 429 is retried no sooner than its Retry-After asks (beyond the backoff), and no later than the cap', async () => {
    const kube = new KubeClient(() => Promise.resolve(endpoint(async () => ({}))), { retry: { retries: 2, minDelayMs: 1, maxDelayMs: 5 } });
    let started = Date.now();
    await expect(kube.getPath('/busy/a')).resolves.toEqual({ gitVersion: 'v1.34.0' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(kube.stats.total).toBe(2);

    // An HTTP date works as well; a wait longer than maxRetryAfterMs is cut to it.
    busy.retryAfter = new Date(Date.now() + 60_000).toUTCString();
    const capped = new KubeClient(() => Promise.resolve(endpoint(async () => ({}))), {
      retry: { retries: 2, minDelayMs: 1, maxDelayMs: 5, maxRetryAfterMs: 200 },
    });
    started = Date.now();
    await expect(capped.getPath('/busy/b')).resolves.toEqual({ gitVersion: 'v1.34.0' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test('within a deadline, a request that gets no answer, and its retries, end when the deadline aborts', async () => {
    // Without the deadline this would take the 60 s timeout five times over.
    const kube = new KubeClient(() => Promise.resolve(endpoint(async () => ({}))), { timeoutMs: 60_000 });
    const deadline = new AbortController();
    setTimeout(() => deadline.abort(Object.assign(new Error('the budget ran out'), { code: 'ETIMEDOUT' })), 200);
    const bounded = kube.within(deadline.signal);
    await expect(bounded.getPath('/hang/a')).rejects.toMatchObject({
      kind: 'Transient',
      message: expect.stringContaining('ETIMEDOUT: the budget ran out') as unknown as string,
    });
    expect(kube.stats.total).toBe(1);
    // Once it has aborted, nothing is sent; the view keeps its deadline when it acts as another identity.
    await expect(bounded.as({ user: 'someone' }).getPath('/version')).rejects.toMatchObject({ kind: 'Transient' });
    expect(kube.stats.total).toBe(1);
    expect(seen.filter((s) => s.url === '/version')).toHaveLength(0);
    // The client it came from has no deadline.
    await expect(kube.getPath('/version')).resolves.toEqual({ gitVersion: 'v1.34.0' });
  });

  test('within a deadline, a Retry-After longer than what is left is not waited out', async () => {
    busy.retryAfter = '30';
    busy.times = 5;
    const kube = new KubeClient(() => Promise.resolve(endpoint(async () => ({}))), { retry: { retries: 4, minDelayMs: 1, maxDelayMs: 5 } });
    // Rejected well inside jest's 5 s limit, not after 30 s.
    await expect(kube.within(AbortSignal.timeout(300)).getPath('/busy/deadline')).rejects.toMatchObject({ kind: 'Transient', status: 429 });
    expect(kube.stats.total).toBe(1);
  });
});

describe('trust boundary: a client kept to one namespace (outrigger run --namespace)', () => {
  test('refuses, before sending anything, a write in another namespace or to a cluster-scoped object, naming the namespace; writes in its own, a definition status and patch, and access reviews go through', async () => {
    const kube = new KubeClient(() => Promise.resolve(endpoint(async () => ({}))), { namespace: 'team-a' });
    const cm = { group: '', version: 'v1', resource: 'configmaps' };
    const obj = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'team-b' } };
    const refused = expect.objectContaining({
      kind: 'Forbidden',
      message: expect.stringMatching(/refused, this runtime is limited to namespace team-a \(--namespace\)/),
    });
    await expect(kube.create(cm, obj)).rejects.toEqual(refused);
    await expect(kube.patch(cm, { name: 'x', namespace: 'team-b' }, {}, 'merge')).rejects.toEqual(refused);
    await expect(kube.replace(cm, obj)).rejects.toEqual(refused);
    await expect(kube.delete(cm, { name: 'x', namespace: 'team-b' })).rejects.toEqual(refused);
    const namespaces = { group: '', version: 'v1', resource: 'namespaces' };
    await expect(kube.patch(namespaces, { name: 'team-b' }, {}, 'merge')).rejects.toEqual(refused);
    // A definition is patched (Outrigger's finalizer on it), never replaced or deleted, from one namespace.
    const policies = { group: 'outrigger.dev', version: 'v1alpha1', resource: 'revisionpolicies' };
    await expect(kube.delete(policies, { name: 'p' })).rejects.toEqual(refused);
    await expect(
      kube.replace(policies, { apiVersion: 'outrigger.dev/v1alpha1', kind: 'RevisionPolicy', metadata: { name: 'p' } }),
    ).rejects.toEqual(refused);
    expect(seen).toEqual([]);

    await kube.create(cm, { ...obj, metadata: { name: 'x', namespace: 'team-a' } });
    await kube.patch(policies, { name: 'p', subresource: 'status' }, {}, 'merge');
    await kube.patch(policies, { name: 'p' }, {}, 'merge');
    await kube.create(
      { group: 'authorization.k8s.io', version: 'v1', resource: 'subjectaccessreviews' },
      { apiVersion: 'v1', kind: 'X', metadata: {} },
    );
    expect(seen.map((s) => s.url?.split('?')[0])).toEqual([
      '/api/v1/namespaces/team-a/configmaps',
      '/apis/outrigger.dev/v1alpha1/revisionpolicies/p/status',
      '/apis/outrigger.dev/v1alpha1/revisionpolicies/p',
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    ]);
  });
});
