// A parent's pass record in DynamoDB (docs/design/map-pass.md#incremental-passes), on DynamoDB Local: whatever its
// hooks answer, it stays under DynamoDB's 400 KB item limit, so a pass that wrote its outputs and status never
// fails on its record.
import { randomUUID } from 'node:crypto';
import type { KubeObject } from '../../shared/kube/index.ts';
import { answerFingerprint, recordedAnswers, type AnswerRecord, type PassRecord } from '../../shared/map/plan/index.ts';
import { testState, uniqueName } from '../testbed/index.ts';

/** The answers of a pass over `n` inputs, each answered with one output and a resyncAfterSeconds wish. */
function answersOf(n: number): AnswerRecord {
  const answers: AnswerRecord = { parentGeneration: 1, controller: randomUUID(), generation: 1, inputs: {}, wakes: {} };
  const wakeAt = Date.now() + 3_600_000;
  for (let i = 0; i < n; i += 1) {
    const uid = randomUUID();
    const input = { metadata: { uid, name: `pvc-${i}`, namespace: 'ns', resourceVersion: String(10_000_000 + i) } } as KubeObject;
    const output = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `pvc-${i}-copy`, namespace: 'ns' } } as KubeObject;
    answers.inputs[uid] = answerFingerprint(input, [output]);
    answers.wakes![uid] = wakeAt + i;
  }
  return answers;
}

test.each([
  [2_000, true],
  [3_900, false],
  [5_000, false],
])(
  'the pass record of %i inputs whose hooks all answered resyncAfterSeconds fits a DynamoDB item and keeps its wake (answers kept: %s)',
  async (n, kept) => {
    const state = testState();
    const key = { cluster: uniqueName('record'), kind: 'map-pass', name: randomUUID() };
    const answers = answersOf(n);
    const record: PassRecord = {
      startedAt: Date.now(),
      controller: answers.controller,
      generation: 1,
      answers: recordedAnswers(answers),
      looked: { outputs: Array.from({ length: 9 }, () => randomUUID()) },
      wakeAt: Math.min(...Object.values(answers.wakes!)),
    };
    await state.records.put(key, record, 'any', { ttlSeconds: 86_400 });
    const stored = (await state.records.get<PassRecord>(key))?.value;
    expect(stored?.wakeAt).toBe(record.wakeAt);
    // Kept whole, or not at all (then every pass calls every hook): never a part that would pass for the whole.
    expect(stored?.answers ? Object.keys(stored.answers.inputs).length : 0).toBe(kept ? n : 0);
  },
);
