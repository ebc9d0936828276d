// The status a CompositeController writes on a parent kind a MapController serves too
// (docs/controllers/compositecontroller.md#mix-and-match): the answer's, the map's own fields kept, so that the two
// passes reach a status neither changes again.
import fc from 'fast-check';
import { statusDiffers, withMapStatus } from '../../shared/composite/plan.ts';

const synced = { type: 'Synced', status: 'True', reason: 'Synced', message: 'ok', lastTransitionTime: '2026-11-27T00:00:00Z' };
const mapStatus = {
  observedGeneration: 3,
  inputs: { 'secrets.v1': { total: 1 } },
  outputs: { 'pods.v1': { ready: 1 } },
  conditions: [synced],
};

test("keeps the map's observedGeneration, counts and Synced condition beside the answer's fields", () => {
  expect(withMapStatus({ ...mapStatus, composite: ['old'] }, { composite: ['a'] })).toEqual({ ...mapStatus, composite: ['a'] });
});

test("the answer's own conditions stay, the map's Synced is added; an answer naming a kept field has its way", () => {
  const ready = { type: 'Ready', status: 'True' };
  expect(withMapStatus(mapStatus, { conditions: [ready], observedGeneration: 9 })).toEqual({
    ...mapStatus,
    observedGeneration: 9,
    conditions: [ready, synced],
  });
  expect(withMapStatus(mapStatus, { conditions: [{ type: 'Synced', status: 'False' }] }).conditions).toEqual([
    { type: 'Synced', status: 'False' },
  ]);
});

test('a fixed point: once written, the same answer writes nothing again', () => {
  fc.assert(
    fc.property(
      fc.option(fc.dictionary(fc.constantFrom('observedGeneration', 'inputs', 'outputs', 'conditions', 'other'), fc.jsonValue())),
      fc.dictionary(fc.constantFrom('composite', 'observedGeneration', 'phase'), fc.jsonValue()),
      (current, answered) => {
        const written = withMapStatus(current, answered);
        expect(statusDiffers(written, withMapStatus(written, answered))).toBe(false);
      },
    ),
  );
});
