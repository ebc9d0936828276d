// Leader election between forwarder replicas on a coordination.k8s.io/v1 Lease in the forwarder's namespace,
// the way client-go's leaderelection package does it
// (https://github.com/kubernetes/client-go/tree/master/tools/leaderelection): every write is an update
// conditional on the Lease's resourceVersion, so two candidates never both win; a candidate takes a held Lease
// over only when it has seen it unchanged for a whole lease duration by its own clock (never by comparing the
// holder's renewTime with its clock, so clock skew between nodes does not matter); a leader that cannot renew
// within the renew deadline stops leading; a leader that stops cleanly releases the Lease, so a standby takes
// over within one retry period rather than one lease duration. (@kubernetes/client-node has no such helper.)
import { setTimeout as sleep } from 'node:timers/promises';
import { isKubeError, Resources, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import type { Log } from '../shared/log.ts';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
export type Lease = KubeObject & { spec?: LeaseSpec };

export interface LeaderElectionOptions {
  kube: KubeClient;
  namespace: string;
  name: string;
  /** This candidate's identity (its pod's name): what the Lease's holderIdentity says. */
  identity: string;
  /** How long a Lease unchanged stays its holder's (client-go's default: 15 s). */
  leaseDurationMs?: number;
  /** How long a leader keeps leading without a successful renewal (default 10 s; under the lease duration). */
  renewDeadlineMs?: number;
  /** How often a candidate tries and a leader renews (default 2 s). */
  retryPeriodMs?: number;
  log?: Log;
  now?: () => number;
}

/** A Lease's MicroTime: RFC 3339 with six fractional digits, as the apiserver writes and parses it. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  /** The holder last seen, for /readyz and logs. */
  leader: string | undefined;
  private readonly opts: Required<Omit<LeaderElectionOptions, 'log'>>;
  private observed: { resourceVersion: string; at: number } | undefined;
  private leading = false;
  private readonly stopped = new AbortController();
  private renewing: Promise<void> | undefined;
  /** A renewal still under way (one given up on at the deadline may still write): release waits for it. */
  private attempt: Promise<boolean> = Promise.resolve(false);
  private readonly log: Log;

  constructor(opts: LeaderElectionOptions) {
    this.opts = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, now: Date.now, ...opts };
    this.log = opts.log ?? (() => undefined);
    if (this.opts.renewDeadlineMs >= this.opts.leaseDurationMs)
      throw new Error('leader election: the renew deadline must be shorter than the lease duration');
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** Resolves once this candidate leads; then renews until `release`, calling `onLost` if it cannot. */
  async acquire(onLost: (reason: string) => void, signal?: AbortSignal): Promise<void> {
    for (;;) {
      if (signal?.aborted || this.stopped.signal.aborted) throw new Error('leader election stopped before the lease was acquired');
      if (await this.tryAcquireOrRenew().catch((err: unknown) => this.failed(err))) break;
      await sleep(this.opts.retryPeriodMs, undefined, {
        signal: AbortSignal.any([this.stopped.signal, ...(signal ? [signal] : [])]),
      }).catch(() => undefined);
    }
    this.leading = true;
    this.log('info', 'leader election: leading', { lease: this.opts.name, identity: this.opts.identity });
    this.renewing = this.renewLoop(onLost);
  }

  /** Stops renewing and, when leading, hands the Lease back so that a standby takes over at once. */
  async release(): Promise<void> {
    this.stopped.abort();
    await this.renewing;
    await this.attempt.catch(() => undefined);
    if (!this.leading) return;
    this.leading = false;
    for (let tries = 1; ; tries += 1) {
      try {
        const lease = await this.opts.kube.get<Lease>(Resources.leases, { name: this.opts.name, namespace: this.opts.namespace });
        if (lease.spec?.holderIdentity !== this.opts.identity) return;
        const now = microTime(this.opts.now());
        // As client-go releases: no holder, a one-second duration.
        await this.opts.kube.replace<Lease>(Resources.leases, {
          ...lease,
          spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, acquireTime: now, renewTime: now },
        });
        this.log('info', 'leader election: released', { lease: this.opts.name });
        return;
      } catch (err) {
        if (isKubeError(err, 'Conflict') && tries < 3) continue;
        this.log('warn', 'leader election: releasing failed; a standby takes over when the lease expires', { error: String(err) });
        return;
      }
    }
  }

  private async renewLoop(onLost: (reason: string) => void): Promise<void> {
    let lastRenewed = this.opts.now();
    while (!this.stopped.signal.aborted) {
      await sleep(this.opts.retryPeriodMs, undefined, { signal: this.stopped.signal }).catch(() => undefined);
      if (this.stopped.signal.aborted) return;
      let renewed = false;
      let error: string | undefined;
      try {
        // A renewal that takes longer than what is left of the deadline is as good as failed.
        const left = lastRenewed + this.opts.renewDeadlineMs - this.opts.now();
        this.attempt = this.tryAcquireOrRenew();
        renewed = await Promise.race([this.attempt, sleep(Math.max(left, 0)).then(() => false)]);
      } catch (err) {
        error = String(err);
      }
      if (renewed) {
        lastRenewed = this.opts.now();
        continue;
      }
      if (this.leader !== undefined && this.leader !== this.opts.identity && this.leader !== '') {
        this.leading = false;
        onLost(`the lease is held by ${this.leader}`);
        return;
      }
      if (this.opts.now() - lastRenewed >= this.opts.renewDeadlineMs) {
        this.leading = false;
        onLost(`no renewal for ${this.opts.renewDeadlineMs} ms${error ? `: ${error}` : ''}`);
        return;
      }
      if (error) this.log('warn', 'leader election: renewing failed; retrying', { error });
    }
  }

  /** One try: true when this candidate holds the Lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { kube, namespace, name, identity } = this.opts;
    const now = this.opts.now();
    const durationSeconds = Math.max(1, Math.round(this.opts.leaseDurationMs / 1000));
    const lease = await kube.find<Lease>(Resources.leases, { name, namespace });
    if (!lease) {
      try {
        await kube.create<Lease>(Resources.leases, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: durationSeconds,
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: 0,
          },
        });
        this.leader = identity;
        return true;
      } catch (err) {
        if (isKubeError(err, 'AlreadyExists')) return false;
        throw err;
      }
    }
    const spec = lease.spec ?? {};
    const rv = lease.metadata.resourceVersion ?? '';
    if (this.observed?.resourceVersion !== rv) this.observed = { resourceVersion: rv, at: now };
    this.leader = spec.holderIdentity;
    const holder = spec.holderIdentity ?? '';
    const heldFor = (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (holder !== '' && holder !== identity && this.observed.at + heldFor > now) return false;
    const taking = holder !== identity;
    try {
      await kube.replace<Lease>(Resources.leases, {
        ...lease,
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds: durationSeconds,
          acquireTime: taking ? microTime(now) : (spec.acquireTime ?? microTime(now)),
          renewTime: microTime(now),
          leaseTransitions: (spec.leaseTransitions ?? 0) + (taking && holder !== '' ? 1 : 0),
        },
      });
    } catch (err) {
      // Another candidate wrote first: it holds the Lease, this one tries again later.
      if (isKubeError(err, 'Conflict')) return false;
      throw err;
    }
    if (taking) this.log('info', 'leader election: acquired', { lease: name, previous: holder || undefined });
    this.leader = identity;
    return true;
  }

  private failed(err: unknown): false {
    this.log('warn', 'leader election: trying failed', { error: String(err) });
    return false;
  }
}
