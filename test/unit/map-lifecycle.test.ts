// MapController lifecycle options (docs/controllers/mapcontroller.md#lifecycle): the finalize hook's answer and finalizer,
// resyncAfterSeconds and its timers, updateStrategy. The pure decisions only; test/integration/map-lifecycle.test.ts
// runs them on the real apiserver.
import fc from 'fast-check';
import type { KubeObject } from '../../shared/kube/index.ts';
import {
  APPLIED_ANNOTATION,
  finalizerName,
  MAP_KEY_LABEL,
  MAX_RESYNC_AFTER_SECONDS,
  PARENT_LABEL,
  parseFinalizeAnswer,
  parseHookAnswer,
  parseMapController,
} from '../../shared/map/api.ts';
import {
  answerFingerprint,
  answerHolds,
  detachedToDelete,
  diffOutputs,
  prepareOutputs,
  releasePatch,
  type AnswerRecord,
} from '../../shared/map/plan/index.ts';
import { finalizersWith } from '../../shared/metacontroller/finalizers.ts';
import { nextWake, TIMER_HOLD_MAX_SECONDS, timerCause, timerOf, timerStep, WAKE_EARLY_MS } from '../../shared/metacontroller/timers.ts';

const cm = (name: string, data: Record<string, string> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data,
});

describe('hook answers', () => {
  test('resyncAfterSeconds: a wish in seconds, 0 or absent for none, capped at a day; never negative', () => {
    expect(parseHookAnswer({ outputs: [cm('a')], resyncAfterSeconds: 2.5 })).toEqual({ outputs: [cm('a')], resyncAfterSeconds: 2.5 });
    expect(parseHookAnswer({ outputs: [] })).toEqual({ outputs: [], resyncAfterSeconds: undefined });
    expect(parseHookAnswer({ outputs: [], resyncAfterSeconds: 0 }).resyncAfterSeconds).toBeUndefined();
    expect(parseHookAnswer({ outputs: [], resyncAfterSeconds: 10 * MAX_RESYNC_AFTER_SECONDS }).resyncAfterSeconds).toBe(
      MAX_RESYNC_AFTER_SECONDS,
    );
    expect(() => parseHookAnswer({ outputs: [], resyncAfterSeconds: -1 })).toThrow(/resyncAfterSeconds/);
    expect(() => parseHookAnswer({ outputs: [], resyncAfterSeconds: '5' })).toThrow(/resyncAfterSeconds/);
  });
  test('the finalize answer needs finalized (a forgetful hook never lets a parent go) and outputs', () => {
    expect(parseFinalizeAnswer({ outputs: [cm('keep')], finalized: true })).toEqual({
      outputs: [cm('keep')],
      finalized: true,
      resyncAfterSeconds: undefined,
    });
    expect(parseFinalizeAnswer({ outputs: [], finalized: false, resyncAfterSeconds: 3 })).toEqual({
      outputs: [],
      finalized: false,
      resyncAfterSeconds: 3,
    });
    expect(() => parseFinalizeAnswer({ outputs: [] })).toThrow(/finalized/);
    expect(() => parseFinalizeAnswer({ finalized: true })).toThrow(/outputs/);
    expect(() => parseFinalizeAnswer({ outputs: [], finalized: 'yes' })).toThrow(/finalized/);
  });
});

describe('the spec: finalize hook and updateStrategy', () => {
  const spec = (outputResources: unknown, hooks: unknown = { map: { webhook: { url: 'https://h/map' } } }) =>
    parseMapController({
      apiVersion: 'metacontroller.k8s.io/v1alpha1',
      kind: 'MapController',
      metadata: { name: 'm', uid: 'u' },
      spec: {
        parentResource: { apiVersion: 'v1', resource: 'x' },
        inputResources: [{ apiVersion: 'v1', resource: 'y' }],
        outputResources,
        hooks,
      },
    } as KubeObject).spec;
  test('updateStrategy.method is InPlace by default, or Recreate; nothing else', () => {
    expect(spec([{ apiVersion: 'v1', resource: 'z', updateStrategy: {} }]).outputResources[0]!.updateStrategy).toEqual({
      method: 'InPlace',
    });
    expect(spec([{ apiVersion: 'v1', resource: 'z', updateStrategy: { method: 'Recreate' } }]).outputResources[0]!.updateStrategy).toEqual({
      method: 'Recreate',
    });
    expect(spec([{ apiVersion: 'v1', resource: 'z' }]).outputResources[0]!.updateStrategy).toBeUndefined();
    expect(() => spec([{ apiVersion: 'v1', resource: 'z', updateStrategy: { method: 'RollingRecreate' } }])).toThrow(
      /updateStrategy.method/,
    );
  });
  test('a finalize hook is a hook like the others', () => {
    expect(
      spec([{ apiVersion: 'v1', resource: 'z' }], {
        map: { webhook: { url: 'https://h/map' } },
        finalize: { lambda: { functionName: 'f' } },
      }).hooks.finalize,
    ).toEqual({ lambda: { functionName: 'f' }, timeoutSeconds: 10, retries: 2 });
    expect(() => spec([{ apiVersion: 'v1', resource: 'z' }], { map: { webhook: { url: 'https://h/map' } }, finalize: {} })).toThrow(
      /hooks.finalize/,
    );
  });
});

describe('the finalizer', () => {
  // A qualified name: an optional DNS subdomain prefix, then a name part of at most 63 characters.
  const qualified = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
  const controllerName = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/);
  test('one per controller, always a valid finalizer name (its name part at most 63 characters), different for different controllers', () => {
    expect(finalizerName('snapshot-schedule')).toBe('map.outrigger.dev/snapshot-schedule');
    fc.assert(
      fc.property(controllerName, controllerName, (a, b) => {
        const f = finalizerName(a);
        expect(f).toMatch(qualified);
        expect(f.split('/')[1]!.length).toBeLessThanOrEqual(63);
        if (a !== b) expect(finalizerName(b)).not.toBe(f);
      }),
    );
  });
  test('added or removed once, the others kept in order; no change is undefined', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.constantFrom('a/x', 'b/y', 'c/z', 'map.outrigger.dev/m'), { maxLength: 4 }),
        fc.boolean(),
        (list, want) => {
          const name = 'map.outrigger.dev/m';
          const next = finalizersWith(list, name, want);
          if (list.includes(name) === want) return expect(next).toBeUndefined();
          expect(next!.includes(name)).toBe(want);
          expect(next!.filter((f) => f !== name)).toEqual(list.filter((f) => f !== name));
          expect(finalizersWith(next, name, want)).toBeUndefined();
        },
      ),
    );
    expect(finalizersWith(undefined, 'x/y', true)).toEqual(['x/y']);
  });
  test("the finalize hook's keep list: a name without a namespace is the parent's; naming an output the parent does not own is refused", () => {
    const owned = [
      { ...cm('a'), metadata: { name: 'a', namespace: 'ns' } },
      { ...cm('b'), metadata: { name: 'b', namespace: 'ns' } },
    ];
    expect(detachedToDelete(owned, [cm('a')], { hook: 'finalize', namespace: 'ns' }).map((o) => o.metadata.name)).toEqual(['b']);
    expect(detachedToDelete(owned, [], { hook: 'finalize', namespace: 'ns' })).toHaveLength(2);
    expect(() => detachedToDelete(owned, [cm('c')], { hook: 'finalize', namespace: 'ns' })).toThrow(
      'the finalize hook answered ConfigMap c, which is not one of the parent outputs',
    );
    // The tombstone hook's answer is taken as it is, as before.
    expect(() => detachedToDelete(owned, [cm('a')])).toThrow(/tombstone hook answered ConfigMap a/);
  });
  test("a released output loses the parent's ControllerRef and Outrigger's labels and annotation, conditional on what was read", () => {
    const other = { apiVersion: 'v1', kind: 'ConfigMap', name: 'o', uid: 'o-uid' };
    const o: KubeObject = {
      ...cm('a'),
      metadata: {
        name: 'a',
        resourceVersion: '7',
        ownerReferences: [{ apiVersion: 'x/v1', kind: 'P', name: 'p', uid: 'p-uid', controller: true }, other],
      },
    };
    expect(releasePatch(o, 'p-uid')).toEqual({
      metadata: {
        resourceVersion: '7',
        ownerReferences: [other],
        labels: { [MAP_KEY_LABEL]: null, [PARENT_LABEL]: null },
        annotations: { [APPLIED_ANNOTATION]: null },
      },
    });
    expect(
      (
        releasePatch({ ...o, metadata: { ...o.metadata, ownerReferences: [o.metadata.ownerReferences![0]!] } }, 'p-uid').metadata as {
          ownerReferences: unknown;
        }
      ).ownerReferences,
    ).toBeNull();
  });
});

describe('resyncAfterSeconds: timers', () => {
  test('a timer names its due time', () => {
    expect(timerOf([timerCause(1_700_000_000_123, 'n')])).toBe(1_700_000_000_123);
    expect(timerOf(['ConfigMap/x/uid/1/MODIFIED', 'resync/60/3'])).toBeUndefined();
  });
  test('a timer fires once due, never later than a second past it, and no message of it is held a second past TIMER_HOLD_MAX_SECONDS', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 86_400_000 }),
        fc.integer({ min: 0, max: 2_000 }),
        fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 20 }),
        (delayMs, firstReceiveMs, lags) => {
          // A queue that delivers each message after its hold (plus a little lag), as SQS does with a visibility.
          const sentFirst = 1_000_000;
          const dueAt = sentFirst + delayMs;
          let sentAt = sentFirst;
          let now = sentFirst + firstReceiveMs;
          for (let i = 0; ; i += 1) {
            const step = timerStep({ now, sentAt, dueAt, recorded: dueAt, hasRecord: true });
            if (step.kind === 'fire') {
              expect(now).toBeGreaterThanOrEqual(dueAt - WAKE_EARLY_MS);
              expect(now).toBeLessThanOrEqual(Math.max(dueAt, sentFirst + firstReceiveMs) + 1_000 + 300 * i);
              return;
            }
            if (step.kind === 'renew') {
              sentAt = now;
            } else {
              expect(step.kind).toBe('hold');
              if (step.kind !== 'hold') return;
              expect(step.seconds).toBeGreaterThanOrEqual(1);
              expect(now + step.seconds * 1000 - sentAt).toBeLessThanOrEqual((TIMER_HOLD_MAX_SECONDS + 1) * 1000);
              now += step.seconds * 1000;
            }
            now += lags[i % Math.max(1, lags.length)] ?? 0;
            expect(i).toBeLessThan(2 * Math.ceil(delayMs / (TIMER_HOLD_MAX_SECONDS * 1000)) + 4);
          }
        },
      ),
    );
  });
  test('a timer the parent record no longer names is stale; without a record it runs', () => {
    expect(timerStep({ now: 10, sentAt: 0, dueAt: 5, recorded: 7, hasRecord: true })).toEqual({ kind: 'stale' });
    expect(timerStep({ now: 10, sentAt: 0, dueAt: 5, recorded: undefined, hasRecord: true })).toEqual({ kind: 'stale' });
    expect(timerStep({ now: 10, sentAt: 0, dueAt: 5, recorded: undefined, hasRecord: false })).toEqual({ kind: 'fire' });
    expect(timerStep({ now: 0, sentAt: 0, dueAt: 2_000, recorded: 2_000, hasRecord: true })).toEqual({ kind: 'hold', seconds: 2 });
  });
  test('after a pass: the earliest wish is kept; a pending timer due no later serves it; no wish, no timer', () => {
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: 0, max: 1_000 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 1_000 }), { nil: undefined }),
        fc.integer({ min: 0, max: 1_000 }),
        (pending, wanted, now) => {
          const { wakeAt, send } = nextWake(pending, wanted, now);
          if (wanted === undefined) return expect({ wakeAt, send }).toEqual({ wakeAt: undefined, send: false });
          // A wake is always covered: by the timer sent now or by one pending that fires no later.
          expect(wakeAt).toBeLessThanOrEqual(wanted);
          if (!send) expect(pending !== undefined && pending > now && pending === wakeAt).toBe(true);
          else expect(wakeAt).toBe(wanted);
        },
      ),
    );
  });
  test('an input whose wish is due is called again though nothing changed; one not yet due keeps its answer', () => {
    const input: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'in', uid: 'k1', resourceVersion: '5' } };
    const at = { parentGeneration: 1, controller: 'c', generation: 1 };
    const record = (wake?: number): AnswerRecord => ({
      ...at,
      inputs: { k1: answerFingerprint(input, []) },
      ...(wake === undefined ? {} : { wakes: { k1: wake } }),
    });
    expect(answerHolds(record(), at, input, [], new Set(), 1_000)).toBe(true);
    expect(answerHolds(record(5_000), at, input, [], new Set(), 1_000)).toBe(true);
    expect(answerHolds(record(1_100), at, input, [], new Set(), 1_000)).toBe(false);
    expect(answerHolds(record(500), at, input, [], new Set(), 1_000)).toBe(false);
  });
});

describe('updateStrategy: what is a change of content', () => {
  const parent: KubeObject = { apiVersion: 'x/v1', kind: 'P', metadata: { name: 'p', namespace: 'ns', uid: 'p-uid' } };
  const configMaps = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
  const desired = (data: Record<string, string>) => prepareOutputs([cm('a', data)], { parent, mapKey: 'k', outputKinds: [configMaps] })[0]!;
  test('a changed answer or drift is content (a Recreate output is recreated); ownership held by update alone is not', () => {
    const was = { ...desired({ v: '1' }), metadata: { ...desired({ v: '1' }).metadata, uid: 'u', resourceVersion: '1' } };
    expect(diffOutputs([was], [desired({ v: '2' })]).update.map((u) => u.content)).toEqual([true]);
    expect(diffOutputs([{ ...was, data: { v: 'edited' } }], [desired({ v: '1' })]).update.map((u) => u.content)).toEqual([true]);
    const byUpdate = {
      ...was,
      metadata: {
        ...was.metadata,
        managedFields: [
          { manager: 'outrigger', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:v': {} } } },
        ],
      },
    };
    expect(diffOutputs([byUpdate], [desired({ v: '1' })], 'outrigger').update.map((u) => u.content)).toEqual([false]);
    expect(diffOutputs([was], [desired({ v: '1' })], 'outrigger').unchanged).toHaveLength(1);
  });
});
