// A batch of sync requests within its invocation (shared/lambda/sync-function.ts): a record is started only while
// enough of the invocation is left to finish it; the rest are held back, not failed, so the records done are
// kept and the others come back at once rather than after the whole batch times out (L10 in docs/operations/security.md#the-2026-11-26-reviews-findings-and-where-each-stands).
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { lambdaContext } from '../../runtime/lambda-context.ts';
import { Clusters } from '../../shared/clusters.ts';
import type { Environment } from '../../shared/lambda/environment.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { RECORD_START_MIN_MS, syncFunction } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import type { State } from '../../shared/state/index.ts';

const record = (name: string): SQSRecord => ({
  messageId: `m-${name}`,
  receiptHandle: `r-${name}`,
  body: JSON.stringify(
    makeSyncRequest({ cluster: 'a', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name, uid: `u-${name}` }, ['test']),
  ),
  attributes: {
    ApproximateReceiveCount: '1',
    SentTimestamp: '0',
    SenderId: '',
    ApproximateFirstReceiveTimestamp: '0',
    MessageGroupId: `g-${name}`,
    MessageDeduplicationId: `d-${name}`,
  },
  messageAttributes: {},
  md5OfBody: '',
  eventSource: 'aws:sqs',
  eventSourceARN: 'arn:aws:sqs:local:000000000000:q.fifo',
  awsRegion: 'local',
});

describe('a batch of sync requests within its invocation', () => {
  test('records are started while enough time is left; the rest are held back, not failed, and not run', async () => {
    let remaining = 2 * RECORD_START_MIN_MS + 1_000;
    const context: Context = { ...lambdaContext({ name: 'test', timeoutSeconds: 60 }), getRemainingTimeInMillis: () => remaining };
    const env: Environment = {
      clusters: new Clusters([]),
      state: {} as State,
      deadLetter: new MemoryDeadLetterSink(),
      syncSink: { send: async () => {} },
    };
    const ran: string[] = [];
    const handler = syncFunction(
      'test',
      async ({ key }) => {
        ran.push(key.name);
        // Each record takes the minimum a record is started with.
        remaining -= RECORD_START_MIN_MS;
      },
      { environment: () => env, recordStartMinMs: RECORD_START_MIN_MS },
    );
    const event: SQSEvent = { Records: ['one', 'two', 'three', 'four'].map(record) };
    const response = (await handler(event, context)) as { batchItemFailures: Array<{ itemIdentifier: string }> };
    // One starts with twice the minimum and a second left, two with the minimum and a second, three with a second.
    expect(ran).toEqual(['one', 'two']);
    expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(['m-three', 'm-four']);
  });
});
