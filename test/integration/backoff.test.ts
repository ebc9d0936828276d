// A failed message on a real queue (ElasticMQ) comes back after its backoff (2 s, then 4 s), not after the queue's
// visibility timeout (60 s here).
import { CreateQueueCommand, ReceiveMessageCommand, SendMessageCommand, type Message } from '@aws-sdk/client-sqs';
import { syncBatchHandler } from '../../shared/lambda/batch.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { QueueUrls } from '../../shared/lambda/queues.ts';
import { sqsRetry } from '../../shared/lambda/retry.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { testQueue, uniqueName } from '../testbed/index.ts';
import { asRecord } from './sqs-records.ts';

describe('backoff', () => {
  test("a failed sync request is seen again after 2 s, then after 4 s, not after the queue's 60 s visibility timeout", async () => {
    const { sqs, url } = await testQueue('backoff');
    const queues = new QueueUrls(`${url.slice(0, url.lastIndexOf('/') + 1)}${uniqueName('bo')}-`);
    const queueUrl = (
      await sqs.send(
        new CreateQueueCommand({ QueueName: queues.name('c1', 'history'), Attributes: { FifoQueue: 'true', VisibilityTimeout: '60' } }),
      )
    ).QueueUrl!;
    const arn = `arn:aws:sqs:elasticmq:000000000000:${queues.name('c1', 'history')}`;
    const request = makeSyncRequest(
      { cluster: 'c1', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name: 'web', uid: '5f0c7d2e-3b1a-4c9e-8f6d-2a7b9c1e4d30' },
      [],
    );
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: JSON.stringify(request),
        MessageGroupId: 'g',
        MessageDeduplicationId: 'd',
      }),
    );
    const handler = syncBatchHandler({
      source: 'history',
      deadLetter: () => new MemoryDeadLetterSink(),
      retry: sqsRetry(queues, sqs),
      process: async () => {
        throw new Error('the apiserver is away');
      },
    });
    const receive = async (): Promise<{ message: Message; at: number }> => {
      for (const deadline = Date.now() + 15_000; Date.now() < deadline;) {
        const got = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 1,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['All'],
          }),
        );
        if (got.Messages?.[0]) return { message: got.Messages[0], at: Date.now() };
      }
      throw new Error('the failed message did not come back within 15 s');
    };
    let last = await receive();
    const gaps: number[] = [];
    for (const count of ['1', '2']) {
      expect(last.message.Attributes?.ApproximateReceiveCount).toBe(count);
      const failedAt = Date.now();
      expect(await handler({ Records: [asRecord(last.message, arn)] })).toEqual({
        batchItemFailures: [{ itemIdentifier: last.message.MessageId }],
      });
      last = await receive();
      gaps.push((last.at - failedAt) / 1000);
    }
    // ElasticMQ answers a long poll within its wait, so each is seen within a second of its delay.
    expect(gaps.map((g, i) => g >= 2 * 2 ** i - 0.5 && g < 2 * 2 ** i + 1.5)).toEqual([true, true]);
  }, 60_000);
});
