// A dead letter is one SQS message: its body and its attributes together within SQS's 262,144 bytes, whatever the
// refused text holds. (ElasticMQ counts only the body, so this is checked on the message the sink builds.)
import type { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import fc from 'fast-check';
import { SqsDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import { MAX_MESSAGE_BYTES } from '../../shared/validation.ts';

/** The message the sink sends, as SQS sizes it: the body, and each attribute's name, data type and value. */
async function sent(letter: { body: string; reason: string; source: string }): Promise<{ bytes: number; reason: string }> {
  let input: SendMessageCommand['input'] | undefined;
  const client = { send: async (command: SendMessageCommand) => void (input = command.input) } as unknown as SQSClient;
  await new SqsDeadLetterSink('http://localhost/000000000000/dlq.fifo', client).send(letter);
  const attributes = Object.entries(input!.MessageAttributes ?? {});
  const bytes =
    Buffer.byteLength(input!.MessageBody ?? '') +
    attributes.reduce(
      (n, [name, a]) => n + Buffer.byteLength(name) + Buffer.byteLength(a.DataType ?? '') + Buffer.byteLength(a.StringValue ?? ''),
      0,
    );
  return { bytes, reason: input!.MessageAttributes?.reason?.StringValue ?? '' };
}

/** Characters SQS refuses (escaped to six bytes each), and ones it takes, of one to four bytes. */
const char = fc.constantFrom('\u0001', '\u001f', '\uFFFF', '\uD800', 'a', 'é', '€', '😀');
/** Runs of one character, so that a text may be all escapes or none. */
const text = (runs: number) =>
  fc.array(fc.tuple(char, fc.integer({ min: 1, max: 1500 })), { maxLength: runs }).map((rs) => rs.map(([c, n]) => c.repeat(n)).join(''));

describe('a dead letter', () => {
  test('whose reason is all characters SQS refuses, beside a body over the limit, fits in one message', async () => {
    // The audit's case: the reason was cut to 1,000 characters and then escaped, to 6,000 bytes.
    const { bytes, reason } = await sent({
      body: 'x'.repeat(300 * 1024),
      reason: `data: unknown key ${'\u0001'.repeat(2000)}`,
      source: 'router',
    });
    expect(bytes).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    expect(reason).toMatch(/^data: unknown key (\\u0001)+/);
  });

  test('of any body and reason fits in one message, and its reason holds only characters SQS takes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(text(3), fc.integer({ min: 0, max: 300 * 1024 }), fc.constantFrom('x', '\u0001', 'é')),
        text(4),
        async ([head, n, fill], reason) => {
          const out = await sent({ body: head + fill.repeat(n), reason, source: 'router' });
          expect(out.bytes).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
          expect(out.reason).not.toMatch(
            /[\u0000-\u0008\u000b\u000c\u000e-\u001f\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/,
          );
        },
      ),
      { numRuns: 60 },
    );
  });
});
