// Jest's order (failed first, then slowest first), with the integration files that have the bed to themselves
// (jest.config.js, testEnvironmentOptions.alone) before all others: one waits for the other, unit files run
// beside them, and then no integration file waits for the bed (docs/contributing/test-beds.md#files-in-parallel).
// The files that need a Go program built ahead of need (testEnvironmentOptions.late) come last, so that its build
// has the whole run to finish in (docs/contributing/test-beds.md#cost).
import { relative } from 'node:path';
import Sequencer from '@jest/test-sequencer';

const Base = Sequencer.default ?? Sequencer;

const listed = (name) => (t) => (t.context.config.testEnvironmentOptions[name] ?? []).includes(relative(t.context.config.rootDir, t.path));

export default class AloneFirst extends Base {
  async sort(tests) {
    const alone = listed('alone');
    const late = listed('late');
    const sorted = await super.sort(tests);
    return [...sorted.filter(alone), ...sorted.filter((t) => !alone(t) && !late(t)), ...sorted.filter(late)];
  }
}
