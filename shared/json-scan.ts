// What JSON.parse does not say about a text: a key given twice in one object (JSON.parse keeps the last; another
// reader of the same bytes may keep the first, so a duplicate lets one message say two things) and nesting deep
// enough to overflow the recursion of JSON.stringify or of a schema walk later. Both are refused, named, before
// anything reads the value (docs/operations/security.md). Iterative, so hostile input cannot overflow the scan itself.

export interface JsonScan {
  /**
   * The first problem of each top-level array element (by index), or of the whole text (-1) when it is not an
   * array.
   */
  problems: Map<number, string>;
  /** Where each element of a top-level array starts and ends in the text: an event's own bytes, as sent. */
  elements: Array<[start: number, end: number]>;
}

const WHITESPACE = new Set([' ', '\n', '\r', '\t']);

/** Scans a text that JSON.parse has accepted. `maxDepth` counts the containers of a value (of each element of a top-level array). */
export function scanJson(text: string, maxDepth: number): JsonScan {
  const problems = new Map<number, string>();
  const elements: Array<[number, number]> = [];
  // One entry per open container: the keys seen so far in an object, undefined in an array.
  const stack: Array<Set<string> | undefined> = [];
  const topArray = text.trimStart().startsWith('[');
  const limit = maxDepth + (topArray ? 1 : 0);
  let expectKey = false;
  let start = -1;
  let last = -1;
  const problem = (p: string) => {
    const at = topArray ? elements.length : -1;
    if (!problems.has(at)) problems.set(at, p);
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (WHITESPACE.has(c)) continue;
    if (topArray && stack.length === 1 && start < 0 && c !== ',' && c !== ']') start = i;
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const keys = stack.at(-1);
      if (expectKey && keys) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (keys.has(key)) problem(`has the key ${JSON.stringify(key.slice(0, 100))} twice in one object`);
        keys.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === '{' || c === '[') {
      stack.push(c === '{' ? new Set() : undefined);
      expectKey = c === '{';
      if (stack.length > limit) problem(`is nested deeper than ${maxDepth} levels`);
    } else if (c === '}' || c === ']') {
      stack.pop();
      expectKey = false;
      if (topArray && stack.length === 0 && start >= 0) elements.push([start, last + 1]);
    } else if (c === ',') {
      expectKey = stack.at(-1) !== undefined;
      if (topArray && stack.length === 1) {
        elements.push([start, last + 1]);
        start = -1;
      }
    }
    last = i;
  }
  return { problems, elements };
}

/** Whether a parsed value nests deeper than `maxDepth` containers (for values that never were text here). */
export function deeperThan(value: unknown, maxDepth: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length > 0) {
    const [v, depth] = pending.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= maxDepth) return true;
    for (const child of Object.values(v)) pending.push([child, depth + 1]);
  }
  return false;
}
