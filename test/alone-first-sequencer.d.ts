// Types of test/alone-first-sequencer.js's pure part, for its unit test.
export function order<T>(
  sorted: readonly T[],
  kinds: { alone: (t: T) => boolean; late: (t: T) => boolean; cpuBound: (t: T) => boolean },
): T[];
