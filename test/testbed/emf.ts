// The embedded metric format documents a piece of code writes to stdout, as CloudWatch would read them from the
// function's log. The test setup turns metric output off (test/quiet-metrics.js); here it is what is checked.
import { jest } from '@jest/globals';

export type Emf = Record<string, unknown> & {
  _aws: { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string; Unit: string }> }> };
};

export async function emfOf(run: () => unknown): Promise<Emf[]> {
  const lines: string[] = [];
  process.env.POWERTOOLS_METRICS_DISABLED = 'false';
  const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  try {
    await run();
  } finally {
    spy.mockRestore();
    process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  }
  return lines
    .flatMap((l) => l.split('\n'))
    .filter((l) => l.includes('"_aws"'))
    .map((l) => JSON.parse(l) as Emf);
}
