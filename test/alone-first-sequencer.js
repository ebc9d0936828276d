// Jest's order (failed first, then slowest first), with the integration files that have the bed to themselves
// (jest.config.js, testEnvironmentOptions.alone) first, each followed by its share of the unit files that keep a
// core busy for long (the unit project's testEnvironmentOptions.cpuBound): while a file holds the bed, the other
// worker runs those instead of waiting on the lock (docs/contributing/test-beds.md#files-in-parallel). The files
// that need a Go program built ahead of need (testEnvironmentOptions.late) come last, so that its build has the
// whole run to finish in (docs/contributing/test-beds.md#cost).
import { relative } from 'node:path';
import Sequencer from '@jest/test-sequencer';

const Base = Sequencer.default ?? Sequencer;

const listed = (name) => (t) => (t.context.config.testEnvironmentOptions[name] ?? []).includes(relative(t.context.config.rootDir, t.path));

/**
 * The run's order from jest's: the alone files, each followed by every n-th CPU-bound file (n the number of alone
 * files, so that each alone file has a share of them beside it); then the others in jest's order; the late last.
 * With no alone file in the run, jest's order with the late files last.
 */
export function order(sorted, { alone, late, cpuBound }) {
  const first = sorted.filter(alone);
  const beside = sorted.filter((t) => !alone(t) && !late(t) && cpuBound(t));
  const shared = first.length ? beside : [];
  const head = first.flatMap((t, i) => [t, ...shared.filter((_, j) => j % first.length === i)]);
  const rest = sorted.filter((t) => !alone(t) && !late(t) && !shared.includes(t));
  return [...head, ...rest, ...sorted.filter(late)];
}

export default class AloneFirst extends Base {
  async sort(tests) {
    const sorted = await super.sort(tests);
    return order(sorted, { alone: listed('alone'), late: listed('late'), cpuBound: listed('cpuBound') });
  }
}
