// Jest's order (failed first, then slowest first), with the integration files that have the bed to themselves
// (jest.config.js, testEnvironmentOptions.alone) before all others: one waits for the other, unit files run
// beside them, and then no integration file waits for the bed (docs/contributing/test-beds.md#files-in-parallel).
import { relative } from 'node:path';
import Sequencer from '@jest/test-sequencer';

const Base = Sequencer.default ?? Sequencer;

export default class AloneFirst extends Base {
  async sort(tests) {
    const alone = (t) => (t.context.config.testEnvironmentOptions.alone ?? []).includes(relative(t.context.config.rootDir, t.path));
    const sorted = await super.sort(tests);
    return [...sorted.filter(alone), ...sorted.filter((t) => !alone(t))];
  }
}
