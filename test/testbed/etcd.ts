// The test bed's etcd, reached directly: what the apiserver really stored (the bytes, not what it serves) and
// compaction on demand, so a test can expire a list's continue token as a long-lived cluster does. Through
// etcd's JSON gateway (https://etcd.io/docs/v3.6/dev-guide/api_grpc_gateway/), which carries keys and values
// as base64.
import { testbed } from './index.ts';

interface RangeAnswer {
  header: { revision: string };
  kvs?: Array<{ key: string; value?: string; mod_revision?: string }>;
}

async function call<T>(etcdUrl: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${etcdUrl}${path}`, { method: 'POST', body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** The apiserver's key for an object: `/registry/<group>/<resource>/[<namespace>/]<name>` (built-in core kinds have no group part). */
export function registryKey(o: { group: string; resource: string; namespace?: string; name: string }): string {
  return ['/registry', ...(o.group ? [o.group] : []), o.resource, ...(o.namespace ? [o.namespace] : []), o.name].join('/');
}

/** The stored bytes of one key, or undefined when there is none. */
export async function etcdRead(key: string, etcdUrl = testbed().etcdUrl): Promise<Buffer | undefined> {
  const answer = await call<RangeAnswer>(etcdUrl, '/v3/kv/range', { key: b64(key) });
  const value = answer.kvs?.[0]?.value;
  return value === undefined ? undefined : Buffer.from(value, 'base64');
}

/** etcd's current revision (the newest resourceVersion any object in the cluster can have). */
export async function etcdRevision(etcdUrl = testbed().etcdUrl): Promise<number> {
  const answer = await call<RangeAnswer>(etcdUrl, '/v3/kv/range', { key: b64('/registry/') });
  return Number(answer.header.revision);
}

/**
 * Compacts etcd's history up to `revision` (default: now). Kubernetes 1.35 still serves continue tokens and
 * lists from its watch cache's snapshots until it learns of the compaction: `recordCompaction` next.
 */
export async function compactEtcd(revision?: number, etcdUrl = testbed().etcdUrl): Promise<number> {
  const at = revision ?? (await etcdRevision(etcdUrl));
  await call(etcdUrl, '/v3/kv/compaction', { revision: String(at), physical: true });
  return at;
}

/**
 * Records a compaction where the apiserver's own compactor records it (etcd's `compact_rev_key`, every 5 minutes
 * in a cluster): the apiserver's watch caches read it (every 15 s) and drop their list snapshots older than it,
 * so a continue token taken before answers 410 Gone. A compaction of etcd alone leaves those snapshots
 * (ListFromCacheSnapshot, beta and on since Kubernetes 1.34: k8s.io/apiserver pkg/storage/cacher/compactor.go).
 */
export async function recordCompaction(revision: number, etcdUrl = testbed().etcdUrl): Promise<void> {
  await call(etcdUrl, '/v3/kv/put', { key: b64('compact_rev_key'), value: b64(String(revision)) });
}
