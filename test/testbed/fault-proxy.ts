// A fault-injecting proxy on loopback in front of the real apiserver: a seeded share of requests is answered
// with 429, 500 or no answer at all (the connection hangs, then drops); the rest are forwarded unchanged,
// watches included. Tests point a client at it to show that what Outrigger does survives a flaky apiserver.
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';

export type Fault = '429' | '500' | 'timeout';

export interface FaultProxy {
  url: string;
  /** A kubeconfig for the identity whose token is given, pointing at the proxy. */
  kubeconfig: string;
  stats: { requests: number; forwarded: number; injected: Record<Fault, number> };
  faultRate: number;
  close(): Promise<void>;
}

/** mulberry32: a small seeded generator, so a failing run can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export async function startFaultProxy(opts: {
  target: string;
  caFile: string;
  token: string;
  faultRate: number;
  hangMs?: number;
  seed?: number;
}): Promise<FaultProxy> {
  const agent = new Agent({ connect: { ca: await readFile(opts.caFile, 'utf8') } });
  const next = random(opts.seed ?? 1);
  const hangMs = opts.hangMs ?? 1_500;
  const proxy: FaultProxy = {
    url: '',
    kubeconfig: '',
    stats: { requests: 0, forwarded: 0, injected: { '429': 0, '500': 0, timeout: 0 } },
    faultRate: opts.faultRate,
    close: async () => {},
  };
  const status = (code: number, reason: string) =>
    JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message: `injected ${code}` });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    proxy.stats.requests += 1;
    if (next() < proxy.faultRate) {
      const fault: Fault = (['429', '500', 'timeout'] as const)[Math.floor(next() * 3)]!;
      proxy.stats.injected[fault] += 1;
      if (fault === 'timeout') {
        setTimeout(() => req.socket.destroy(), hangMs);
        return;
      }
      res.writeHead(Number(fault), { 'content-type': 'application/json', ...(fault === '429' ? { 'retry-after': '0' } : {}) });
      res.end(fault === '429' ? status(429, 'TooManyRequests') : status(500, 'InternalError'));
      return;
    }
    proxy.stats.forwarded += 1;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    const upstream = await request(opts.target + (req.url ?? '/'), {
      method: req.method as 'GET',
      headers,
      ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      dispatcher: agent,
    });
    const outHeaders: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(upstream.headers))
      if (v !== undefined && k !== 'transfer-encoding' && k !== 'connection') outHeaders[k] = v;
    res.writeHead(upstream.statusCode, outHeaders);
    res.flushHeaders();
    req.on('close', () => upstream.body.destroy());
    for await (const c of upstream.body) res.write(c);
    res.end();
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.kubeconfig = join(tmpdir(), `outrigger-fault-proxy-${process.pid}-${(server.address() as AddressInfo).port}.kubeconfig`);
  await writeFile(
    proxy.kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'proxy',
      // Plain HTTP on loopback; client-node accepts http only with TLS verification off.
      clusters: [{ name: 'proxy', cluster: { server: proxy.url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: opts.token } }],
      contexts: [{ name: 'proxy', context: { cluster: 'proxy', user: 'u' } }],
    }),
  );
  proxy.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await agent.close();
  };
  return proxy;
}
