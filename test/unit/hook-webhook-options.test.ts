// Webhook targets and options (docs/reference/hooks.md#webhook-options): which URLs name a Service in the cluster
// (and go through the apiserver's service proxy), paths that could climb out of the proxy, Metacontroller's timeout
// duration, and the authorization and TLS options read from Secrets and ConfigMaps as the controller's ServiceAccount,
// against real loopback servers (https with a CA and client certificates made for the test by openssl).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { HookError, Hooks, hookTimeoutSeconds } from '../../shared/hooks/index.ts';
import { serviceProxyPath, webhookTarget } from '../../shared/hooks/target.ts';
import { gvr, KubeError, type KubeObject } from '../../shared/kube/index.ts';
import type { Hook } from '../../shared/map/api.ts';
import { parseGoDuration } from '../../shared/validation.ts';
import { FakeKube } from '../fakes/kube.ts';

const secrets = gvr('', 'v1', 'secrets');
const configMaps = gvr('', 'v1', 'configmaps');
const hook = (webhook: Record<string, unknown>, timeoutSeconds = 5): Hook => ({ webhook, timeoutSeconds, retries: 0 }) as Hook;
const controller = { cluster: 'c', uid: 'u' };

describe('webhook targets', () => {
  test.each([
    [{ url: 'http://hooks.team/sync' }, { kind: 'service', name: 'hooks', namespace: 'team', port: 80, protocol: 'http', path: '/sync' }],
    [{ url: 'http://hooks.team.svc:8080/a?b=1' }, { kind: 'service', namespace: 'team', port: 8080, path: '/a?b=1' }],
    [{ url: 'https://hooks.team.svc.cluster.local/x' }, { kind: 'service', port: 443, protocol: 'https', path: '/x' }],
    [{ service: { name: 'hooks', namespace: 'team' } }, { kind: 'service', port: 80, path: '/', url: 'http://hooks.team.svc:80/' }],
    [
      { service: { name: 'h', namespace: 't', port: 9443, protocol: 'https' }, path: '/sync' },
      { kind: 'service', protocol: 'https', port: 9443 },
    ],
    // An https name of two labels is an Internet name; a longer one is not a Service name.
    [{ url: 'https://hooks.example/sync' }, { kind: 'url' }],
    [{ url: 'https://hooks.example.com/sync' }, { kind: 'url' }],
    [{ url: 'http://a.b.c/sync' }, { kind: 'url' }],
  ])('%j is %j', (spec, expected) => {
    expect(webhookTarget(spec)).toMatchObject(expected);
  });

  test('the proxy path names the scheme only for https', () => {
    expect(serviceProxyPath(webhookTarget({ service: { name: 'h', namespace: 't', port: 80 }, path: '/s' }) as never)).toBe(
      '/api/v1/namespaces/t/services/h:80/proxy/s',
    );
    expect(serviceProxyPath(webhookTarget({ url: 'https://h.t.svc:8443/s' }) as never)).toBe(
      '/api/v1/namespaces/t/services/https:h:8443/proxy/s',
    );
  });

  test.each([
    [{ service: { name: 'h', namespace: 't' }, path: '/../../secrets' }, '. or ..'],
    [{ service: { name: 'h', namespace: 't' }, path: '/a/%2e%2E/b' }, '. or ..'],
    [{ service: { name: 'h', namespace: 't' }, path: '/a%2fb' }, 'encoded'],
    [{ service: { name: 'h', namespace: 't' }, path: 'sync' }, 'start with /'],
    [{ service: { name: 'H_x', namespace: 't' } }, 'DNS labels'],
    [{ url: 'http://u:p@h.t.svc/' }, 'credentials'],
  ])('a path that could leave the Service, or a bad name, is refused: %j', (spec, message) => {
    expect(() => webhookTarget(spec)).toThrow(message);
  });

  test("Metacontroller's timeout is a Go duration, in place of timeoutSeconds", () => {
    expect(parseGoDuration('10s')).toBe(10);
    expect(parseGoDuration('1m30s')).toBe(90);
    expect(parseGoDuration('1.5s')).toBe(1.5);
    expect(parseGoDuration('250ms')).toBe(0.25);
    expect(parseGoDuration('10')).toBeUndefined();
    expect(hookTimeoutSeconds(hook({ url: 'https://x', timeout: '2s' }, 10))).toBe(2);
    expect(hookTimeoutSeconds(hook({ url: 'https://x' }, 10))).toBe(10);
  });
});

describe('webhook options read as the controller account', () => {
  let server: Server;
  let url: string;
  const seen: IncomingHttpHeaders[] = [];
  beforeAll(async () => {
    server = createHttpServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"outputs": []}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/map`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const kube = () => {
    const k = new FakeKube();
    k.seed(secrets, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'tok', namespace: 'team' },
      data: { token: b64('s3cret\n') },
    } as KubeObject);
    k.seed(secrets, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'basic', namespace: 'team' },
      data: { username: b64('ann'), password: b64('pw') },
    } as KubeObject);
    return k;
  };
  const hooks = () => new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });

  test('authorization: Bearer from the Secret, basicAuth from username and password', async () => {
    seen.length = 0;
    const k = kube();
    await hooks().call(hook({ url, authorization: { secretRef: { name: 'tok', namespace: 'team' } } }), {}, { controller, cluster: k });
    await hooks().call(hook({ url, basicAuth: { secretRef: { name: 'basic', namespace: 'team' } } }), {}, { controller, cluster: k });
    expect(seen.map((h) => h.authorization)).toEqual(['Bearer s3cret', `Basic ${b64('ann:pw')}`]);
  });

  test("Metacontroller's authorization.type and basicAuth's usernameKey and passwordKey", async () => {
    seen.length = 0;
    const k = kube();
    k.seed(secrets, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'keys', namespace: 'team' },
      data: { user: b64('bob'), pass: b64('pw2') },
    } as KubeObject);
    await hooks().call(
      hook({ url, authorization: { type: 'Token', secretRef: { name: 'tok', namespace: 'team' } } }),
      {},
      { controller, cluster: k },
    );
    await hooks().call(
      hook({ url, basicAuth: { secretRef: { name: 'keys', namespace: 'team' }, usernameKey: 'user', passwordKey: 'pass' } }),
      {},
      { controller, cluster: k },
    );
    expect(seen.map((h) => h.authorization)).toEqual(['Token s3cret', `Basic ${b64('bob:pw2')}`]);
  });

  test('trust boundary: a Secret the controller account may not read is NotAllowed, and nothing is sent', async () => {
    seen.length = 0;
    const k = kube();
    k.beforeRequest = (verb, r) => {
      if (r.resource === 'secrets') throw new KubeError('Forbidden', 'secrets "tok" is forbidden', { status: 403 });
    };
    const err = await hooks()
      .call(hook({ url, authorization: { secretRef: { name: 'tok', namespace: 'team' } } }), {}, { controller, cluster: k })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HookError);
    expect(err).toMatchObject({ reason: 'NotAllowed', message: expect.stringContaining('may not read Secret team/tok') as unknown });
    // A missing Secret is refused, not retried; a Secret without the key names the key.
    await expect(
      hooks().call(hook({ url, authorization: { secretRef: { name: 'none', namespace: 'team' } } }), {}, { controller, cluster: kube() }),
    ).rejects.toMatchObject({ reason: 'Refused' });
    await expect(
      hooks().call(
        hook({ url, authorization: { secretRef: { name: 'tok', namespace: 'team', key: 'nope' } } }),
        {},
        {
          controller,
          cluster: kube(),
        },
      ),
    ).rejects.toThrow('has no key nope');
    expect(seen).toEqual([]);
  });

  test('caBundle and clientTLS: an https hook with a private CA that asks for a client certificate', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hook-tls-'));
    try {
      const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
      ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=hook-ca');
      for (const [name, ext] of [
        ['server', 'subjectAltName=IP:127.0.0.1'],
        ['client', 'extendedKeyUsage=clientAuth'],
      ] as const) {
        ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
        writeFileSync(join(dir, `${name}.ext`), `${ext}\n`);
        ssl(
          'x509',
          '-req',
          '-in',
          `${name}.csr`,
          '-CA',
          'ca.crt',
          '-CAkey',
          'ca.key',
          '-CAcreateserial',
          '-out',
          `${name}.crt`,
          '-days',
          '1',
          '-extfile',
          `${name}.ext`,
        );
      }
      const read = (f: string) => readFileSync(join(dir, f), 'utf8');
      const peers: string[] = [];
      const tls = createHttpsServer(
        { key: read('server.key'), cert: read('server.crt'), ca: read('ca.crt'), requestCert: true, rejectUnauthorized: true },
        (req, res) => {
          peers.push((req.socket as TLSSocket).getPeerCertificate().subject.CN as string);
          req.resume();
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"outputs": []}');
        },
      );
      await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r));
      const tlsUrl = `https://127.0.0.1:${(tls.address() as AddressInfo).port}/map`;
      const k = kube();
      k.seed(configMaps, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'ca', namespace: 'team' },
        data: { 'ca.crt': read('ca.crt') },
      } as KubeObject);
      k.seed(secrets, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'client', namespace: 'team' },
        data: { 'tls.crt': b64(read('client.crt')), 'tls.key': b64(read('client.key')) },
      } as KubeObject);
      const h = new Hooks({ webhookAllow: ['127.0.0.1'] });
      try {
        // Without the CA the server's certificate is not trusted.
        await expect(h.call(hook({ url: tlsUrl }), {}, { controller, cluster: k })).rejects.toMatchObject({ reason: 'Unreachable' });
        await h.call(
          hook({
            url: tlsUrl,
            caBundle: { configMapRef: { name: 'ca', namespace: 'team' } },
            clientTLS: { secretRef: { name: 'client', namespace: 'team' } },
          }),
          {},
          { controller, cluster: k },
        );
        expect(peers).toEqual(['client']);
        // Metacontroller's certKey and privateKeyKey name other keys of the Secret.
        k.seed(secrets, {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'keyed', namespace: 'team' },
          data: { c: b64(read('client.crt')), k: b64(read('client.key')) },
        } as KubeObject);
        await h.call(
          hook({
            url: tlsUrl,
            caBundle: { configMapRef: { name: 'ca', namespace: 'team' } },
            clientTLS: { secretRef: { name: 'keyed', namespace: 'team' }, certKey: 'c', privateKeyKey: 'k' },
          }),
          {},
          { controller, cluster: k },
        );
        expect(peers).toEqual(['client', 'client']);
      } finally {
        await new Promise<void>((r) => tls.close(() => r()));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
