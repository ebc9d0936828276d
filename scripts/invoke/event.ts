// The event invoke hands the handler: read from a file or stdin, its SQS records stamped as just sent if asked.
import { readFile } from 'node:fs/promises';
import { UsageError } from './args.ts';

export async function readEvent(path: string): Promise<unknown> {
  let text: string;
  if (path === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read the event file ${path}: ${(err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`the event in ${path === '-' ? 'stdin' : path} is not JSON: ${(err as Error).message}`);
  }
}

/** Marks SQS records as just sent, as a fresh delivery would be. */
export function stampNow(event: unknown): unknown {
  const records = (event as { Records?: Array<{ eventSource?: string; attributes?: Record<string, string> }> }).Records;
  if (!Array.isArray(records)) return event;
  const now = String(Date.now());
  for (const r of records) {
    if (r.eventSource === 'aws:sqs' && r.attributes)
      Object.assign(r.attributes, { SentTimestamp: now, ApproximateFirstReceiveTimestamp: now });
  }
  return event;
}
