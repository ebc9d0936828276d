// The shape every event-driven handler shares: an SQS batch of envelopes in, a partial batch response out.
// - A malformed envelope goes to the dead-letter sink with the reason and counts as handled: retrying it
//   cannot help, and it must not hold up the messages behind it.
// - A processing failure is reported for that message only; SQS redelivers it, and after the queue's
//   maxReceiveCount moves it to the dead-letter queue. On a FIFO queue the rest of that message group waits
//   (order within an object is kept) while other groups, other objects and other clusters, go on.
import { SqsFifoPartialProcessorAsync, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { EnvelopeError, parseEnvelope, type Envelope } from '../envelope/index.ts';
import type { DeadLetterSink } from './dead-letter.ts';

export type EnvelopeProcessor = (envelope: Envelope, record: SQSRecord) => Promise<void>;

export interface EnvelopeBatchOptions {
  /** Does the work for one envelope. Throw to have the message retried. */
  process: EnvelopeProcessor;
  deadLetter: () => DeadLetterSink;
  /** Names this consumer in dead letters. */
  source: string;
  log?: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
}

export function envelopeBatchHandler(opts: EnvelopeBatchOptions): (event: SQSEvent) => Promise<SQSBatchResponse> {
  const log = opts.log ?? (() => {});
  const recordHandler = async (record: SQSRecord): Promise<void> => {
    let envelope: Envelope;
    try {
      envelope = parseEnvelope(record.body);
    } catch (err) {
      if (!(err instanceof EnvelopeError)) throw err;
      log('warn', 'malformed event sent to the dead-letter queue', { messageId: record.messageId, reason: err.message });
      await opts.deadLetter().send({ body: record.body, reason: err.message, source: opts.source });
      return;
    }
    try {
      await opts.process(envelope, record);
    } catch (err) {
      log('error', 'event processing failed; it will be retried', { messageId: record.messageId, id: envelope.id, error: String(err) });
      throw err;
    }
  };
  return async (event: SQSEvent) =>
    processPartialResponse(event, recordHandler, new SqsFifoPartialProcessorAsync(), {
      skipGroupOnError: true,
      throwOnFullBatchFailure: false,
    });
}
