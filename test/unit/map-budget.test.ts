// A pass fits its invocation, and a failing parent is retried with backoff
// (docs/design/map-pass.md#a-pass-fits-its-invocation; the webhook contract's Retry-After): the pure decisions.
import type { SQSRecord } from 'aws-lambda';
import fc from 'fast-check';
import { MAX_RECEIVE_COUNT } from '../../infra/stack.ts';
import { LocalQueue } from '../../runtime/queue.ts';
import { lambdaRetryAfter } from '../../shared/hooks/index.ts';
import { syncBatchHandler } from '../../shared/lambda/batch.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { askedDelay, RETRY_MAX_SECONDS, RetryLater } from '../../shared/lambda/retry.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import {
  callFits,
  continuationCause,
  continuationOf,
  PASS_RESERVE_MS,
  passBudgetMs,
  passOutcome,
  type Continuation,
} from '../../shared/map/plan/index.ts';
import { RETRY_RECEIVES } from '../../shared/metacontroller/problems.ts';

describe('the time budget of a pass', () => {
  test('property: records of a batch that each use their budget and the reserve never outrun the invocation, and each gets at least an equal share', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 900_000 }), fc.integer({ min: 1, max: 10 }), (remaining, records) => {
        let left = remaining;
        for (let i = 0; i < records; i += 1) {
          const later = records - 1 - i;
          const budget = passBudgetMs(left, later);
          expect(budget).toBeGreaterThanOrEqual(0);
          expect(budget).toBeGreaterThanOrEqual(Math.max(0, left - PASS_RESERVE_MS) / (later + 1) - 1e-6);
          if (left >= PASS_RESERVE_MS) {
            left -= budget + PASS_RESERVE_MS;
            expect(left).toBeGreaterThanOrEqual(-1e-6);
          }
        }
      }),
    );
  });
  test('the map function (300 s) gives the first of ten records 205 s, a lone record 295 s', () => {
    expect(passBudgetMs(300_000, 9)).toBe(205_000);
    expect(passBudgetMs(300_000, 0)).toBe(295_000);
    expect(passBudgetMs(20_000, 1)).toBe(7_500);
  });
  test('a call starts while one attempt fits, or half the budget is left for a hook slower than that', () => {
    expect(callFits(10_000, 10_000, 200_000)).toBe(true);
    expect(callFits(9_999, 10_000, 200_000)).toBe(false);
    expect(callFits(5_000, 30_000, 10_000)).toBe(true);
    expect(callFits(4_999, 30_000, 10_000)).toBe(false);
    expect(callFits(0, 1, 0)).toBe(false);
  });
});

describe('follow-ups and retries', () => {
  const uid = fc.uuid();
  test('property: a continuation survives its cause, whatever the reason', () => {
    fc.assert(
      fc.property(
        uid,
        fc.nat(),
        fc.constantFrom('', 'HookTimeout', 'HookHTTPError', 'WriteFailed'),
        fc.string({ minLength: 1, maxLength: 20 }).filter((s) => !s.includes('/')),
        (cursor, problems, reason, nonce) => {
          const c: Continuation = { cursor, problems, reason };
          expect(continuationOf(['ConfigMap/x', continuationCause(c, nonce)])).toEqual(c);
        },
      ),
    );
    expect(continuationOf(['resync/60/1', 'ConfigMap/it/u/1/MODIFIED'])).toBeUndefined();
  });
  const p = (reason: string) => ({ reason });
  test.each([
    ['nothing left, no problem', { deferred: [], problems: [] }, { kind: 'done' }],
    [
      'inputs left: a follow-up from the first key left',
      { deferred: ['c', 'a', 'b'], problems: [p('HookTimeout')] },
      { kind: 'continue', continuation: { cursor: 'a', problems: 1, reason: 'HookTimeout' } },
    ],
    [
      'a problem: the message is retried with its backoff',
      { deferred: [], problems: [p('HookTimeout')] },
      { kind: 'retry', afterSeconds: undefined, reason: 'HookTimeout' },
    ],
    [
      'a Retry-After: retried after it, not continued at once',
      { deferred: ['a'], problems: [p('HookHTTPError')], retryAfterSeconds: 3 },
      { kind: 'retry', afterSeconds: 3, reason: 'HookHTTPError' },
    ],
    ['only what a retry cannot cure: done', { deferred: [], problems: [p('InvalidSelector')] }, { kind: 'done' }],
    [
      'earlier passes of the sync had problems: retried',
      { deferred: [], problems: [], earlier: { cursor: 'a', problems: 2, reason: 'HookTimeout' } },
      { kind: 'retry', afterSeconds: undefined, reason: 'HookTimeout' },
    ],
    [
      'still failing after its retries: given up (consumed)',
      { deferred: [], problems: [p('HookTimeout')], receiveCount: RETRY_RECEIVES },
      { kind: 'give-up', reason: 'HookTimeout' },
    ],
  ])('%s', (_name, pass, outcome) => {
    expect(passOutcome({ retryAfterSeconds: undefined, earlier: undefined, receiveCount: 1, ...pass })).toEqual(outcome);
  });
  test("a failing parent gives up before the queue's maxReceiveCount, so it never reaches the dead-letter queue", () => {
    expect(RETRY_RECEIVES).toBeLessThan(MAX_RECEIVE_COUNT);
  });
  test('an asked delay is at least 1 s and at most the backoff cap', () => {
    expect([askedDelay(undefined), askedDelay(0), askedDelay(2.2), askedDelay(3), askedDelay(86_400), askedDelay(Number.NaN)]).toEqual([
      undefined,
      1,
      3,
      3,
      RETRY_MAX_SECONDS,
      undefined,
    ]);
  });
  test("a Lambda hook's Retry-After is {retryAfterSeconds} with no outputs", () => {
    expect(
      [
        { retryAfterSeconds: 3 },
        { retryAfterSeconds: 2.5 },
        { retryAfterSeconds: 3, outputs: [] },
        { retryAfterSeconds: -1 },
        { retryAfterSeconds: '3' },
        null,
        [3],
      ].map(lambdaRetryAfter),
    ).toEqual([3, 3, undefined, undefined, undefined, undefined, undefined]);
  });
  test('the batch hands the delay a record asked for (RetryLater) to the retry; other failures get none', async () => {
    const record = (id: string, group: string): SQSRecord => ({
      messageId: id,
      receiptHandle: id,
      body: JSON.stringify(makeSyncRequest({ cluster: 'c1', group: 'g', kind: 'K', namespace: 'ns', name: id, uid: `${id}-uid` }, [])),
      attributes: {
        ApproximateReceiveCount: '1',
        SentTimestamp: '0',
        SenderId: '',
        ApproximateFirstReceiveTimestamp: '0',
        MessageGroupId: group,
        MessageDeduplicationId: id,
      },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:local:000000000000:q.fifo',
      awsRegion: 'local',
    });
    const seen: Array<{ ids: string[]; asked: Array<[string, number]> }> = [];
    const handler = syncBatchHandler({
      source: 'map',
      deadLetter: () => new MemoryDeadLetterSink(),
      retry: async (records, asked) =>
        void seen.push({ ids: records.map((r) => r.messageId), asked: [...(asked ?? new Map<string, number>())] }),
      process: async (request) => {
        if (request.key.name === 'later') throw new RetryLater('the hook asked', 3);
        if (request.key.name === 'huge') throw new RetryLater('the hook asked', 86_400);
        if (request.key.name === 'broken') throw new Error('the apiserver is away');
      },
    });
    const response = await handler({ Records: [record('later', 'a'), record('fine', 'b'), record('broken', 'c'), record('huge', 'd')] });
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['broken', 'huge', 'later']);
    expect(seen).toEqual([
      {
        ids: ['later', 'broken', 'huge'],
        asked: [
          ['later', 3],
          ['huge', RETRY_MAX_SECONDS],
        ],
      },
    ]);
  });
  test("the local runtime's queue honours an asked delay too: 1 s, where its own backoff would be 60 ms", async () => {
    const at: number[] = [];
    const local: { queue?: LocalQueue } = {};
    const handler = syncBatchHandler({
      source: 'map',
      deadLetter: () => new MemoryDeadLetterSink(),
      retry: async (records, asked) => local.queue!.retry()(records, asked),
      process: async () => {
        at.push(performance.now());
        if (at.length === 1) throw new RetryLater('the hook asked', 1);
      },
    });
    const queue = new LocalQueue({ name: 'map', retryDelayMs: 60, deadLetter: new MemoryDeadLetterSink(), deliver: handler });
    local.queue = queue;
    await queue.enqueue(
      JSON.stringify(makeSyncRequest({ cluster: 'c1', group: 'g', kind: 'K', namespace: 'ns', name: 'p', uid: 'p-uid' }, [])),
      'g',
      'd1',
    );
    await queue.idle();
    await queue.stop();
    expect(at).toHaveLength(2);
    // Not before the asked second (its own backoff would have redelivered after 60 ms); no upper bound: a busy
    // machine delays any timer.
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(995);
  });
});
