// Reading ElasticMQ's queues as the tests of queue consumers need: every message, and a message as the record a
// Lambda event source mapping would hand over.
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { messageGroupId, type Envelope } from '../../shared/envelope/index.ts';

/**
 * Every message on a queue, deleted as received (a FIFO group's next messages come only once those before are
 * gone); waits up to 20 s while fewer than `expected` have come.
 */
export async function drain(sqs: SQSClient, url: string, expected = 0): Promise<Message[]> {
  const out: Message[] = [];
  for (let empty = 0; empty < (out.length >= expected ? 1 : 20);) {
    const got = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: out.length >= expected ? 0 : 1,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    if (!got.Messages?.length) {
      empty += 1;
      continue;
    }
    out.push(...got.Messages);
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: got.Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
  return out;
}

/** The record Lambda would make of a message received from the queue `arn`. */
export function asRecord(m: Message, arn: string): SQSRecord {
  const a = m.Attributes ?? {};
  return {
    messageId: m.MessageId!,
    receiptHandle: m.ReceiptHandle!,
    body: m.Body ?? '',
    attributes: {
      ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
      SentTimestamp: a.SentTimestamp ?? '0',
      SenderId: a.SenderId ?? '',
      ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? '0',
      MessageGroupId: a.MessageGroupId!,
      MessageDeduplicationId: a.MessageDeduplicationId!,
    },
    messageAttributes: {},
    md5OfBody: m.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: arn,
    awsRegion: 'local',
  };
}

/** The record of one envelope from cluster `it`'s events queue, as the router is handed it. */
export function envelopeRecord(envelope: Envelope, id = 'm0'): SQSRecord {
  return asRecord(
    {
      MessageId: id,
      ReceiptHandle: id,
      Body: JSON.stringify(envelope),
      Attributes: { MessageGroupId: messageGroupId(envelope), MessageDeduplicationId: id },
    },
    'arn:aws:sqs:local:000000000000:it-events.fifo',
  );
}
