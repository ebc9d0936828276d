// Scheduled functions that speak for every cluster in one invocation (the heartbeat, the resyncs, the storage
// poll without a target of its own) run the clusters at once, each with its own time budget, so an apiserver that
// never answers spends only its own cluster's share (docs/operations/operating.md#one-cluster-cannot-stall-another).

/** Kept from the invocation's remaining time for what follows every cluster's work (results, metrics, the log). */
export const CLUSTER_RESERVE_MS = 3_000;
/** The part of a cluster's work time its Kubernetes requests may take: the rest is for its writes after them. */
export const REQUESTS_SHARE = 0.75;

export interface ClusterBudget {
  /** From the start: when the cluster's Kubernetes requests, and their retries, are cut off. */
  requestsMs: number;
  /** From the start: when the cluster's work is abandoned, whatever it waits for. */
  workMs: number;
}

/**
 * Each cluster's budget in an invocation with `remainingMs` left. The clusters run at once, so each may use all of
 * it but the reserve; its requests stop at a share of that (at most `requestsCapMs`), which leaves time to record
 * what the requests found (a heartbeat's last error, a resync's queued requests).
 */
export function clusterBudget(remainingMs: number, requestsCapMs = Number.POSITIVE_INFINITY): ClusterBudget {
  const workMs = Math.max(0, Math.floor(remainingMs - CLUSTER_RESERVE_MS));
  return { workMs, requestsMs: Math.min(requestsCapMs, Math.floor(workMs * REQUESTS_SHARE)) };
}

export type ClusterOutcome<T> = { cluster: string; value: T; error?: undefined } | { cluster: string; value?: undefined; error: Error };

/** Why a deadline aborted: a KubeClient's request fails with this as its cause (ETIMEDOUT, as a socket's would). */
function budgetSpent(cluster: string, what: string, ms: number): Error {
  return Object.assign(new Error(`cluster ${cluster}: ${what} took its whole time budget (${ms} ms)`), { code: 'ETIMEDOUT' });
}

/**
 * Runs `work` for every cluster at once. Each gets a deadline for its Kubernetes requests (hand it to
 * KubeClient.within) and is abandoned at its work deadline; a failure or a hang is that cluster's outcome alone.
 * `onSettled` sees each outcome as it comes, so a cluster's results (its metrics) need not wait for the slowest.
 */
export async function eachCluster<T>(
  clusters: readonly string[],
  budget: ClusterBudget,
  work: (cluster: string, deadline: AbortSignal) => Promise<T>,
  onSettled: (outcome: ClusterOutcome<T>) => void = () => {},
): Promise<Array<ClusterOutcome<T>>> {
  return Promise.all(
    clusters.map(async (cluster) => {
      const requests = new AbortController();
      const timers: NodeJS.Timeout[] = [];
      const abandoned = new Promise<never>((_, reject) => {
        timers.push(
          setTimeout(() => requests.abort(budgetSpent(cluster, 'its Kubernetes requests', budget.requestsMs)), budget.requestsMs),
          setTimeout(() => reject(budgetSpent(cluster, 'its work', budget.workMs)), budget.workMs),
        );
      });
      let outcome: ClusterOutcome<T>;
      try {
        outcome = { cluster, value: await Promise.race([work(cluster, requests.signal), abandoned]) };
      } catch (err) {
        outcome = { cluster, error: err instanceof Error ? err : new Error(String(err)) };
      } finally {
        for (const t of timers) clearTimeout(t);
      }
      onSettled(outcome);
      return outcome;
    }),
  );
}

/** Throws, after every cluster had its turn, when any failed: the function's Errors metric counts the invocation. */
export function throwIfAnyFailed(what: string, outcomes: ReadonlyArray<ClusterOutcome<unknown>>): void {
  const failed = outcomes.filter((o) => o.error);
  if (failed.length === 0) return;
  throw new AggregateError(
    failed.map((o) => o.error),
    `${what}: ${failed.map((o) => `cluster ${o.cluster}: ${o.error?.message ?? ''}`).join('; ')}`,
  );
}
