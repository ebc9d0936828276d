// The order the test files run in (test/alone-first-sequencer.js): a file that has the shared bed to itself makes
// any integration file the other worker takes wait on the bed's lock, so the order gives that worker CPU-bound
// unit files instead (docs/contributing/test-beds.md#files-in-parallel).
import fc from 'fast-check';
import { order } from '../alone-first-sequencer.js';

type Kind = 'alone' | 'late' | 'cpuBound' | 'unit' | 'integration';
interface File {
  name: string;
  kind: Kind;
}

const kinds = {
  alone: (f: File) => f.kind === 'alone',
  late: (f: File) => f.kind === 'late',
  cpuBound: (f: File) => f.kind === 'cpuBound',
};
/** Whether a file waits on the bed's lock while an alone file holds it. */
const waitsOnBed = (f: File) => f.kind !== 'unit' && f.kind !== 'cpuBound';

const files = fc
  .array(fc.constantFrom<Kind>('alone', 'late', 'cpuBound', 'unit', 'integration'), { maxLength: 30 })
  .map((ks) => ks.map((kind, i) => ({ name: `f${i}`, kind })));

test('the files that have the bed to themselves come first, each followed by a CPU-bound unit file while they last', () => {
  const f = (name: string, kind: Kind): File => ({ name, kind });
  const sorted = [
    f('i1', 'integration'),
    f('a1', 'alone'),
    f('u1', 'unit'),
    f('c1', 'cpuBound'),
    f('a2', 'alone'),
    f('l1', 'late'),
    f('c2', 'cpuBound'),
    f('c3', 'cpuBound'),
    f('i2', 'integration'),
  ];
  expect(order(sorted, kinds).map((x) => x.name)).toEqual(['a1', 'c1', 'c3', 'a2', 'c2', 'i1', 'u1', 'i2', 'l1']);
});

test('property: every file runs once; late files last; an alone file is followed by a CPU-bound one while they last', () => {
  fc.assert(
    fc.property(files, (sorted) => {
      const out = order(sorted, kinds);
      expect([...out].sort((a, b) => a.name.localeCompare(b.name))).toEqual([...sorted].sort((a, b) => a.name.localeCompare(b.name)));
      const firstLate = out.findIndex(kinds.late);
      if (firstLate >= 0) expect(out.slice(firstLate).every(kinds.late)).toBe(true);
      const alone = sorted.filter(kinds.alone).length;
      const cpuBound = sorted.filter(kinds.cpuBound).length;
      // While CPU-bound files last, each alone file is followed by one: the other worker does not wait on the bed.
      if (cpuBound >= alone) out.forEach((x, i) => kinds.alone(x) && expect(out[i + 1]?.kind).toBe('cpuBound'));
      // Alone files keep jest's order among themselves, and none comes after a file that shares the bed.
      const firstShared = out.findIndex((x) => waitsOnBed(x) && !kinds.alone(x));
      if (firstShared >= 0) expect(out.slice(firstShared).some(kinds.alone)).toBe(false);
    }),
  );
});
