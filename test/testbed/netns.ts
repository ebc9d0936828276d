// An address the apiserver will proxy to, for a hook server a test starts (docs/contributing/test-beds.md): the
// apiserver refuses to proxy to loopback and link-local addresses, and kwok's pods run no process. A network
// namespace and a veth pair, named for this run, give the machine a private address (10.x) on an interface of its
// own; a server listening there is a Service's endpoint. Needs root (CAP_NET_ADMIN), as the bed's machine has.
import { execFileSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';

export interface ProxyableAddress {
  /** The address on this machine's end of the pair: where a test's server listens. */
  address: string;
  /** Removes the namespace and the pair; safe to call twice. */
  remove(): void;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** Makes the namespace and the pair; on failure, removes what it made and throws what `ip` said. */
export function proxyableAddress(): ProxyableAddress {
  // Interface names hold 15 characters; the subnet is a random /30 of 10.213.0.0/16, so parallel runs do not meet.
  const id = randomBytes(4).toString('hex');
  const ns = `orh-${id}`;
  const host = `orh${id}a`;
  const peer = `orh${id}b`;
  const n = randomInt(0, 16384) * 4;
  const net = `10.213.${n >> 8}.${n & 255}`;
  const address = `10.213.${n >> 8}.${(n & 255) + 1}`;
  const peerAddress = `10.213.${n >> 8}.${(n & 255) + 2}`;
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    // Deleting one end deletes the pair; the namespace goes on its own.
    for (const args of [
      ['link', 'del', host],
      ['netns', 'del', ns],
    ])
      try {
        ip(...args);
      } catch {
        // Already gone.
      }
    process.off('exit', remove);
  };
  process.on('exit', remove);
  try {
    ip('netns', 'add', ns);
    ip('link', 'add', host, 'type', 'veth', 'peer', 'name', peer);
    ip('link', 'set', peer, 'netns', ns);
    ip('addr', 'add', `${address}/30`, 'dev', host);
    ip('link', 'set', host, 'up');
    ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${peerAddress}/30`, 'dev', peer);
    ip('netns', 'exec', ns, 'ip', 'link', 'set', peer, 'up');
  } catch (err) {
    remove();
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(
      `could not make a network namespace and veth pair (${net}/30) for a proxyable address: ${stderr ?? (err as Error).message}`,
    );
  }
  return { address, remove };
}
