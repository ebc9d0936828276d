// How big a dead letter may be, and how one too big is cut: pure, so the ingest plan (shared/ingest) and the
// dead-letter sinks (shared/lambda/dead-letter.ts) share it.
import { MAX_MESSAGE_BYTES } from './validation.ts';

/** Room left in a dead letter for its reason and source attributes (SQS counts them in the message size). */
export const DEAD_LETTER_BODY_BYTES = MAX_MESSAGE_BYTES - 4096;

/** A dead letter that fits in an SQS message: a body over the limit is cut (on a character boundary), and the reason says so. */
export function fitDeadLetter<T extends { body: string; reason: string }>(letter: T): T {
  const bytes = Buffer.from(letter.body, 'utf8');
  if (bytes.length <= DEAD_LETTER_BODY_BYTES) return letter;
  // A streaming decode holds back a multi-byte character cut in half instead of emitting a replacement.
  const body = new TextDecoder().decode(bytes.subarray(0, DEAD_LETTER_BODY_BYTES), { stream: true });
  return {
    ...letter,
    body,
    reason: `${letter.reason.slice(0, 900)} [the dead letter holds the first ${Buffer.byteLength(body)} of ${bytes.length} bytes]`,
  };
}
