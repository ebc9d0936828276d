// The parent's Synced condition after a pass (shared/map/plan/status.ts): which case wins, and what it says.
import { AFTER_ALL_KEYS, syncedCondition, type PassSummary } from '../../shared/map/plan/index.ts';

const pass = (p: Partial<PassSummary> = {}): PassSummary => ({ inputs: 4, problems: [], deferred: [], ...p });
const problem = (n: number) => ({ what: `ConfigMap ns/c${n}`, reason: 'HookFailed', message: `failed ${n}` });

describe('syncedCondition', () => {
  test('a clean pass: Synced, with the inputs mapped', () => {
    expect(syncedCondition(pass(), false, undefined)).toEqual({
      type: 'Synced',
      status: 'True',
      reason: 'Synced',
      message: '4 input(s) mapped',
    });
  });

  test("this pass's problems win over everything, naming three and counting the rest, and what was deferred", () => {
    const c = syncedCondition(pass({ problems: [1, 2, 3, 4, 5].map(problem), deferred: ['a'], retryAfterSeconds: 30 }), true, {
      cursor: 'x',
      problems: 2,
      reason: 'Earlier',
    });
    expect(c).toEqual({
      type: 'Synced',
      status: 'False',
      reason: 'HookFailed',
      message:
        '5 problem(s), nothing deleted for them: ConfigMap ns/c1: failed 1; ConfigMap ns/c2: failed 2; ConfigMap ns/c3: failed 3; and 2 more; 1 input(s) not called yet: the hook asked to be called again after 30 s',
    });
  });

  test('a parent being deleted: Deleting, saying whether its finalize hook finished', () => {
    expect(syncedCondition(pass({ finalized: false }), true, undefined).message).toBe(
      'the parent is being deleted: its finalize hook has not finished',
    );
    expect(syncedCondition(pass(), true, { cursor: 'x', problems: 1, reason: 'E' })).toMatchObject({
      reason: 'Deleting',
      message: 'the parent is being deleted: status only',
    });
  });

  test("the earlier passes' problems, then deferred inputs (a detached group's turn not counted)", () => {
    expect(syncedCondition(pass(), false, { cursor: 'x', problems: 2, reason: 'HookRefused' })).toMatchObject({
      status: 'False',
      reason: 'HookRefused',
    });
    expect(syncedCondition(pass({ deferred: ['a', AFTER_ALL_KEYS] }), false, undefined)).toEqual({
      type: 'Synced',
      status: 'False',
      reason: 'InProgress',
      message: "3 of 4 input(s) mapped; 1 input(s) not reached within the pass's time budget, continued by a follow-up pass",
    });
  });
});
