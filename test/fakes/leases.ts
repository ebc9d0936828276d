// In-memory leases for unit tests of the shells that hold one (docs/contributing/test-beds.md#tests): terms, expiry
// by an injected clock, and the memo and parts a holder leaves at release, as shared/state/lease.ts keeps them in DynamoDB.
// No conditional-write races: the integration tests hold those against DynamoDB Local.
import type { AcquireOptions, Lease, LeaseStore } from '../../shared/state/index.ts';

export class FakeLeases implements Pick<LeaseStore, 'get' | 'acquire' | 'acquireWithin' | 'stillHeld' | 'release'> {
  private readonly leases = new Map<string, Lease>();
  /** Calls by method, for assertions. */
  readonly calls: Record<string, number> = {};

  readonly now: () => number;

  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  async acquire(cluster: string, name: string, holder: string, ttlMs: number, opts: AcquireOptions = {}): Promise<Lease | undefined> {
    this.count('acquire');
    const current = this.leases.get(`${cluster}/${name}`);
    if (current && current.holder !== holder && current.expiresAt > this.now()) return undefined;
    const lease: Lease = {
      cluster,
      name,
      holder,
      term: (current?.term ?? 0) + (current?.holder === holder && current.expiresAt > this.now() ? 0 : 1),
      expiresAt: this.now() + ttlMs,
      ...(current?.memo !== undefined ? { memo: structuredClone(current.memo) } : {}),
      ...(current?.parts !== undefined ? { parts: current.parts } : {}),
    };
    this.leases.set(`${cluster}/${name}`, lease);
    return this.copy(lease, opts.parts);
  }

  /** No waiting: a lease another holds is refused at once. */
  // eslint-disable-next-line max-params -- the same signature as LeaseStore.acquireWithin, which this fake stands in for
  async acquireWithin(
    cluster: string,
    name: string,
    holder: string,
    ttlMs: number,
    _waitMs: number,
    opts: AcquireOptions = {},
  ): Promise<Lease | undefined> {
    return this.acquire(cluster, name, holder, ttlMs, opts);
  }

  async release(lease: Lease, memo?: unknown, parts?: Record<string, unknown>): Promise<boolean> {
    this.count('release');
    const current = this.leases.get(`${lease.cluster}/${lease.name}`);
    if (!current || current.holder !== lease.holder || current.term !== lease.term) return false;
    this.leases.set(`${lease.cluster}/${lease.name}`, {
      ...current,
      expiresAt: 0,
      ...(memo !== undefined ? { memo: JSON.parse(JSON.stringify(memo)) as unknown } : {}),
      ...(parts !== undefined ? { parts: JSON.parse(JSON.stringify(parts)) as Record<string, unknown> } : {}),
    });
    return true;
  }

  stillHeld(lease: Lease, marginMs: number): boolean {
    return lease.expiresAt - marginMs > this.now();
  }

  async get(cluster: string, name: string, opts: { parts?: boolean } = {}): Promise<Lease | undefined> {
    this.count('get');
    const lease = this.leases.get(`${cluster}/${name}`);
    return lease && this.copy(lease, opts.parts);
  }

  /** A copy for the caller: with the parts, as stored, only when asked for (as DynamoDB's store reads them). */
  private copy(lease: Lease, parts: boolean | undefined): Lease {
    const { parts: kept, ...rest } = structuredClone(lease);
    return parts ? { ...rest, parts: kept ?? {}, stored: {} } : rest;
  }

  /** Sets a lease as another holder would leave it: for setting a scene. */
  put(lease: Lease): void {
    this.leases.set(`${lease.cluster}/${lease.name}`, structuredClone(lease));
  }

  private count(method: string): void {
    this.calls[method] = (this.calls[method] ?? 0) + 1;
  }
}
