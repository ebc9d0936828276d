/* eslint-disable max-lines -- the spec, pass, hooks and webhook sections share the parent, configMaps and cm fixtures below */
import fc from 'fast-check';
import { webhookRefusal } from '../../shared/hooks/index.ts';
import { keepSnapshots, mapSnapshots, parseDuration } from '../../examples/snapshot-schedule/hooks.ts';
import type { KubeObject, ResolvedResource } from '../../shared/kube/index.ts';
import {
  APPLIED_ANNOTATION,
  controllerCause,
  definitionOf,
  MAP_KEY_LABEL,
  MapControllerError,
  MAX_OUTPUTS_PER_ANSWER,
  PARENT_LABEL,
  parseHookResponse,
  parseMapController,
} from '../../shared/map/api.ts';
import {
  aggregate,
  answerFingerprint,
  answerHolds,
  appliedOwnership,
  contains,
  fieldsWithin,
  passDecision,
  type PassRecord,
  detachedToDelete,
  diffOutputs,
  inputSelector,
  outputMap,
  outputsByKey,
  prepareOutputs,
  selectInputs,
  statusChanged,
  statusPatch,
} from '../../shared/map/plan/index.ts';
import { resyncDue, wakeCause } from '../../shared/metacontroller/timers.ts';
import { setCondition, type Condition } from '../../shared/metacontroller/conditions.ts';

const parent: KubeObject = {
  apiVersion: 'snapshot.outrigger.dev/v1',
  kind: 'SnapshotSchedule',
  metadata: { name: 's', namespace: 'ns', uid: 'p-uid', generation: 1 },
  spec: { selector: { matchLabels: { app: 'a' } } },
};
const configMaps: ResolvedResource = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const namespaces: ResolvedResource = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false };
const cm = (name: string, over: Partial<KubeObject['metadata']> = {}, data: Record<string, string> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, ...over },
  data,
});
const ref = {
  apiVersion: 'snapshot.outrigger.dev/v1',
  kind: 'SnapshotSchedule',
  name: 's',
  uid: 'p-uid',
  controller: true,
  blockOwnerDeletion: true,
};

describe('MapController spec', () => {
  const mc = (spec: unknown) =>
    parseMapController({
      apiVersion: 'metacontroller.k8s.io/v1alpha1',
      kind: 'MapController',
      metadata: { name: 'm', uid: 'u' },
      spec,
    } as KubeObject);
  const valid = {
    parentResource: { apiVersion: 'v1', resource: 'x' },
    inputResources: [{ apiVersion: 'v1', resource: 'y' }],
    outputResources: [{ apiVersion: 'v1', resource: 'z' }],
    hooks: { map: { webhook: { url: 'http://h/map' } } },
  };
  test('defaults the hook timeout (10 s) and retries (2)', () => {
    expect(mc(valid).spec.hooks.map).toEqual({ webhook: { url: 'http://h/map' }, timeoutSeconds: 10, retries: 2 });
  });
  test.each([
    [{ ...valid, inputResources: [] }, /spec.inputResources: names no input resource/],
    [{ ...valid, hooks: { map: {} } }, /spec.hooks.map: needs exactly one of webhook or lambda/],
    [{ ...valid, hooks: { map: { webhook: { url: 'http://h' }, lambda: { functionName: 'f' } } } }, /exactly one of webhook or lambda/],
    [{ ...valid, hooks: { map: { webhook: { url: 'ftp://h' } } } }, /spec.hooks.map.webhook.url: must be an http or https URL/],
  ])('a bad spec names its field: %#', (spec, message) => {
    expect(() => mc(spec)).toThrow(MapControllerError);
    expect(() => mc(spec)).toThrow(message);
  });
  test('hook answers: outputs with apiVersion, kind and name, or an error naming the field', () => {
    expect(parseHookResponse({ outputs: [cm('a')] })).toEqual([cm('a')]);
    expect(() => parseHookResponse({ outputs: [{ kind: 'ConfigMap', metadata: { name: 'a' } }] })).toThrow(/outputs.0.apiVersion/);
    expect(() => parseHookResponse({})).toThrow(/outputs/);
  });
});

describe('a sync pass, decided', () => {
  test('inputs: the selector (empty: everything), minus what this parent controls', () => {
    const inputs = [
      cm('a', { labels: { app: 'a' }, uid: '1' }),
      cm('b', { labels: { app: 'b' }, uid: '2' }),
      cm('c', { labels: { app: 'a' }, uid: '3', ownerReferences: [ref] }),
    ];
    expect(selectInputs(parent, inputSelector(parent), inputs).map((i) => i.metadata.name)).toEqual(['a']);
    const all = { ...parent, spec: {} };
    expect(selectInputs(all, inputSelector(all), inputs).map((i) => i.metadata.name)).toEqual(['a', 'b']);
  });

  test('outputs are grouped by map key; objects controlled by another are never outputs', () => {
    const mine = cm('x', { uid: 'x', labels: { [MAP_KEY_LABEL]: 'k1' }, ownerReferences: [ref] });
    const theirs = cm('y', { uid: 'y', labels: { [MAP_KEY_LABEL]: 'k1' }, ownerReferences: [{ ...ref, uid: 'other' }] });
    expect([...outputsByKey(parent, [mine, theirs])]).toEqual([['k1', [mine]]]);
    expect(outputMap([mine, { ...mine, metadata: { ...mine.metadata, namespace: 'ns' } }])).toEqual({
      'ConfigMap.v1': { x: mine, 'ns/x': { ...mine, metadata: { ...mine.metadata, namespace: 'ns' } } },
    });
  });

  test('prepared outputs carry the ControllerRef, map key, parent label and applied hash; status and system fields are dropped', () => {
    const [out] = prepareOutputs([{ ...cm('x', { uid: 'stale', resourceVersion: '9' }), status: { x: 1 } }], {
      parent,
      mapKey: 'k1',
      outputKinds: [configMaps],
    });
    expect(out!.metadata).toMatchObject({
      name: 'x',
      namespace: 'ns',
      labels: { [MAP_KEY_LABEL]: 'k1', [PARENT_LABEL]: 'p-uid' },
      ownerReferences: [ref],
    });
    expect(out!.metadata.annotations?.[APPLIED_ANNOTATION]).toMatch(/^[a-z0-9]+$/);
    expect(out!.metadata.uid).toBeUndefined();
    expect(out!.status).toBeUndefined();
  });

  test.each([
    [[cm('x', { namespace: 'other' })], /is in namespace other, but a parent in ns may own outputs in ns only/],
    [[{ ...cm('x'), kind: 'Secret' }], /v1 Secret is not one of the controller's outputResources/],
    [[{ ...cm('x'), apiVersion: 'v2' }], /written as v2, but outputResources names v1/],
    [[cm('x'), cm('x')], /answered twice/],
    [[cm('x', { ownerReferences: [{ ...ref, uid: 'someone' }] })], /names another controller/],
    [[{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'n', namespace: 'ns' } }], /cluster-scoped and takes no namespace/],
  ])('a bad answer is refused with the output named: %#', (desired, message) => {
    expect(() => prepareOutputs(desired as KubeObject[], { parent, mapKey: 'k', outputKinds: [configMaps, namespaces] })).toThrow(message);
  });

  test('diff: create what is missing, delete what is no longer answered, rewrite on a new hash or drift, leave the rest', () => {
    const desired = prepareOutputs([cm('a', {}, { v: '1' }), cm('b', {}, { v: '1' }), cm('c', {}, { v: '1' })], {
      parent,
      mapKey: 'k',
      outputKinds: [configMaps],
    });
    // As stored: the server adds fields (uid, resourceVersion, a default) that are no difference.
    const stored = (o: KubeObject): KubeObject => ({
      ...o,
      metadata: { ...o.metadata, uid: `u-${o.metadata.name}`, resourceVersion: '5', managedFields: [] },
      immutable: false,
    });
    const drifted = { ...stored(desired[1]!), data: { v: 'edited' } };
    const gone = stored(prepareOutputs([cm('d')], { parent, mapKey: 'k', outputKinds: [configMaps] })[0]!);
    const changes = diffOutputs([stored(desired[0]!), drifted, gone], desired);
    expect(changes.unchanged.map((o) => o.metadata.name)).toEqual(['a']);
    expect(changes.update.map((u) => u.observed.metadata.name)).toEqual(['b']);
    expect(changes.create.map((o) => o.metadata.name)).toEqual(['c']);
    expect(changes.delete.map((o) => o.metadata.name)).toEqual(['d']);
  });

  test('property: once applied, the same answer is no change (a resync writes nothing), whatever the server adds', () => {
    const json = fc.dictionary(fc.string({ minLength: 1, maxLength: 5 }), fc.oneof(fc.string(), fc.integer(), fc.boolean()), {
      maxKeys: 4,
    });
    fc.assert(
      fc.property(fc.uniqueArray(fc.stringMatching(/^[a-z]{1,8}$/), { minLength: 1, maxLength: 6 }), json, json, (names, data, extra) => {
        const desired = prepareOutputs(
          names.map((n) => ({ ...cm(n), spec: data })),
          { parent, mapKey: 'k', outputKinds: [configMaps] },
        );
        const stored = desired.map((d) => ({
          ...d,
          metadata: { ...d.metadata, uid: 'u', resourceVersion: '1' },
          status: extra,
          serverDefault: extra,
        }));
        const changes = diffOutputs(
          stored,
          prepareOutputs(
            names.map((n) => ({ ...cm(n), spec: data })),
            { parent, mapKey: 'k', outputKinds: [configMaps] },
          ),
        );
        return (
          changes.create.length === 0 &&
          changes.update.length === 0 &&
          changes.delete.length === 0 &&
          changes.unchanged.length === names.length
        );
      }),
    );
  });

  test('contains: fields the expected value sets must match; lists item by item', () => {
    expect(contains({ a: 1, b: { c: [1, { d: 2, e: 3 }] } }, { b: { c: [1, { d: 2 }] } })).toBe(true);
    expect(contains({ a: [1, 2] }, { a: [1] })).toBe(false);
    expect(contains({ a: {} }, { a: { b: null } })).toBe(true);
    expect(contains({}, { a: 'x' })).toBe(false);
  });

  test('tombstones: keep only what the hook answers, and only from the detached group', () => {
    const detached = [cm('a', { namespace: 'ns' }), cm('b', { namespace: 'ns' })];
    expect(detachedToDelete(detached, [cm('a', { namespace: 'ns' })]).map((o) => o.metadata.name)).toEqual(['b']);
    expect(detachedToDelete(detached, []).length).toBe(2);
    expect(() => detachedToDelete(detached, [cm('z', { namespace: 'ns' })])).toThrow(/not one of the detached outputs/);
  });

  test('status: totals per input and output resource, and per condition type how many are True', () => {
    const withCondition = (type: string, status: string) => ({ ...cm('x'), status: { conditions: [{ type, status }] } });
    const status = aggregate(
      new Map([[configMaps, 3]]),
      new Map([[configMaps, [withCondition('Ready', 'True'), withCondition('Ready', 'False'), cm('y')]]]),
    );
    expect(status).toEqual({ inputs: { configmaps: { total: 3 } }, outputs: { configmaps: { total: 3, ready: 1 } } });
  });

  test('a condition keeps its transition time while its status holds, so an unchanged pass writes no status', () => {
    const t0 = new Date('2026-01-01T00:00:00Z');
    const first = setCondition(undefined, { type: 'Synced', status: 'True', reason: 'Synced', message: '2 input(s) mapped' }, t0);
    const again = setCondition(
      first,
      { type: 'Synced', status: 'True', reason: 'Synced', message: '2 input(s) mapped' },
      new Date('2026-01-01T01:00:00Z'),
    );
    expect(again).toEqual(first);
    const status = { observedGeneration: 1, inputs: {}, outputs: {}, conditions: first };
    expect(statusChanged(status, { ...status, conditions: again })).toBe(false);
    expect(statusChanged(status, { ...status, observedGeneration: 2 })).toBe(true);
  });

  test('property: the status patch, merged into any former status, gives exactly the new status (keys gone are removed)', () => {
    const counts = fc.dictionary(fc.constantFrom('total', 'ready', 'available', 'degraded'), fc.nat(5));
    const status = fc.record({
      observedGeneration: fc.nat(9),
      inputs: fc.dictionary(fc.constantFrom('configmaps', 'secrets', 'pods'), fc.record({ total: fc.nat(5) })),
      outputs: fc.dictionary(fc.constantFrom('configmaps', 'gadgets', 'pods'), counts),
      conditions: fc.constant([] as Condition[]),
    });
    // RFC 7386, as the apiserver applies a merge patch.
    const merge = (target: unknown, patch: unknown): unknown => {
      if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
      const out: Record<string, unknown> =
        target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
      for (const [k, v] of Object.entries(patch)) {
        if (v === null) delete out[k];
        else out[k] = merge(out[k], v);
      }
      return out;
    };
    fc.assert(
      fc.property(status, status, (before, after) => {
        const merged = merge(before, statusPatch(before, after)) as typeof after;
        expect(merged).toEqual(after);
        expect(statusChanged(merged, after)).toBe(false);
      }),
    );
  });

  test('ownership: fields the field manager holds by an update (a create) become its applied fields; other managers are untouched', () => {
    const entry = (manager: string, operation: string, fieldsV1: Record<string, unknown>, more: Record<string, unknown> = {}) => ({
      manager,
      operation,
      apiVersion: 'v1',
      fieldsType: 'FieldsV1',
      fieldsV1,
      time: 't',
      ...more,
    });
    const created = cm('a', {
      managedFields: [
        entry('outrigger', 'Update', { 'f:data': { '.': {}, 'f:a': {} } }),
        entry('kubectl-edit', 'Update', { 'f:data': { 'f:b': {} } }),
      ],
    });
    expect(appliedOwnership(created, 'outrigger')).toEqual([
      entry('kubectl-edit', 'Update', { 'f:data': { 'f:b': {} } }),
      {
        manager: 'outrigger',
        operation: 'Apply',
        apiVersion: 'v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:data': { '.': {}, 'f:a': {} } },
      },
    ]);
    // An applier's earlier fields and an update's are one set; a status subresource's entry is another story.
    const both = cm('a', {
      managedFields: [
        entry('outrigger', 'Apply', { 'f:data': { 'f:a': {} } }),
        entry('outrigger', 'Update', { 'f:data': { 'f:c': {} }, 'f:metadata': { 'f:labels': { 'f:x': {} } } }),
        entry('outrigger', 'Update', { 'f:status': {} }, { subresource: 'status' }),
      ],
    });
    expect(appliedOwnership(both, 'outrigger')).toEqual([
      entry('outrigger', 'Update', { 'f:status': {} }, { subresource: 'status' }),
      {
        manager: 'outrigger',
        operation: 'Apply',
        apiVersion: 'v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:data': { 'f:a': {}, 'f:c': {} }, 'f:metadata': { 'f:labels': { 'f:x': {} } } },
      },
    ]);
    expect(appliedOwnership(cm('a', { managedFields: [entry('outrigger', 'Apply', {})] }), 'outrigger')).toBeUndefined();
    // An output still held by an update is rewritten even with nothing else changed.
    const desired = prepareOutputs([cm('a')], { parent, mapKey: 'k', outputKinds: [configMaps] })[0]!;
    const observed = {
      ...desired,
      metadata: { ...desired.metadata, namespace: 'ns', uid: 'u', managedFields: created.metadata.managedFields },
    };
    expect(diffOutputs([observed], [desired], 'outrigger').update).toHaveLength(1);
    expect(
      diffOutputs([{ ...observed, metadata: { ...observed.metadata, managedFields: [] } }], [desired], 'outrigger').unchanged,
    ).toHaveLength(1);
  });

  test('a pass serves later requests only with the definition they need; a stale definition is refreshed first', () => {
    const def = (generation: number, uid = 'mc') => ({ uid, generation });
    const decide = (
      last: PassRecord | undefined,
      current: ReturnType<typeof def> | undefined,
      requested?: ReturnType<typeof def>,
      refreshed = false,
    ) => passDecision({ last, sentAt: 1_000, skewMs: 100, current, requested, refreshed });
    const later = (generation: number, controller = 'mc') => ({ startedAt: 2_000, controller, generation, looked: 'all' as const });
    expect(decide(later(2), def(2))).toBe('served');
    expect(decide({ startedAt: 1_050, controller: 'mc', generation: 2 }, def(2))).toBe('run'); // within the skew
    expect(decide(later(1), def(2))).toBe('run'); // a pass with the old definition serves nothing newer
    expect(decide({ startedAt: 2_000 }, def(2))).toBe('run'); // a record from before definitions were kept
    expect(decide(later(2), def(1))).toBe('refresh'); // this process is behind the last pass
    expect(decide(later(2), def(2), def(3))).toBe('refresh'); // behind the request
    expect(decide(later(2), def(2), def(1, 'old'))).toBe('refresh');
    expect(decide(undefined, undefined, def(1))).toBe('refresh'); // a new controller this process has not seen
    expect(decide(later(2), def(2), def(3), true)).toBe('run'); // refreshed and still behind: run, never serve
    expect(decide(later(2), undefined, undefined, true)).toBe('no-controller');
    expect(decide(later(2, 'other'), def(2))).toBe('run'); // another controller (recreated) of that kind
    expect(decide({ startedAt: 2_000, controller: 'mc', generation: 2 }, def(2))).toBe('run'); // looked at what?
    expect(definitionOf(['x/y', controllerCause(def(7))])).toEqual(def(7));
    expect(definitionOf(['ConfigMap/c/u/1/modified'])).toBeUndefined();
  });

  test('an incremental pass serves only requests about what it looked at: its parent, its inputs, the outputs its request named', () => {
    const cause = (uid: string) => `ConfigMap/c/${uid}/7/modified`;
    const last: PassRecord = {
      startedAt: 2_000,
      controller: 'mc',
      generation: 2,
      answers: { parentGeneration: 1, controller: 'mc', generation: 2, inputs: { 'in-a': '1:x', 'in-b': '1:y' } },
      looked: { outputs: ['out-a'] },
    };
    const decide = (causes: string[], record: PassRecord = last) =>
      passDecision({
        last: record,
        sentAt: 1_000,
        skewMs: 100,
        current: { uid: 'mc', generation: 2 },
        requested: undefined,
        refreshed: false,
        request: { causes, parentUid: 'parent' },
      });
    expect(decide([cause('in-a'), cause('parent'), cause('out-a')])).toBe('served');
    expect(decide([cause('in-a'), controllerCause({ uid: 'mc', generation: 2 }), wakeCause(1_500, 'n')])).toBe('served');
    expect(decide([cause('out-b')])).toBe('run'); // an output it kept the answer for, edited in place (M1 in docs/controllers/mapcontroller.md#review-findings)
    expect(decide([cause('in-a'), cause('out-b')])).toBe('run');
    expect(decide(['resync/60/3'])).toBe('run'); // a resync calls every hook; this pass did not
    expect(decide([cause('gone')])).toBe('run'); // an input it did not list (deleted, or no longer matching)
    expect(decide(['ConfigMap/first'])).toBe('run'); // a cause naming nothing
    expect(decide([cause('out-b'), 'resync/60/3'], { ...last, looked: 'all' })).toBe('served');
    expect(decide([cause('in-a')], { ...last, looked: undefined })).toBe('served'); // an older record: inputs only
    expect(decide([cause('out-a')], { ...last, looked: undefined })).toBe('run');
  });

  test('fieldsWithin: the fields of a set that a value has, through keyed list items, set members and indexes', () => {
    const set = {
      'f:spec': {
        '.': {},
        'f:backoffLimit': {},
        'f:suspend': {},
        'f:containers': {
          'k:{"name":"c"}': { '.': {}, 'f:name': {}, 'f:image': {}, 'f:imagePullPolicy': {} },
          'k:{"name":"gone"}': { 'f:name': {} },
        },
        'f:finalizers': { 'v:"a"': {}, 'v:"b"': {} },
        'f:args': { 'i:0': {}, 'i:5': {} },
      },
    };
    const value = { spec: { suspend: true, containers: [{ name: 'c', image: 'busybox' }], finalizers: ['a'], args: ['x'] } };
    expect(fieldsWithin(set, value)).toEqual({
      'f:spec': {
        '.': {},
        'f:suspend': {},
        'f:containers': { 'k:{"name":"c"}': { '.': {}, 'f:name': {}, 'f:image': {} } },
        'f:finalizers': { 'v:"a"': {} },
        'f:args': { 'i:0': {} },
      },
    });
  });

  test('property: a resync tick queues each parent exactly once per period (every tick when the period is shorter)', () => {
    fc.assert(
      fc.property(fc.uuid(), fc.integer({ min: 61, max: 7_200 }), fc.integer({ min: 0, max: 10_000_000 }), (uid, period, start) => {
        const tick = 60_000;
        const t0 = Math.floor(start / tick) * tick * 1_000;
        let due = 0;
        const ticks = Math.ceil((period * 1000 * 5) / tick);
        for (let i = 1; i <= ticks; i += 1) if (resyncDue(uid, period, new Date(t0 + i * tick), tick) !== undefined) due += 1;
        const periods = (ticks * tick) / (period * 1000);
        return due >= Math.floor(periods) && due <= Math.ceil(periods);
      }),
      { numRuns: 300 },
    );
    expect(resyncDue('u', 5, new Date(0), 60_000)).toBe(0);
  });
});

describe('the SnapshotSchedule hooks', () => {
  const schedule = { ...parent, spec: { snapshotInterval: '6h', snapshotTTL: '1d' } };
  const pvc: KubeObject = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'data', namespace: 'ns', uid: 'pvc' } };
  const h = 3_600_000;
  test('one snapshot per interval, named by PVC and interval start; expired ones are no longer answered', () => {
    const first = mapSnapshots({ controller: parent, parent: schedule, mapKey: 'pvc', input: pvc, outputs: {} }, 7 * h).outputs;
    expect(first.map((o) => o.metadata.name)).toEqual([`data-${(6 * h) / 1000}`]);
    const later = mapSnapshots(
      { controller: parent, parent: schedule, mapKey: 'pvc', input: pvc, outputs: outputMap(first) },
      13 * h,
    ).outputs;
    expect(later.map((o) => o.metadata.name)).toEqual([`data-${(6 * h) / 1000}`, `data-${(12 * h) / 1000}`]);
    const muchLater = mapSnapshots(
      { controller: parent, parent: schedule, mapKey: 'pvc', input: pvc, outputs: outputMap(later) },
      31 * h,
    ).outputs;
    expect(muchLater.map((o) => o.metadata.name)).toEqual([`data-${(12 * h) / 1000}`, `data-${(30 * h) / 1000}`]);
    // Answered again in the same interval: the same objects, so nothing is written.
    expect(
      mapSnapshots({ controller: parent, parent: schedule, mapKey: 'pvc', input: pvc, outputs: outputMap(later) }, 14 * h).outputs,
    ).toEqual(later);
  });
  test("a long PVC name cut where it has a '-' or '.' still makes a valid snapshot name and label value (audit L9)", () => {
    const subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
    const labelValue = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
    for (const name of [`${'a'.repeat(62)}-b`, `${'a'.repeat(199)}.b`, `${'a'.repeat(198)}-.b`]) {
      const input = { ...pvc, metadata: { ...pvc.metadata, name } };
      const [snap] = mapSnapshots({ controller: parent, parent: schedule, mapKey: 'pvc', input, outputs: {} }, 7 * h).outputs;
      expect(snap!.metadata.name).toMatch(subdomain);
      expect(Object.values(snap!.metadata.labels ?? {})[0]).toMatch(labelValue);
    }
  });
  test('a gone PVC keeps its snapshots until their TTL', () => {
    const snaps = mapSnapshots({ controller: parent, parent: schedule, mapKey: 'pvc', input: pvc, outputs: {} }, 7 * h).outputs;
    expect(keepSnapshots({ controller: parent, parent: schedule, mapKey: 'pvc', outputs: outputMap(snaps) }, 20 * h).outputs).toEqual(
      snaps,
    );
    expect(keepSnapshots({ controller: parent, parent: schedule, mapKey: 'pvc', outputs: outputMap(snaps) }, 31 * h).outputs).toEqual([]);
  });
  test('durations', () => {
    expect(parseDuration('10d')).toBe(864_000_000);
    expect(() => parseDuration('6 hours')).toThrow(/not a duration: "6 hours"/);
    expect(() => parseDuration('0s')).toThrow(/not a duration/);
  });
});

describe('incremental passes', () => {
  test('the last answer holds while the input, its outputs, the parent generation and the definition are as answered, and no output of it is named', () => {
    const input = cm('in', { uid: 'k', resourceVersion: '7' });
    const outputs = [cm('in-copy', { namespace: 'ns', uid: 'o1' })];
    const at = { parentGeneration: 2, controller: 'mc', generation: 1 };
    const previous = { ...at, inputs: { k: answerFingerprint(input, outputs) } };
    const none = new Set<string>();
    expect(answerHolds(previous, at, input, outputs, none)).toBe(true);
    expect(answerHolds(undefined, at, input, outputs, none)).toBe(false);
    expect(answerHolds(previous, { ...at, parentGeneration: 3 }, input, outputs, none)).toBe(false);
    expect(answerHolds(previous, { ...at, generation: 2 }, input, outputs, none)).toBe(false);
    expect(answerHolds(previous, at, cm('in', { uid: 'k', resourceVersion: '8' }), outputs, none)).toBe(false);
    expect(answerHolds(previous, at, input, [], none)).toBe(false); // an output was deleted
    expect(answerHolds(previous, at, input, [...outputs, cm('extra', { namespace: 'ns' })], none)).toBe(false);
    expect(answerHolds(previous, at, input, outputs, new Set(['o1']))).toBe(false); // someone changed it
    // The fingerprint is of identities, whatever order they are listed in.
    const two = [cm('a', { namespace: 'ns' }), cm('b', { namespace: 'ns' })];
    expect(answerFingerprint(input, two)).toBe(answerFingerprint(input, [...two].reverse()));
  });
});

describe('the webhook contract', () => {
  test.each([
    ['https://hooks.example/map', false, undefined],
    ['http://hooks.example/map', false, /https only/],
    // A name over plain http: its addresses must be loopback when it connects (test/unit/hook-egress.test.ts).
    ['http://hooks.example/map', true, undefined],
    ['http://127.0.0.1:8080/map', false, /https only/],
    ['http://127.0.0.1:8080/map', true, undefined],
    ['http://localhost/map', true, undefined],
    ['http://[::1]:9/map', true, undefined],
    ['http://10.0.0.1/map', true, /https only/],
    ['https://user:pw@hooks.example/map', false, /credentials/],
  ])('webhook URL %s (loopback http allowed: %s)', (url, allow, refusal) => {
    const why = webhookRefusal(url, allow);
    if (refusal) expect(why).toMatch(refusal);
    else expect(why).toBeUndefined();
  });

  test('answers: at most MAX_OUTPUTS_PER_ANSWER outputs, each named as the apiserver names objects', () => {
    const many = (n: number) => ({ outputs: Array.from({ length: n }, (_, i) => cm(`c${i}`)) });
    expect(parseHookResponse(many(MAX_OUTPUTS_PER_ANSWER))).toHaveLength(MAX_OUTPUTS_PER_ANSWER);
    expect(() => parseHookResponse(many(MAX_OUTPUTS_PER_ANSWER + 1))).toThrow(/at most/);
    expect(() => parseHookResponse({ outputs: [cm('a b')] })).toThrow(/outputs.0.metadata.name/);
    expect(() => parseHookResponse({ outputs: [{ ...cm('a'), kind: 'Config Map' }] })).toThrow(/outputs.0.kind/);
  });
});
