// The local queue keeps SQS FIFO's contract, so that handlers behave the same locally and in AWS.
import fc from 'fast-check';
import type { SQSEvent } from 'aws-lambda';
import { LocalQueue } from '../../runtime/queue.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';

describe('LocalQueue', () => {
  test('delivers every message once, in order within its group, in batches of at most 10, despite failures', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.boolean()), { minLength: 1, maxLength: 60 }),
        async (messages) => {
          const delivered: Array<{ group: string; seq: number }> = [];
          const failOnce = new Set(messages.flatMap(([, fail], i) => (fail ? [String(i)] : [])));
          let biggestBatch = 0;
          const queue = new LocalQueue({
            name: 'p',
            retryDelayMs: 0,
            deadLetter: new MemoryDeadLetterSink(),
            deliver: async (event: SQSEvent) => {
              biggestBatch = Math.max(biggestBatch, event.Records.length);
              const failures: Array<{ itemIdentifier: string }> = [];
              for (const r of event.Records) {
                const { group, seq } = JSON.parse(r.body) as { group: string; seq: number };
                // As the FIFO batch processor does: after a failure, the rest of that group fails too.
                if (
                  failures.length > 0 &&
                  event.Records.some((x) => failures.some((f) => f.itemIdentifier === x.messageId) && x.attributes.MessageGroupId === group)
                ) {
                  failures.push({ itemIdentifier: r.messageId });
                  continue;
                }
                if (failOnce.delete(String(seq))) failures.push({ itemIdentifier: r.messageId });
                else delivered.push({ group, seq });
              }
              return { batchItemFailures: failures };
            },
          });
          for (const [i, [group]] of messages.entries()) await queue.enqueue(JSON.stringify({ group, seq: i }), group, `m-${i}`);
          await queue.idle();
          await queue.stop();
          expect(delivered.map((d) => d.seq).sort((x, y) => x - y)).toEqual(messages.map((_, i) => i));
          for (const g of ['a', 'b', 'c', 'd']) {
            const seqs = delivered.filter((d) => d.group === g).map((d) => d.seq);
            expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
          }
          expect(biggestBatch).toBeLessThanOrEqual(10);
        },
      ),
      { numRuns: 50 },
    );
  });

  test('brings a failed message back as a workqueue does, after a delay that doubles with each failure', async () => {
    const at: number[] = [];
    const queue = new LocalQueue({
      name: 'b',
      retryDelayMs: 60,
      maxReceiveCount: 4,
      deadLetter: new MemoryDeadLetterSink(),
      deliver: async (event) => {
        at.push(performance.now());
        return { batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })) };
      },
    });
    await queue.enqueue('{}', 'g', 'd1');
    await queue.idle();
    await queue.stop();
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    // At least 60, 120 and 240 ms (timers fire no earlier than asked); a linear backoff would make the last 180.
    // No upper bound: a busy machine fires timers late, and the delays themselves are retryDelay's, tested below.
    expect(gaps.map((g, i) => g >= 60 * 2 ** i - 5)).toEqual([true, true, true]);
  });

  test('the delays of the deployed functions: 2 s doubling to at most 10 minutes', async () => {
    const { retryDelay } = await import('../../shared/lambda/retry.ts');
    expect([1, 2, 3, 4, 5, 9, 10, 1000].map((n) => retryDelay(n))).toEqual([2, 4, 8, 16, 32, 512, 600, 600]);
    expect(retryDelay(Number('x'))).toBe(2);
  });

  test('dead-letters a message after maxReceiveCount failed receives, with the reason', async () => {
    const deadLetter = new MemoryDeadLetterSink();
    let calls = 0;
    const queue = new LocalQueue({
      name: 'q',
      retryDelayMs: 0,
      maxReceiveCount: 3,
      deadLetter,
      deliver: async () => {
        calls += 1;
        throw new Error('boom');
      },
    });
    await queue.enqueue('{}', 'g', 'd1');
    await queue.idle();
    await queue.stop();
    expect(calls).toBe(3);
    expect(deadLetter.letters).toEqual([
      expect.objectContaining({ body: '{}', source: 'q', reason: 'received 3 times without success; last: the handler threw: boom' }),
    ]);
  });

  test('makes producers wait while full instead of growing without bound', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let maxDepth = 0;
    const queue = new LocalQueue({
      name: 'b',
      capacity: 20,
      deadLetter: new MemoryDeadLetterSink(),
      deliver: async () => {
        await gate;
      },
    });
    const producing = (async () => {
      for (let i = 0; i < 200; i += 1) {
        await queue.enqueue('{}', `g${i % 7}`, `id-${i}`);
        maxDepth = Math.max(maxDepth, queue.depth);
      }
    })();
    await new Promise((r) => setTimeout(r, 50));
    expect(queue.depth).toBeLessThanOrEqual(20);
    release();
    await producing;
    await queue.idle();
    await queue.stop();
    expect(maxDepth).toBeLessThanOrEqual(20);
    expect(queue.stats.delivered).toBe(200);
  });
});
