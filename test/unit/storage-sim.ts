// An in-memory cluster for the trigger's pure decisions: one StorageState, its migrations, reporters that poll
// on a simulated clock, and a leader applying each decision as the shell would. Used by the walkthrough replay
// and the property test; the shell itself is tested against the real apiserver and DynamoDB Local.
import { decide, report, UNKNOWN, type Decision, type MigrationView, type StorageState } from '../../shared/storage/index.ts';

export const PERIOD = 10 * 60_000;

export class Sim {
  state: StorageState;
  migrations: MigrationView[] = [];
  epoch = 0;
  readonly actions: Decision[] = [];
  private seq = 0;
  readonly reporters: string[];

  constructor(reporters: string[], initial?: { hash: string; at: Date }) {
    this.reporters = reporters;
    this.state = {
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageState',
      metadata: { name: 'widgets.example.com', uid: 'uid-1' },
      spec: { resource: { group: 'example.com', resource: 'widgets' } },
      ...(initial
        ? {
            status: {
              persistedStorageVersionHashes: [initial.hash],
              currentStorageVersionHashes: reporters.map((r) => ({
                reporterID: r,
                currentStorageVersionHash: initial.hash,
                lastHeartbeatTime: initial.at.toISOString(),
              })),
            },
          }
        : {}),
    };
  }

  /** Each reporter's last successful poll, as DynamoDB records it (docs/operations/operating.md#a-missed-poll). */
  readonly lastPolls: Record<string, Date> = {};

  /**
   * One reporter's poll that saw `hash` for the resource. With `recorded`, the poll is recorded as successful and
   * judged from the reporter's last one, as the shell does; without, as before that record was kept.
   */
  poll(reporter: string, hash: string, now: Date, opts: { recorded?: boolean } = {}): void {
    const lastPoll = opts.recorded ? this.lastPolls[reporter] : undefined;
    const r = report(this.state.status, { reporter, hash, now, lastPoll }, PERIOD);
    if (r.change === 'created' || r.change === 'hash') this.epoch += 1;
    this.state = { ...this.state, status: r.status };
    if (opts.recorded) this.lastPolls[reporter] = now;
  }

  /** A poll whose discovery of the resource's group version failed: recorded, but no entry written (M4). */
  pollWithoutResource(reporter: string, now: Date): void {
    this.lastPolls[reporter] = now;
  }

  /** The leader's pass (with a sampled control plane's generation and stability); returns the decision it acted on. */
  lead(now: Date, controlPlane?: { generation: number; unstable?: string | undefined }): Decision {
    const d = decide({
      state: this.state,
      reporters: this.reporters,
      migrations: this.migrations,
      epoch: this.epoch,
      now,
      periodMs: PERIOD,
      controlPlane,
    });
    this.actions.push(d);
    if (d.action === 'cancel' || d.action === 'create') {
      const gone = new Set(d.cancel.map((m) => m.uid));
      this.migrations = this.migrations.filter((m) => !gone.has(m.uid));
    }
    if (d.action === 'create') {
      this.seq += 1;
      this.migrations.push({
        name: `m${this.seq}`,
        uid: `m${this.seq}`,
        owned: true,
        hash: d.hash,
        epoch: d.epoch,
        phase: 'Pending',
        controlPlaneGeneration: d.controlPlaneGeneration,
      });
    }
    if (d.action === 'narrow') this.state = { ...this.state, status: { ...this.state.status, persistedStorageVersionHashes: [d.hash] } };
    return d;
  }

  /** The migrator finishing the newest pending migration. */
  complete(now: Date, phase: 'Succeeded' | 'Failed' = 'Succeeded'): MigrationView | undefined {
    const m = this.migrations.find((x) => x.phase === 'Pending' || x.phase === 'Running');
    if (m) Object.assign(m, { phase, phaseTime: now.toISOString() });
    return m;
  }

  current(): string[] {
    return (this.state.status?.currentStorageVersionHashes ?? []).map((e) => e.currentStorageVersionHash);
  }

  persisted(): string[] {
    return this.state.status?.persistedStorageVersionHashes ?? [UNKNOWN];
  }
}

export const minute = (m: number) => new Date(Date.UTC(2026, 0, 1, 0, m));
