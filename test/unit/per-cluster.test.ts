// Each cluster's time budget in a function that speaks for every cluster (shared/lambda/per-cluster.ts).
import fc from 'fast-check';
import { CLUSTER_RESERVE_MS, clusterBudget, eachCluster, throwIfAnyFailed, type ClusterOutcome } from '../../shared/lambda/per-cluster.ts';

describe('clusterBudget', () => {
  test('requests stop before the work, the work before the invocation less its reserve, and a cap caps the requests', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 900_000 }),
        fc.option(fc.integer({ min: 1, max: 60_000 }), { nil: undefined }),
        (remaining, cap) => {
          const b = clusterBudget(remaining, cap);
          expect(b.workMs).toBe(Math.max(0, remaining - CLUSTER_RESERVE_MS));
          expect(b.requestsMs).toBeLessThanOrEqual(b.workMs);
          if (cap !== undefined) expect(b.requestsMs).toBeLessThanOrEqual(cap);
        },
      ),
    );
    expect(clusterBudget(30_000, 10_000)).toEqual({ workMs: 27_000, requestsMs: 10_000 });
    expect(clusterBudget(60_000)).toEqual({ workMs: 57_000, requestsMs: 42_750 });
  });
});

describe('eachCluster', () => {
  test("a cluster that hangs is abandoned at its work deadline, after its requests' deadline; the others settle first", async () => {
    const settled: string[] = [];
    let aborted: unknown;
    const outcomes = await eachCluster(
      ['hole', 'a', 'b'],
      { requestsMs: 50, workMs: 150 },
      async (cluster, deadline) => {
        if (cluster !== 'hole') return cluster.toUpperCase();
        deadline.addEventListener('abort', () => (aborted = deadline.reason));
        return new Promise<string>(() => {});
      },
      (o) => settled.push(o.cluster),
    );
    expect(settled).toEqual(['a', 'b', 'hole']);
    expect(outcomes.map((o) => [o.cluster, o.value])).toEqual([
      ['hole', undefined],
      ['a', 'A'],
      ['b', 'B'],
    ]);
    expect(outcomes[0]?.error?.message).toBe('cluster hole: its work took its whole time budget (150 ms)');
    expect(aborted).toMatchObject({
      code: 'ETIMEDOUT',
      message: 'cluster hole: its Kubernetes requests took its whole time budget (50 ms)',
    });
  });

  test("a failure is its own cluster's; throwIfAnyFailed names only the failed clusters", async () => {
    const outcomes: Array<ClusterOutcome<number>> = await eachCluster(['a', 'b'], { requestsMs: 1_000, workMs: 1_000 }, async (c) => {
      if (c === 'a') throw new Error('Forbidden');
      return 1;
    });
    expect(outcomes[1]).toEqual({ cluster: 'b', value: 1 });
    expect(() => throwIfAnyFailed('resync', outcomes)).toThrow('resync: cluster a: Forbidden');
    expect(() => throwIfAnyFailed('resync', [outcomes[1]!])).not.toThrow();
  });
});
