// The Event a controller records (the integration tests read them back through kubectl describe).
import fc from 'fast-check';
import { eventFor } from '../../shared/events/index.ts';
import { EVENT_BURST, EVENT_REFILL_MS, spendEvent, withWithheld, type EventAllowance } from '../../shared/events/allowance.ts';

describe('eventFor', () => {
  const sts = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: 'shop', uid: 'u-1', resourceVersion: '42' },
  };
  const reporter = { controller: 'outrigger.dev/history', instance: 'history-1' };

  test('names the object, carries a MicroTime, and regards the object by uid and resourceVersion', () => {
    const e = eventFor(
      sts,
      { type: 'Normal', reason: 'RevisionCreated', action: 'Create', note: 'Created revision 1' },
      reporter,
      new Date('2026-11-24T20:00:00.123Z'),
      'abcd',
    );
    expect(e).toEqual({
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: 'web.abcd', namespace: 'shop' },
      eventTime: '2026-11-24T20:00:00.123000Z',
      reportingController: 'outrigger.dev/history',
      reportingInstance: 'history-1',
      action: 'Create',
      reason: 'RevisionCreated',
      note: 'Created revision 1',
      type: 'Normal',
      regarding: { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', namespace: 'shop', uid: 'u-1', resourceVersion: '42' },
    });
  });

  test('a cluster-scoped object gets its events in default; a long note is cut to the 1 KB the API takes, on a character', () => {
    const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } };
    const e = eventFor(ns, { type: 'Warning', reason: 'X', action: 'Sync', note: 'é'.repeat(1000) }, reporter, new Date());
    expect((e.metadata as { namespace: string }).namespace).toBe('default');
    const note = (e as unknown as { note: string }).note;
    expect(Buffer.byteLength(note)).toBeLessThanOrEqual(1024);
    expect(note).toMatch(/^é+\.\.\.$/);
  });
});

describe("an object's allowance of routine Events (spendEvent)", () => {
  // Any timeline of sync times, including a clock that runs behind the one that wrote the record (another
  // invocation's), pauses longer than the refill, and bursts within one millisecond.
  const steps = fc.array(fc.integer({ min: -120_000, max: 600_000 }), { maxLength: 200 });

  test('over any window of D ms, at most the burst plus one per refill since are recorded; none is lost from the count', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2e12 }), steps, (start, deltas) => {
        let allowance: EventAllowance | undefined;
        let now = start;
        const recordedAt: number[] = [];
        let withheldTold = 0;
        let withheldNow = 0;
        let latest = start;
        for (const d of deltas) {
          now += d;
          const decision = spendEvent(allowance, now);
          allowance = decision.next;
          latest = Math.max(latest, now);
          if (decision.record) {
            recordedAt.push(latest);
            withheldTold += decision.withheld;
            withheldNow = 0;
          } else withheldNow += 1;
          expect(allowance.withheld).toBe(withheldNow);
        }
        // Every call is either recorded, told in a later Event's note, or still counted in the allowance.
        expect(recordedAt.length + withheldTold + withheldNow).toBe(deltas.length);
        // By the record's clock (which never runs back), any window holds at most burst + its length's refills.
        for (let i = 0; i < recordedAt.length; i += 1)
          for (let j = i; j < recordedAt.length; j += 1)
            expect(j - i + 1).toBeLessThanOrEqual(EVENT_BURST + Math.floor((recordedAt[j]! - recordedAt[i]!) / EVENT_REFILL_MS) + 1);
      }),
    );
  });

  test('events a refill apart or more are all recorded; the one after a withheld run says how many', () => {
    let allowance: EventAllowance | undefined;
    for (let i = 0; i < 20; i += 1) {
      const d = spendEvent(allowance, 1_000 + i * EVENT_REFILL_MS);
      expect(d.record).toBe(true);
      allowance = d.next;
    }
    const burst = Array.from({ length: EVENT_BURST + 3 }, () => {
      const d = spendEvent(allowance, 5e6);
      allowance = d.next;
      return d.record;
    });
    expect(burst.filter(Boolean)).toHaveLength(EVENT_BURST);
    const after = spendEvent(allowance, 5e6 + EVENT_REFILL_MS);
    expect(after).toMatchObject({ record: true, withheld: 3 });
    expect(withWithheld('Created revision 9: web-1', after.withheld)).toMatch(/^Created revision 9: web-1 \(3 earlier event\(s\)/);
  });
});
