// Hostile webhooks (docs/reference/hooks.md#the-webhook-contract): a real HTTP server on loopback answers a map
// pass with whatever fast-check makes of malformed, huge, redirecting and lying answers. For every one nothing is
// written to the cluster but the parent's status, the problem is reported with its reason, and no text of the
// answer reaches the status (the log has it). Requests are signed with the MapController's own key.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { forgetMapControllers, listMapControllers, mapControllerFor, type ResolvedMapController } from '../../functions/map/controllers.ts';
import type { MapContext } from '../../functions/map/pass.ts';
import { syncMap } from '../../functions/map/sync.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { controllerKey, createVerifier } from '../../shared/hooks/signature.ts';
import { forgetDiscovery, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { MAX_OUTPUTS_PER_ANSWER } from '../../shared/map/api.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, deleteMapControllersCalling, outriggerClient } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';

const GROUP = 'hooks.outrigger.test';
const probers = gvr(GROUP, 'v1', 'probers');
const configMaps = gvr('', 'v1', 'configmaps');
const SECRET = 'test-signing-secret';
const MAX_BYTES = 64 * 1024;
/** In every hostile answer: it must never reach the parent's status. */
const MARKER = 'HOSTILE-ANSWER-TEXT';

interface Reply {
  status: number;
  headers?: Record<string, string>;
  body: string | Buffer;
  /** Send the body without a content-length (chunked), so only reading it tells its size. */
  chunked?: boolean;
}
let reply: (input: KubeObject) => Reply;
const seen = { requests: 0, badSignatures: 0, followedRedirects: 0 };

function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url !== '/map') {
      seen.followedRedirects += 1;
      res.end('{"outputs": []}');
      return;
    }
    seen.requests += 1;
    const body = Buffer.concat(chunks).toString('utf8');
    verify ??= createVerifier({ keys: controllerKey(SECRET, 'it', mc.uid), url: `${url}/map` });
    if (!verify({ headers: req.headers, body }).ok) seen.badSignatures += 1;
    const r = reply((JSON.parse(body) as { input: KubeObject }).input);
    const length = Buffer.byteLength(r.body);
    res.writeHead(r.status, {
      'content-type': 'application/json',
      ...(r.chunked ? {} : { 'content-length': String(length) }),
      ...r.headers,
    });
    // A body far past the limit is written in pieces; a client that stops reading closes the connection.
    res.on('error', () => undefined);
    res.end(r.body);
  });
}

let server: Server;
let url: string;
let mc: ResolvedMapController;
let verify: ReturnType<typeof createVerifier> | undefined;

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(adminClient(), MAP_TEST_IDENTITY);
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'Prober', 'probers')}---
${controllersGrant('outrigger-map-hooks-test', [
  `{ apiGroups: ["${GROUP}"], resources: ["probers"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["probers/status"], verbs: ["patch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
])}---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: hooks-prober }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: ${GROUP}/v1, resource: probers }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks:
    map: { webhook: { url: "${url}/map" }, timeoutSeconds: 5, retries: 0 }
`,
  );
  const kube = outriggerClient();
  for (let i = 0; ; i += 1) {
    forgetMapControllers();
    forgetDiscovery(kube);
    const found = mapControllerFor(await listMapControllers(kube, 'it'), GROUP, 'Prober');
    if (found) {
      mc = found;
      break;
    }
    if (i > 100) throw new Error('no MapController for Prober');
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  await deleteMapControllersCalling(url);
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const copy = (input: KubeObject, over: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: `${input.metadata.name}-copy` },
  data: { v: 'good' },
  ...over,
});
const json = (value: unknown): Reply => ({ status: 200, body: JSON.stringify(value) });

/** Hostile answers, each with the reason it must be reported with. */
const hostile: fc.Arbitrary<{ name: string; reason: string; reply: (input: KubeObject) => Reply }> = fc.oneof(
  fc
    .record({ code: fc.constantFrom(400, 401, 403, 404, 409, 422, 500, 502, 503), text: fc.string({ maxLength: 200 }) })
    .map(({ code, text }) => ({
      name: `HTTP ${code}`,
      reason: 'HookHTTPError',
      reply: () => ({ status: code, body: `${MARKER} ${text}` }),
    })),
  fc.constantFrom(301, 302, 303, 307, 308).map((code) => ({
    name: `redirect ${code}`,
    reason: 'HookRefused',
    reply: () => ({ status: code, headers: { location: `${url}/steal` }, body: MARKER }),
  })),
  fc
    .string({ maxLength: 300 })
    .map((text) => ({ name: 'not JSON', reason: 'HookMalformedAnswer', reply: () => ({ status: 200, body: `{${MARKER} ${text}` }) })),
  fc.record({ extra: fc.nat(3 * MAX_BYTES), chunked: fc.boolean() }).map(({ extra, chunked }) => ({
    name: `huge (${chunked ? 'chunked' : 'with a length'})`,
    reason: 'HookAnswerTooLarge',
    reply: (input: KubeObject) => ({
      status: 200,
      chunked,
      body: JSON.stringify({ outputs: [copy(input, { data: { v: MARKER.repeat(Math.ceil((MAX_BYTES + extra) / MARKER.length)) } })] }),
    }),
  })),
  fc.integer({ min: MAX_OUTPUTS_PER_ANSWER + 1, max: MAX_OUTPUTS_PER_ANSWER + 50 }).map((n) => ({
    name: `${n} outputs`,
    reason: 'HookMalformedAnswer',
    reply: (input: KubeObject) => json({ outputs: Array.from({ length: n }, (_, i) => ({ ...copy(input), metadata: { name: `x${i}` } })) }),
  })),
  fc
    .oneof(
      fc.constant<unknown>(null),
      fc.constant<unknown>([]),
      fc.constant<unknown>({}),
      fc.anything().map((v) => ({ outputs: v })),
      fc.constant<unknown>({ outputs: [{ kind: 'ConfigMap', metadata: { name: 'x' } }] }),
      fc.string().map((s): unknown => ({ outputs: [{ apiVersion: 'v1', kind: `Config Map ${MARKER}${s}`, metadata: { name: 'x' } }] })),
      fc.string().map((s): unknown => ({ outputs: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `../${MARKER}/${s}` } }] })),
      fc.string().map((s): unknown => ({
        outputs: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: `${MARKER} ${s}` } }],
      })),
      fc.constant<unknown>({ outputs: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x'.repeat(254) } }] }),
    )
    .filter(
      (v) =>
        !(
          v &&
          typeof v === 'object' &&
          'outputs' in v &&
          Array.isArray((v as { outputs: unknown }).outputs) &&
          (v as { outputs: unknown[] }).outputs.length === 0
        ),
    )
    .map((v) => ({ name: `malformed ${JSON.stringify(v)?.slice(0, 60)}`, reason: 'HookMalformedAnswer', reply: () => json(v) })),
  fc
    .oneof(
      fc.constant((input: KubeObject) => copy(input, { metadata: { name: `${input.metadata.name}-copy`, namespace: 'kube-system' } })),
      fc.constant((input: KubeObject) => copy(input, { kind: 'Secret' })),
      fc.constant((input: KubeObject) => copy(input, { apiVersion: 'v2' })),
      fc.constant((input: KubeObject) =>
        copy(input, {
          metadata: {
            name: 'other',
            ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: MARKER.toLowerCase(), uid: 'x', controller: true }],
          },
        }),
      ),
    )
    .map((out) => ({
      name: 'an output it may not have',
      reason: 'InvalidOutput',
      reply: (input: KubeObject) => json({ outputs: [out(input)] }),
    })),
  fc.constant({
    name: 'an output the apiserver refuses',
    reason: 'WriteFailed',
    reply: (input: KubeObject) => json({ outputs: [copy(input, { metadata: { name: 'refused', labels: { bad: `${MARKER} !` } } })] }),
  }),
);

const key = (o: KubeObject): SyncKey => ({
  cluster: 'it',
  group: GROUP,
  kind: 'Prober',
  namespace: o.metadata.namespace,
  name: o.metadata.name!,
  uid: o.metadata.uid!,
});
const snapshot = async (ns: string) =>
  Object.fromEntries(
    (await adminClient().listAll(configMaps, { namespace: ns })).map((c) => [c.metadata.name!, c.metadata.resourceVersion!]),
  );

test('property: a hostile answer writes nothing but the status, is reported with its reason, and no text of it reaches the status', async () => {
  const ns = await createNamespace('hooks');
  const admin = adminClient();
  await admin.create(configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'in', namespace: ns, labels: { app: 'probe' } },
    data: { v: 'in' },
  } as KubeObject);
  const parent = await admin.create(probers, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Prober',
    metadata: { name: 'prober', namespace: ns },
    spec: { selector: { matchLabels: { app: 'probe' } } },
  } as KubeObject);
  const kube: KubeClient = outriggerClient();
  const logged: Array<Record<string, unknown>> = [];
  const ctx: MapContext = {
    kube,
    hooks: new Hooks({
      allowLoopbackHttp: true,
      webhookAllow: ['127.0.0.1'],
      minRetryDelayMs: 10,
      maxAnswerBytes: MAX_BYTES,
      signingSecret: async () => SECRET,
    }),
    log: (_level, _m, fields) => logged.push(fields ?? {}),
  };
  reply = (input) => json({ outputs: [copy(input)] });
  expect(await syncMap(ctx, mc, key(parent))).toMatchObject({ created: 1, problems: [] });
  const before = await snapshot(ns);
  const seenReasons = new Set<string>();

  await fc.assert(
    fc.asyncProperty(hostile, async (h) => {
      reply = h.reply;
      logged.length = 0;
      kube.stats.reset();
      const result = await syncMap(ctx, mc, key(parent));
      expect({ name: h.name, reasons: result.problems.map((p) => p.reason) }).toEqual({ name: h.name, reasons: [h.reason] });
      expect(result).toMatchObject({ created: 0, updated: 0, deleted: 0 });
      // The only write a pass may make is its status (and none when the status did not change); an output the
      // apiserver refuses is the one write attempted, and it changes nothing.
      const writes = Object.entries(kube.stats.byVerb).filter(([v]) => !['get', 'list'].includes(v));
      expect(writes.filter(([v]) => v !== 'patch/merge' && !(h.reason === 'WriteFailed' && v === 'create'))).toEqual([]);
      expect(kube.stats.byVerb['patch/merge'] ?? 0).toBeLessThanOrEqual(1);
      expect(await snapshot(ns)).toEqual(before);
      const status = (await admin.get(probers, { name: 'prober', namespace: ns })).status as {
        conditions: Array<{ type: string; reason: string; message: string }>;
      };
      const synced = status.conditions.find((c) => c.type === 'Synced')!;
      expect(synced.reason).toBe(h.reason);
      expect(JSON.stringify(status)).not.toContain(MARKER);
      expect(logged.some((f) => f.reason === h.reason)).toBe(true);
      seenReasons.add(h.reason);
    }),
    { numRuns: 60 },
  );
  expect(seen.followedRedirects).toBe(0);
  expect(seen.badSignatures).toBe(0);
  expect(seenReasons.size).toBeGreaterThanOrEqual(5);
  // A good answer again: the pass is clean.
  reply = (input) => json({ outputs: [copy(input)] });
  expect(await syncMap(ctx, mc, key(parent))).toMatchObject({ problems: [] });
}, 120_000);

test('the answer text goes to the log: an HTTP error body and a non-JSON answer are logged, not written', async () => {
  const ns = await createNamespace('hooks');
  const admin = adminClient();
  await admin.create(configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'in', namespace: ns, labels: { app: 'probe' } },
  } as KubeObject);
  const parent = await admin.create(probers, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Prober',
    metadata: { name: 'prober', namespace: ns },
    spec: { selector: { matchLabels: { app: 'probe' } } },
  } as KubeObject);
  const logged: Array<Record<string, unknown>> = [];
  const ctx: MapContext = {
    kube: outriggerClient(),
    hooks: new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'], minRetryDelayMs: 10 }),
    log: (_l, _m, f) => logged.push(f ?? {}),
  };
  reply = () => ({ status: 500, body: `${MARKER} stack trace` });
  await syncMap(ctx, mc, key(parent));
  expect(logged.find((f) => f.reason === 'HookHTTPError')?.detail).toContain(MARKER);
  reply = () => ({ status: 200, body: `not json ${MARKER}` });
  logged.length = 0;
  await syncMap(ctx, mc, key(parent));
  expect(logged.find((f) => f.reason === 'HookMalformedAnswer')?.detail).toContain(MARKER);
});

test('https only: a plain http webhook is refused unless loopback http is allowed (the local runtime), and nothing is called', async () => {
  const ns = await createNamespace('hooks');
  const admin = adminClient();
  await admin.create(configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'in', namespace: ns, labels: { app: 'probe' } },
  } as KubeObject);
  const parent = await admin.create(probers, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Prober',
    metadata: { name: 'prober', namespace: ns },
    spec: { selector: { matchLabels: { app: 'probe' } } },
  } as KubeObject);
  const calls = seen.requests;
  const result = await syncMap({ kube: outriggerClient(), hooks: new Hooks() }, mc, key(parent));
  expect(result.problems).toEqual([expect.objectContaining({ reason: 'HookRefused', message: expect.stringMatching(/https only/) })]);
  expect(seen.requests).toBe(calls);
});

test('webhook egress: a hook whose host resolves to 127.0.0.1 or 169.254.169.254 is refused with HookNotAllowed in the status, and nothing is called', async () => {
  const ns = await createNamespace('hooks');
  const admin = adminClient();
  await admin.create(configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'in', namespace: ns, labels: { app: 'probe' } },
  } as KubeObject);
  const parent = await admin.create(probers, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Prober',
    metadata: { name: 'prober', namespace: ns },
    spec: { selector: { matchLabels: { app: 'probe' } } },
  } as KubeObject);
  const port = new URL(url).port;
  // A stand-in name server: the hook's name resolves to the instance metadata address.
  const dnsLookup = ((host: string, _o: unknown, cb: (e: null, all: Array<{ address: string; family: number }>) => void) =>
    cb(null, [{ address: host === 'localhost' ? '127.0.0.1' : '169.254.169.254', family: 4 }])) as never;
  const calls = seen.requests;
  const synced = async () =>
    (
      (await admin.get(probers, { name: 'prober', namespace: ns })).status as {
        conditions: Array<{ type: string; reason: string; message: string }>;
      }
    ).conditions.find((c) => c.type === 'Synced')!;
  for (const hookUrl of [
    `http://localhost:${port}/map`,
    `https://metadata.hooks.test/latest/meta-data/`,
    url.replace('127.0.0.1', 'localhost'),
  ]) {
    const pointed = { ...mc, spec: { ...mc.spec, hooks: { map: { ...mc.spec.hooks.map, webhook: { url: hookUrl } } } } };
    // The deployment lists a host name, not the loopback or metadata ranges.
    const hooks = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['localhost', 'metadata.hooks.test'], dnsLookup });
    const result = await syncMap({ kube: outriggerClient(), hooks }, pointed, key(parent));
    expect(result.problems).toEqual([
      expect.objectContaining({ reason: 'HookNotAllowed', message: expect.stringMatching(/webhook allow-list/) }),
    ]);
    const condition = await synced();
    expect(condition).toMatchObject({
      reason: 'HookNotAllowed',
      message: expect.stringMatching(/loopback, private, link-local, instance metadata/),
    });
    // Where the name pointed stays in the log: the status does not tell an author.
    expect(condition.message).not.toMatch(/127\.0\.0\.1|169\.254/);
  }
  expect(seen.requests).toBe(calls);
  // Listed by its range, the same hook is called.
  const allowed = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'], minRetryDelayMs: 10 });
  reply = () => json({ outputs: [] });
  expect((await syncMap({ kube: outriggerClient(), hooks: allowed }, mc, key(parent))).problems).toEqual([]);
  expect(seen.requests).toBe(calls + 1);
});
