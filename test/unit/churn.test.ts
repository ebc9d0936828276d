// The churn generator's schedules (bench/churn.ts): changes evenly spread at the rate asked, pods spread over
// their parents, turns taken round robin.
import fc from 'fast-check';
import { dueBy, replicasOf, target } from '../../bench/churn.ts';

describe('churn schedule', () => {
  test('is due the rate times the minutes elapsed, never more, and never goes back', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 0, max: 3_600_000 }),
        fc.integer({ min: 0, max: 60_000 }),
        (rate, t, dt) => {
          const due = dueBy(rate, t);
          expect(due).toBeLessThanOrEqual((rate * t) / 60_000);
          expect(due).toBeGreaterThan((rate * t) / 60_000 - 1);
          expect(dueBy(rate, t + dt)).toBeGreaterThanOrEqual(due);
        },
      ),
    );
    expect(dueBy(600, 60_000)).toBe(600);
    expect(dueBy(10, 5_999)).toBe(0);
    expect(dueBy(10, 6_000)).toBe(1);
    expect(dueBy(10, -1)).toBe(0);
  });

  test('spreads M pods over K parents, differing by at most one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 1, max: 500 }), (pods, parents) => {
        const replicas = replicasOf(pods, parents);
        expect(replicas).toHaveLength(parents);
        expect(replicas.reduce((a, b) => a + b, 0)).toBe(pods);
        expect(Math.max(...replicas) - Math.min(...replicas)).toBeLessThanOrEqual(1);
      }),
    );
    expect(replicasOf(30, 0)).toEqual([]);
  });

  test('takes turns round robin: every one of `count` once in each `count` changes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 0, max: 1_000 }), (count, start) => {
        const turns = Array.from({ length: count }, (_, i) => target(start + i, count));
        expect(new Set(turns).size).toBe(count);
      }),
    );
  });
});
