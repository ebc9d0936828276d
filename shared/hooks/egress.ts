// Where webhooks may go (docs/reference/hooks.md#where-webhooks-may-go): the deployment's allow-list of hosts and
// address ranges, and the special ranges (loopback, private, link-local, instance metadata, ...) that no webhook
// reaches unless a listed range covers it. The host is checked before a request, each address it resolves to when
// the connection is made (so a name that resolves again to another address, DNS rebinding, gains nothing).
import { BlockList, isIP } from 'node:net';

export interface WebhookAllowList {
  /** Host names, exact (`hooks.example.com`) or a suffix (`*.example.com`: any name under it, not itself); lower-case. */
  readonly hosts: readonly string[];
  /** The listed addresses and ranges: an address in one is reached even in a special range. */
  readonly ranges: BlockList;
  /** Whether any entry was given: without one, any host name is allowed (its addresses still must not be special). */
  readonly restricted: boolean;
}

const HOST = /^(\*\.)?([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Parses the allow-list (`webhookAllow`): host names, `*.` suffixes, addresses and CIDR ranges; a bad entry is named. */
export function parseWebhookAllowList(entries: readonly string[] | undefined): WebhookAllowList {
  if (entries !== undefined && (!Array.isArray(entries) || !entries.every((e) => typeof e === 'string')))
    throw new Error('webhookAllow must be a list of host names and address ranges');
  const hosts: string[] = [];
  const ranges = new BlockList();
  for (const raw of entries ?? []) {
    const entry = raw.trim().toLowerCase();
    const [address, prefix, extra] = entry.split('/');
    const family = isIP(address ?? '');
    if (family) {
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (prefix === undefined) ranges.addAddress(address!, type);
      else if (extra === undefined && /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128))
        ranges.addSubnet(address!, Number(prefix), type);
      else throw new Error(`webhookAllow: ${JSON.stringify(raw)} is not an address range (expected <address>/<prefix length>)`);
    } else if (HOST.test(entry) && entry.length <= 253) hosts.push(entry);
    else
      throw new Error(
        `webhookAllow: ${JSON.stringify(raw)} is neither a host name (hooks.example.com, *.example.com) nor an address or CIDR range`,
      );
  }
  return { hosts, ranges, restricted: (entries ?? []).length > 0 };
}

/** The special ranges, most specific first: the first that holds an address names it. */
const SPECIAL_RANGES: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, number]>]> = [
  // EC2's IMDS (IPv4 and IPv6), the ECS and Lambda container credentials endpoint, the Amazon DNS resolver.
  [
    'instance metadata',
    [
      ['169.254.169.254', 32],
      ['169.254.170.2', 32],
      ['169.254.169.253', 32],
      ['fd00:ec2::', 32],
    ],
  ],
  [
    'loopback',
    [
      ['127.0.0.0', 8],
      ['::1', 128],
    ],
  ],
  [
    'link-local',
    [
      ['169.254.0.0', 16],
      ['fe80::', 10],
    ],
  ],
  [
    'private',
    [
      ['10.0.0.0', 8],
      ['172.16.0.0', 12],
      ['192.168.0.0', 16],
      ['100.64.0.0', 10],
      ['fc00::', 7],
    ],
  ],
  // This network, IETF assignments, documentation, 6to4 relays, benchmarking, multicast, future use; IPv6's
  // unspecified address, NAT64 and 6to4 (which embed an IPv4 address), discard, Teredo and multicast.
  [
    'reserved',
    [
      ['0.0.0.0', 8],
      ['192.0.0.0', 24],
      ['192.0.2.0', 24],
      ['192.88.99.0', 24],
      ['198.18.0.0', 15],
      ['198.51.100.0', 24],
      ['203.0.113.0', 24],
      ['224.0.0.0', 4],
      ['240.0.0.0', 4],
      ['::', 128],
      ['64:ff9b::', 96],
      ['64:ff9b:1::', 48],
      ['100::', 64],
      ['2001::', 23],
      ['2001:db8::', 32],
      ['2002::', 16],
      ['ff00::', 8],
    ],
  ],
];

const SPECIAL = SPECIAL_RANGES.map(([name, subnets]) => {
  const list = new BlockList();
  for (const [net, prefix] of subnets) list.addSubnet(net, prefix, familyOf(net));
  return [name, list] as const;
});

function familyOf(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 4 ? 'ipv4' : 'ipv6';
}

/** Which special range holds an address (`loopback`, `instance metadata`, ...), or undefined for a public one. */
export function specialRange(address: string): string | undefined {
  if (!isIP(address)) return 'not an address';
  return SPECIAL.find(([, list]) => list.check(address, familyOf(address)))?.[0];
}

/** Why a webhook's host may not be called under the allow-list, or undefined. The message may reach the status. */
export function hostRefusal(hostname: string, allow: WebhookAllowList): string | undefined {
  const host = hostname
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
  if (isIP(host)) {
    if (allow.ranges.check(host, familyOf(host))) return undefined;
    if (allow.restricted) return "the address is not in the deployment's webhook allow-list (webhookAllow)";
    const range = specialRange(host);
    return range
      ? `the address is ${range}, which webhooks reach only when the deployment's webhook allow-list (webhookAllow) lists it`
      : undefined;
  }
  if (!allow.restricted) return undefined;
  const listed = allow.hosts.some((h) => (h.startsWith('*.') ? host.endsWith(h.slice(1)) : host === h));
  return listed ? undefined : "the host is not in the deployment's webhook allow-list (webhookAllow)";
}

/**
 * Which special range a resolved address is in, when the allow-list does not list it; undefined when it may be
 * reached. Which range is for the log: the status says only that it is refused (it would tell an author where an
 * internal name points).
 */
export function addressRefusal(address: string, allow: WebhookAllowList): string | undefined {
  if (!isIP(address)) return 'not an address';
  if (allow.ranges.check(address, familyOf(address))) return undefined;
  return specialRange(address);
}
