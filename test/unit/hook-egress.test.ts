// The webhook egress boundary (docs/operations/security.md): a MapController author names any URL, and the map
// function reaches only hosts the deployment's allow-list admits, never a loopback, private, link-local, instance
// metadata or reserved address unless a listed range holds it, judged on the address connected to. Requests go
// through the map function's hook caller (Hooks) to a real loopback HTTP server; a stand-in resolver plays DNS.
import { lookup, type LookupAddress } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HookError, Hooks } from '../../shared/hooks/index.ts';
import { hostRefusal, parseWebhookAllowList, specialRange } from '../../shared/hooks/egress.ts';
import type { Hook } from '../../shared/map/api.ts';

let server: Server;
let port: number;
let received = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    received += 1;
    req.resume();
    // No keep-alive: each call connects, so each is judged at its own connect.
    res.writeHead(200, { 'content-type': 'application/json', connection: 'close' }).end('{"outputs": []}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const hook = (host: string): Hook => ({ webhook: { url: `http://${host}:${port}/map` }, timeoutSeconds: 5, retries: 0 }) as Hook;

/** A name server for the tests: each name answers its addresses, in turn when it has several answers. */
function resolver(names: Record<string, string[][]>): typeof lookup {
  const asked = new Map<string, number>();
  const fake = (hostname: string, options: unknown, callback: (err: Error | null, all: LookupAddress[]) => void) => {
    const answers = names[hostname];
    if (!answers) return lookup(hostname, options as object, callback as never);
    const n = asked.get(hostname) ?? 0;
    asked.set(hostname, n + 1);
    const addresses = answers[Math.min(n, answers.length - 1)]!;
    callback(
      null,
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };
  return fake as unknown as typeof lookup;
}

async function refusal(hooks: Hooks, host: string): Promise<HookError> {
  const before = received;
  const err = await hooks.call(hook(host), {}).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HookError);
  expect(received).toBe(before);
  return err as HookError;
}

test('webhook egress: a host that resolves to 127.0.0.1 is refused (HookNotAllowed) and nothing is sent, unless listed', async () => {
  const err = await refusal(new Hooks({ allowLoopbackHttp: true }), 'localhost');
  expect(err.reason).toBe('NotAllowed');
  expect(err.message).toMatch(/webhookAllow/);
  // Which address, for the log only: the status does not tell an author where a name points.
  expect(err.message).not.toMatch(/127\.0\.0\.1/);
  expect(err.detail).toMatch(/127\.0\.0\.1 \(loopback\)/);
  expect((await refusal(new Hooks({ allowLoopbackHttp: true }), '127.0.0.1')).reason).toBe('NotAllowed');
  await expect(new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }).call(hook('127.0.0.1'), {})).resolves.toEqual({
    outputs: [],
  });
});

test('webhook egress: a host that resolves to 169.254.169.254 (instance metadata) is refused, even when its name is listed', async () => {
  const dnsLookup = resolver({ 'hooks.example.com': [['169.254.169.254']], 'both.example.com': [['127.0.0.1', 'fd00:ec2::254']] });
  const hooks = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['*.example.com', '127.0.0.1'], dnsLookup });
  const err = await refusal(hooks, 'hooks.example.com');
  expect(err.reason).toBe('NotAllowed');
  expect(err.detail).toMatch(/169\.254\.169\.254 \(instance metadata\)/);
  // One refused address refuses the name, whichever address a connection would have tried first.
  expect((await refusal(hooks, 'both.example.com')).detail).toMatch(/instance metadata/);
});

test('webhook egress: an allow-listed host works; one the list does not name is refused before any lookup', async () => {
  const dnsLookup = resolver({ 'hooks.example.com': [['127.0.0.1']], 'other.example.org': [['127.0.0.1']] });
  const hooks = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['hooks.example.com', '127.0.0.0/8'], dnsLookup });
  await expect(hooks.call(hook('hooks.example.com'), {})).resolves.toEqual({ outputs: [] });
  const err = await refusal(hooks, 'other.example.org');
  expect(err.message).toMatch(/host is not in the deployment's webhook allow-list/);
  // A listed name whose address no listed range holds: the name alone does not open a special range.
  const nameOnly = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['hooks.example.com'], dnsLookup });
  expect((await refusal(nameOnly, 'hooks.example.com')).reason).toBe('NotAllowed');
});

test('webhook egress: a name that resolves again to another address (DNS rebinding) is judged at each connect', async () => {
  const dnsLookup = resolver({ 'rebind.example.com': [['127.0.0.1'], ['169.254.169.254']] });
  const hooks = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['rebind.example.com', '127.0.0.1'], dnsLookup });
  await expect(hooks.call(hook('rebind.example.com'), {})).resolves.toEqual({ outputs: [] });
  expect((await refusal(hooks, 'rebind.example.com')).detail).toMatch(/169\.254\.169\.254/);
});

test('webhook egress: plain http (the local runtime) reaches a name only when it resolves to loopback', async () => {
  const dnsLookup = resolver({ 'private.example.com': [['10.0.0.7']] });
  const hooks = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['private.example.com', '10.0.0.0/8'], dnsLookup });
  const err = await refusal(hooks, 'private.example.com');
  expect(err.reason).toBe('Refused');
  expect(err.message).toMatch(/https only/);
});

test.each([
  ['127.0.0.1', 'loopback'],
  ['::1', 'loopback'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['169.254.169.254', 'instance metadata'],
  ['169.254.170.2', 'instance metadata'],
  ['fd00:ec2::254', 'instance metadata'],
  ['169.254.1.1', 'link-local'],
  ['fe80::1', 'link-local'],
  ['10.0.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['100.64.0.1', 'private'],
  ['fd12:3456::1', 'private'],
  ['0.0.0.0', 'reserved'],
  ['::', 'reserved'],
  ['224.0.0.1', 'reserved'],
  ['64:ff9b::a9fe:a9fe', 'reserved'],
  ['2002:7f00:1::', 'reserved'],
  ['8.8.8.8', undefined],
  ['172.32.0.1', undefined],
  ['2606:4700::1111', undefined],
])('webhook egress: %s is %s', (address, range) => {
  expect(specialRange(address)).toBe(range);
});

test('webhook egress: the allow-list refuses entries it cannot read, by name, and matches names exactly or by suffix', () => {
  expect(() => parseWebhookAllowList(['hooks.example.com/8'])).toThrow(/"hooks.example.com\/8"/);
  expect(() => parseWebhookAllowList(['10.0.0.0/33'])).toThrow(/10.0.0.0\/33/);
  expect(() => parseWebhookAllowList(['https://hooks.example.com'])).toThrow(/neither a host name/);
  const allow = parseWebhookAllowList(['hooks.example.com', '*.corp.example', '10.1.0.0/16']);
  expect(hostRefusal('HOOKS.example.com.', allow)).toBeUndefined();
  expect(hostRefusal('a.b.corp.example', allow)).toBeUndefined();
  expect(hostRefusal('corp.example', allow)).toMatch(/not in/);
  expect(hostRefusal('evilcorp.example', allow)).toMatch(/not in/);
  expect(hostRefusal('10.1.2.3', allow)).toBeUndefined();
  expect(hostRefusal('10.2.0.1', allow)).toMatch(/not in/);
  // Without a list, any name (its addresses are judged at connect), but no special address.
  expect(hostRefusal('anything.example', parseWebhookAllowList(undefined))).toBeUndefined();
  expect(hostRefusal('[::1]', parseWebhookAllowList(undefined))).toMatch(/loopback/);
  expect(hostRefusal('8.8.8.8', parseWebhookAllowList(undefined))).toBeUndefined();
});

test('what reaches the status names no webhook path (it may hold a token) and no account or role from a failed Invoke', async () => {
  const denied = createServer((req, res) => {
    req.resume();
    res.writeHead(403, { 'content-type': 'application/json', 'x-amzn-errortype': 'AccessDeniedException', connection: 'close' }).end(
      JSON.stringify({
        Type: 'User',
        message:
          'User: arn:aws:sts::111122223333:assumed-role/outrigger-map/outrigger-map is not authorized to perform: lambda:InvokeFunction',
      }),
    );
  });
  await new Promise<void>((r) => denied.listen(0, '127.0.0.1', r));
  const endpoint = `http://127.0.0.1:${(denied.address() as AddressInfo).port}`;
  try {
    const hooks = new Hooks({ lambdaEndpoint: endpoint, region: 'local', allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
    const lambdaErr = (await hooks
      .call({ lambda: { functionName: 'their-hook' }, timeoutSeconds: 5, retries: 0 } as Hook, {})
      .catch((e: unknown) => e)) as HookError;
    expect(lambdaErr.message).toMatch(/their-hook: Invoke failed with HTTP 403 \(AccessDeniedException\)/);
    expect(lambdaErr.message).not.toMatch(/111122223333|assumed-role/);
    expect(lambdaErr.detail).toMatch(/111122223333/);
    const webhookErr = (await hooks
      .call({ webhook: { url: `${endpoint}/hooks/T000/B000/secret-token` }, timeoutSeconds: 5, retries: 0 } as Hook, {})
      .catch((e: unknown) => e)) as HookError;
    expect(webhookErr.message).toBe(`webhook ${endpoint} answered HTTP 403`);
  } finally {
    await new Promise<void>((r) => denied.close(() => r()));
  }
});

test('a call whose pass deadline falls between milliseconds is sent, its timeout a whole number of them', async () => {
  // A deadline made from a fractional remaining time (half a budget, say): node's timers refuse 196.5 ms.
  const hooks = new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
  await expect(hooks.call(hook('127.0.0.1'), {}, { deadline: Date.now() + 2_000.5 })).resolves.toEqual({ outputs: [] });
});
