// The Event a controller records (the integration tests read them back through kubectl describe).
import { eventFor } from '../../shared/events/index.ts';

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
