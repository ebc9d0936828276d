// The storage leader step's hold on the cluster's leader lease (docs/design/storage-trigger.md#ha-and-the-leader).
import { LeaseLostError, type Lease } from '../../shared/state/index.ts';
import type { StorageContext } from './context.ts';

export const LEASE_TTL_MS = 60_000;
/** Stop acting with this much of the lease left: a Kubernetes write must land before a successor can act. */
const LEASE_MARGIN_MS = 20_000;

/**
 * The step's hold on the leader lease: renewed once half of it is gone, so a long step (a first sight of
 * thousands of resources) keeps it; once it is lost, nothing more is written and the states not yet looked at
 * are left to the next holder.
 */
export class Hold {
  lease: Lease;
  lost = false;
  private readonly ctx: StorageContext;
  private renewal: Promise<void> | undefined;

  constructor(ctx: StorageContext, lease: Lease) {
    this.ctx = ctx;
    this.lease = lease;
  }

  /** Before each write: the lease to fence it on; LeaseLostError once it is lost or too near its end. */
  async check(): Promise<Lease> {
    const leases = this.ctx.state.leases;
    if (!this.lost && !leases.stillHeld(this.lease, LEASE_TTL_MS / 2)) {
      // One renewal for all the states in flight.
      this.renewal ??= leases
        .renew(this.lease, LEASE_TTL_MS)
        .then((renewed) => {
          if (renewed) this.lease = renewed;
          else this.lost = true;
        })
        .finally(() => {
          this.renewal = undefined;
        });
      await this.renewal;
    }
    if (this.lost || !leases.stillHeld(this.lease, LEASE_MARGIN_MS)) {
      this.lost = true;
      throw new LeaseLostError(this.lease.name, this.lease.term);
    }
    return this.lease;
  }
}
