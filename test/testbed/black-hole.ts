// An apiserver that never answers: a loopback TCP listener that accepts connections and sends nothing, as a
// private endpoint behind a security group that drops the functions' packets looks from the client (a TLS
// handshake that never completes). 127.0.0.1:1 refuses at once, which hides the hang this stands for.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClusterConfig } from '../../shared/clusters.ts';

export interface BlackHole {
  /** A cluster whose access reaches the listener. */
  cluster: ClusterConfig;
  /** Connections accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

export async function blackHole(id: string): Promise<BlackHole> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  const kubeconfig = join(await mkdtemp(join(tmpdir(), 'outrigger-hole-')), 'kubeconfig');
  await writeFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'hole', cluster: { server: `https://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'c', context: { cluster: 'hole', user: 'u' } }],
      'current-context': 'c',
    }),
  );
  return {
    cluster: { id, access: { kind: 'kubeconfig', path: kubeconfig } },
    accepted: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}
