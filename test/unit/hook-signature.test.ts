// The webhook signature boundary (docs/operations/security.md): a receiver holds only its own MapController's key,
// and a request it accepts was signed by Outrigger for that controller, for its URL, recently, and once. The
// requests come from the map function's hook caller (Hooks) over a real loopback HTTP server.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { hookKeyCommand } from '../../cli/hook-key.ts';
import { snapshotWebhook } from '../../examples/snapshot-schedule/webhook.ts';
import { mapControllers } from '../../functions/map/controllers.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import {
  controllerKey,
  createVerifier,
  REQUEST_ID_HEADER,
  signature,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  type HeaderSource,
} from '../../shared/hooks/signature.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import type { Hook } from '../../shared/map/api.ts';
import { FakeKube } from '../fakes/kube.ts';

const SECRET = 'the-deployment-secret';
const A = { cluster: 'prod', uid: '0b8f5a52-6a3e-4c1e-9a51-2f0a3d6c7e01' };
const B = { cluster: 'prod', uid: '7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f' };

interface Captured {
  path: string;
  headers: HeaderSource;
  body: string;
}
let captured: Captured[] = [];
let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      captured.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"outputs": []}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  captured = [];
});

const hook = (path: string): Hook => ({ webhook: { url: `${origin}${path}` }, timeoutSeconds: 5, retries: 0 }) as Hook;
const hooks = () => new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'], signingSecret: async () => SECRET });

async function sent(path: string, controller: typeof A): Promise<Captured> {
  await hooks().call(hook(path), { input: 'x' }, { controller });
  return captured.at(-1)!;
}

test('webhook signature: a receiver holding controller A key refuses a request signed for controller B', async () => {
  const receiverA = createVerifier({ keys: controllerKey(SECRET, A.cluster, A.uid), url: `${origin}/a` });
  expect(receiverA(await sent('/a', A))).toEqual({ ok: true });
  expect(receiverA(await sent('/a', B))).toEqual({ ok: false, reason: expect.stringMatching(/signature does not match/) });
  // The same uid in another cluster is another controller, with another key.
  expect(receiverA(await sent('/a', { cluster: 'staging', uid: A.uid }))).toMatchObject({ ok: false });
  expect(controllerKey(SECRET, A.cluster, A.uid)).not.toBe(controllerKey(SECRET, B.cluster, B.uid));
});

test('webhook signature: a request replayed outside the window, or again within it, is refused', async () => {
  let now = Date.now();
  const receiver = createVerifier({ keys: controllerKey(SECRET, A.cluster, A.uid), url: `${origin}/a`, now: () => now });
  const request = await sent('/a', A);
  expect(receiver(request)).toEqual({ ok: true });
  expect(receiver(request)).toEqual({ ok: false, reason: expect.stringMatching(/seen before/) });
  now += 301_000;
  const fresh = createVerifier({ keys: controllerKey(SECRET, A.cluster, A.uid), url: `${origin}/a`, now: () => now });
  expect(fresh(request)).toEqual({ ok: false, reason: expect.stringMatching(/timestamp/) });
});

test('webhook signature: a request re-targeted to another URL of the same receiver fails verification', async () => {
  const key = controllerKey(SECRET, A.cluster, A.uid);
  const request = await sent('/a', A);
  expect(createVerifier({ keys: key, url: `${origin}/b` })(request)).toMatchObject({ ok: false });
  expect(createVerifier({ keys: key, url: `${origin}/a?tenant=2` })(request)).toMatchObject({ ok: false });
  expect(createVerifier({ keys: key, url: `${origin}/a`, method: 'PUT' })(request)).toMatchObject({ ok: false });
  expect(createVerifier({ keys: key, url: `${origin}/a` })(request)).toEqual({ ok: true });
});

test('webhook signature: each attempt has its own request id, and every request carries the headers', async () => {
  await sent('/a', A);
  await sent('/a', A);
  const [one, two] = captured.map((c) => c.headers as Record<string, string>);
  expect(one![REQUEST_ID_HEADER]).not.toBe(two![REQUEST_ID_HEADER]);
  expect(one![SIGNATURE_HEADER]).toMatch(/^v1=[0-9a-f]{64}$/);
  expect(one![TIMESTAMP_HEADER]).toMatch(/^\d+$/);
});

test('webhook signature: a call with a signing secret but no controller to sign for is refused', async () => {
  await expect(hooks().call(hook('/a'), {})).rejects.toThrow(/must name its MapController/);
  expect(captured).toHaveLength(0);
});

test('webhook signature: changing any signed field fails verification (property)', () => {
  const field = fc.constantFrom('method', 'url', 'timestamp', 'requestId', 'body');
  fc.assert(
    fc.property(fc.string(), fc.string({ minLength: 1 }), field, (body, change, which) => {
      const now = 1_800_000_000_000;
      const fields = { method: 'POST', url: 'https://hooks.example/map', timestamp: String(now / 1000), requestId: 'id-1', body };
      const key = controllerKey(SECRET, A.cluster, A.uid);
      const changed = {
        ...fields,
        ...{
          method: { method: 'PUT' },
          url: { url: `https://hooks.example/map/${encodeURIComponent(change)}` },
          timestamp: { timestamp: String(now / 1000 + 1) },
          requestId: { requestId: `id-1${change}` },
          body: { body: `${body}${change}` },
        }[which],
      };
      const headers = {
        [TIMESTAMP_HEADER]: fields.timestamp,
        [REQUEST_ID_HEADER]: fields.requestId,
        [SIGNATURE_HEADER]: signature(key, changed),
      };
      const verify = createVerifier({ keys: [key], url: fields.url, now: () => now });
      return !verify({ headers, body: fields.body }).ok;
    }),
  );
});

test('outrigger hook-key prints the key of the MapController it names, read by name from the cluster', async () => {
  const kube = new FakeKube();
  const mc = await kube.create(mapControllers, {
    apiVersion: 'metacontroller.k8s.io/v1alpha1',
    kind: 'MapController',
    metadata: { name: 'snap' },
  } as KubeObject);
  const printed = await hookKeyCommand(kube, { name: 'snap', cluster: 'prod', secret: async () => SECRET });
  expect(printed).toBe(`${controllerKey(SECRET, 'prod', mc.metadata.uid!)}\n`);
  const receiver = createVerifier({ keys: printed.trim(), url: `${origin}/a` });
  expect(receiver(await sent('/a', { cluster: 'prod', uid: mc.metadata.uid! }))).toEqual({ ok: true });
  await expect(hookKeyCommand(kube, { name: 'other', cluster: 'prod', secret: async () => SECRET })).rejects.toThrow();
  expect(await hookKeyCommand(undefined, { name: 'x', cluster: 'prod', uid: A.uid, secret: async () => SECRET })).toBe(
    `${controllerKey(SECRET, 'prod', A.uid)}\n`,
  );
});

test('the example webhook answers a request signed for its controller and refuses one signed for another (401)', async () => {
  const example = createServer();
  await new Promise<void>((r) => example.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(example.address() as AddressInfo).port}`;
  const urls = { map: `${base}/map`, tombstone: `${base}/tombstone` };
  example.on('request', snapshotWebhook({ keys: controllerKey(SECRET, A.cluster, A.uid), urls }));
  const request = {
    parent: { metadata: { name: 's' }, spec: { snapshotInterval: '1h', snapshotTTL: '1d' } },
    input: { metadata: { name: 'pvc' } },
    outputs: {},
  };
  const mapHook = { webhook: { url: urls.map }, timeoutSeconds: 5, retries: 0 } as Hook;
  try {
    expect(await hooks().call(mapHook, request, { controller: A })).toMatchObject({ outputs: [{ kind: 'VolumeSnapshot' }] });
    await expect(hooks().call(mapHook, request, { controller: B })).rejects.toMatchObject({ reason: 'HTTPError', status: 401 });
    // Signed for A, but for another URL (a query added): the receiver of /map refuses it.
    await expect(hooks().call({ ...mapHook, webhook: { url: `${base}/map?x` } }, request, { controller: A })).rejects.toMatchObject({
      status: 401,
    });
  } finally {
    await new Promise<void>((r) => example.close(() => r()));
  }
});
