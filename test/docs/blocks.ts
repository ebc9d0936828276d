// The runnable blocks of a Markdown page (docs/contributing/conventions.md#runnable-blocks): a `sh` fence right
// after `<!-- runs: NAME -->` is run, in page order with the page's other blocks of that NAME, and a `text` fence
// right after `<!-- output -->` that follows it is what it must print. Pure: the runner is the test that uses it.

export interface RunnableBlock {
  /** The NAME of `<!-- runs: NAME -->`: the blocks of one name run in order, in one environment. */
  sequence: string;
  script: string;
  /** What the block must print on stdout, if the page shows it. */
  output?: string;
  /** 1-based line of the marker, for messages. */
  line: number;
}

const RUNS = /^<!-- runs: ([a-z0-9-]+) -->$/;
const OUTPUT = '<!-- output -->';

/** The fence starting at `lines[i]` (after blank lines): its info string, body and the line after it. */
function fenceAt(lines: string[], i: number): { info: string; body: string; next: number } | undefined {
  while (i < lines.length && lines[i]!.trim() === '') i++;
  const open = /^```(\S*)\s*$/.exec(lines[i] ?? '');
  if (!open) return undefined;
  const end = lines.indexOf('```', i + 1);
  if (end < 0) return undefined;
  return { info: open[1]!, body: lines.slice(i + 1, end).join('\n'), next: end + 1 };
}

export function runnableBlocks(markdown: string, page = 'page'): RunnableBlock[] {
  const lines = markdown.split('\n');
  const blocks: RunnableBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const marker = RUNS.exec(lines[i]!.trim());
    if (!marker) continue;
    const fence = fenceAt(lines, i + 1);
    if (!fence || !['sh', 'bash'].includes(fence.info))
      throw new Error(`${page}:${i + 1}: <!-- runs: ${marker[1]} --> must be followed by a sh fence`);
    const block: RunnableBlock = { sequence: marker[1]!, script: fence.body, line: i + 1 };
    let j = fence.next;
    while (j < lines.length && lines[j]!.trim() === '') j++;
    if (lines[j]?.trim() === OUTPUT) {
      const output = fenceAt(lines, j + 1);
      if (!output) throw new Error(`${page}:${j + 1}: <!-- output --> must be followed by a fence`);
      block.output = output.body;
    }
    blocks.push(block);
  }
  return blocks;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Whether `actual` is what `expected` shows: line by line, trailing spaces ignored; a run of spaces stands for any
 * run of spaces (table columns widen), `…` within a line for any text, and a line of `…` alone for any lines.
 */
export function outputMatches(expected: string, actual: string): boolean {
  const trim = (s: string) =>
    s
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n')
      .replace(/\n+$/, '');
  const pattern = trim(expected)
    .split('\n')
    .map((line) =>
      line.trim() === '…'
        ? '(?:[^\\n]*\\n)*?'
        : `${line
            .split('…')
            .map((part) => escape(part).replace(/ +/g, ' +'))
            .join('[^\\n]*?')}\\n`,
    )
    .join('');
  return new RegExp(`^${pattern}$`).test(`${trim(actual)}\n`);
}
