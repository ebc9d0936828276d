// The map pass's branches on the in-memory fake: outputs created, updated and left alone (map one input),
// detached outputs deleted or kept by the tombstone hook (reap detached outputs), and objects another controller
// owns never touched. What the apiserver does with the same writes (server-side apply, managedFields, the garbage
// collector) is in the map-* integration tests.
import type { ResolvedMapController } from '../../functions/map/controllers.ts';
import type { MapContext } from '../../functions/map/pass.ts';
import { syncMap } from '../../functions/map/sync.ts';
import type { HookCaller } from '../../shared/hooks/index.ts';
import { gvr, type DeleteOptions, type KubeObject, type ResolvedResource, type Stored } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import { MAP_KEY_LABEL, PARENT_LABEL, parseMapController, type MapHookRequest, type TombstoneHookRequest } from '../../shared/map/api.ts';
import { controllerOf, newControllerRef, type SyncKey } from '../../shared/ownership/index.ts';
import { FakeKube } from '../fakes/kube.ts';

const parents: ResolvedResource = { ...gvr('example.test', 'v1', 'parents'), kind: 'Parent', namespaced: true };
const inputs: ResolvedResource = { ...gvr('', 'v1', 'configmaps'), kind: 'ConfigMap', namespaced: true };
const outputs: ResolvedResource = { ...gvr('example.test', 'v1', 'outputs'), kind: 'Output', namespaced: true };
const ns = 'ns';

/** One output per input, `<input>-out`, carrying the input's data.v. */
function mapAnswer(req: MapHookRequest) {
  const v = (req.input.data as { v?: string } | undefined)?.v ?? '';
  return {
    outputs: [{ apiVersion: 'example.test/v1', kind: 'Output', metadata: { name: `${req.input.metadata.name ?? ''}-out` }, spec: { v } }],
  };
}

function scene(opts: { tombstone?: (req: TombstoneHookRequest) => unknown } = {}) {
  const kube = new FakeKube();
  const object: KubeObject = {
    apiVersion: 'metacontroller.k8s.io/v1alpha1',
    kind: 'MapController',
    metadata: { name: 'mapper', uid: 'mc-uid', generation: 1 },
    spec: {
      parentResource: { apiVersion: 'example.test/v1', resource: 'parents' },
      inputResources: [{ apiVersion: 'v1', resource: 'configmaps' }],
      outputResources: [{ apiVersion: 'example.test/v1', resource: 'outputs' }],
      hooks: {
        map: { webhook: { url: 'https://hooks.test/map' } },
        ...(opts.tombstone ? { tombstone: { webhook: { url: 'https://hooks.test/tombstone' } } } : {}),
      },
    },
  };
  const mc: ResolvedMapController = {
    ...parseMapController(object),
    serviceAccount: { namespace: ns, name: 'mapper' },
    parent: parents,
    parentStatus: true,
    inputs: [inputs],
    outputs: [{ ...outputs, updateMethod: 'InPlace' }],
  };
  const hooks: HookCaller = {
    call: async (hook, request) =>
      hook === mc.spec.hooks.map ? mapAnswer(request as MapHookRequest) : opts.tombstone!(request as TombstoneHookRequest),
  };
  const warnings: Array<Record<string, unknown>> = [];
  const log: Log = (level, _message, fields) => {
    if (level === 'warn') warnings.push(fields ?? {});
  };
  const ctx: MapContext = { kube, hooks, log };
  const [parent] = kube.seed<KubeObject>(parents, {
    apiVersion: 'example.test/v1',
    kind: 'Parent',
    metadata: { name: 'p', namespace: ns },
    spec: { selector: { matchLabels: { app: 'a' } } },
  });
  const key: SyncKey = { cluster: 'test', group: 'example.test', kind: 'Parent', namespace: ns, name: 'p', uid: parent!.metadata.uid };
  const input = (name: string, v: string) =>
    kube.seed<KubeObject>(inputs, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: ns, labels: { app: 'a' } },
      data: { v },
    })[0]!;
  const output = (name: string) => kube.peek(outputs, { name, namespace: ns });
  const pass = async () => {
    kube.stats.reset();
    return syncMap(ctx, mc, key);
  };
  /** Writes to outputs in the last pass (the parent's status write aside). */
  const outputWrites = () => ['create', 'patch/apply', 'delete'].reduce((n, verb) => n + (kube.stats.byVerb[verb] ?? 0), 0);
  return { kube, parent: { ...parent!, apiVersion: 'example.test/v1', kind: 'Parent' }, input, output, pass, outputWrites, warnings };
}

describe('the map pass: map one input', () => {
  test('creates an output per input, owned by the parent and labelled with its map key; a pass with nothing changed writes nothing', async () => {
    const { parent, input, output, pass, outputWrites } = scene();
    const a = input('a', '1');
    input('b', '2');
    expect(await pass()).toMatchObject({ inputs: 2, created: 2, updated: 0, deleted: 0, problems: [], statusWritten: true });
    const out = output('a-out')!;
    expect(controllerOf(out)?.uid).toBe(parent.metadata.uid);
    expect(out.metadata.labels).toMatchObject({ [MAP_KEY_LABEL]: a.metadata.uid, [PARENT_LABEL]: parent.metadata.uid });
    expect(out.spec).toEqual({ v: '1' });
    expect(await pass()).toMatchObject({ created: 0, updated: 0, deleted: 0, unchanged: 2, statusWritten: false });
    expect(outputWrites()).toBe(0);
  });

  test('updates the output of an input whose answer changed, and only that one', async () => {
    const { kube, input, output, pass, outputWrites } = scene();
    input('a', '1');
    input('b', '2');
    await pass();
    const before = output('b-out')!.metadata.resourceVersion;
    kube.touch(inputs, { name: 'a', namespace: ns }, (o) => (o.data = { v: '9' }));
    expect(await pass()).toMatchObject({ created: 0, updated: 1, unchanged: 1, problems: [] });
    expect(outputWrites()).toBe(1);
    expect(output('a-out')!.spec).toEqual({ v: '9' });
    expect(output('b-out')!.metadata.resourceVersion).toBe(before);
  });

  test("an answered name that is someone else's object is not taken over: the input fails, the object is left alone", async () => {
    const { kube, input, output, pass, warnings } = scene();
    const [other] = kube.seed<KubeObject>(parents, {
      apiVersion: 'example.test/v1',
      kind: 'Parent',
      metadata: { name: 'other', namespace: ns },
    });
    kube.seed<KubeObject>(outputs, {
      apiVersion: 'example.test/v1',
      kind: 'Output',
      metadata: {
        name: 'a-out',
        namespace: ns,
        ownerReferences: [newControllerRef({ ...other!, apiVersion: 'example.test/v1', kind: 'Parent' })],
      },
      spec: { v: 'theirs' },
    });
    input('a', '1');
    const result = await pass();
    expect(result).toMatchObject({ created: 0, updated: 0, problems: [{ reason: 'InvalidOutput' }] });
    expect(output('a-out')!.spec).toEqual({ v: 'theirs' });
    expect(controllerOf(output('a-out')!)?.uid).toBe(other!.metadata.uid);
    expect(warnings).toMatchObject([{ reason: 'InvalidOutput', parent: 'ns/p' }]);
  });
});

describe('the map pass: reap detached outputs', () => {
  test('the outputs of an input that is gone are deleted', async () => {
    const { kube, input, output, pass } = scene();
    input('a', '1');
    input('b', '2');
    await pass();
    await kube.delete(inputs, { name: 'a', namespace: ns });
    expect(await pass()).toMatchObject({ inputs: 1, deleted: 1, unchanged: 1, problems: [] });
    expect(output('a-out')).toBeUndefined();
    expect(output('b-out')).toBeDefined();
  });

  test('a detached output is deleted in the background (its own dependents go too), only as the pass read it', async () => {
    const { kube, input, pass } = scene();
    input('a', '1');
    await pass();
    const seen: DeleteOptions[] = [];
    const del = kube.delete.bind(kube);
    kube.delete = (r, ref, opts) => (seen.push(opts ?? {}), del(r, ref, opts));
    await kube.delete(inputs, { name: 'a', namespace: ns });
    seen.length = 0;
    expect(await pass()).toMatchObject({ deleted: 1 });
    // batch/v1 Jobs, among others, orphan their dependents when the delete names no propagation policy.
    expect(seen).toEqual([
      { propagationPolicy: 'Background', preconditions: { uid: expect.any(String), resourceVersion: expect.any(String) } },
    ]);
  });

  test('a detached output changed after the pass read it is left for the next pass, not counted as deleted', async () => {
    const { kube, input, output, pass } = scene();
    input('a', '1');
    await pass();
    await kube.delete(inputs, { name: 'a', namespace: ns });
    kube.beforeRequest = (verb, r) => {
      if (verb === 'delete' && r.resource === outputs.resource)
        kube.touch(outputs, { name: 'a-out', namespace: ns }, (o) => (o.metadata.annotations = { edited: 'yes' }));
    };
    expect(await pass()).toMatchObject({ deleted: 0 });
    kube.beforeRequest = undefined;
    expect(output('a-out')).toBeDefined();
    expect(await pass()).toMatchObject({ deleted: 1 });
    expect(output('a-out')).toBeUndefined();
  });

  test('an input that no longer matches the selector detaches its outputs too', async () => {
    const { kube, input, output, pass } = scene();
    input('a', '1');
    await pass();
    kube.touch(inputs, { name: 'a', namespace: ns }, (o) => (o.metadata.labels = { app: 'elsewhere' }));
    expect(await pass()).toMatchObject({ inputs: 0, deleted: 1 });
    expect(output('a-out')).toBeUndefined();
  });

  test('the tombstone hook keeps the detached outputs it answers; the rest are deleted', async () => {
    const kept: TombstoneHookRequest[] = [];
    const { kube, input, output, pass } = scene({
      tombstone: (req) => {
        kept.push(req);
        // Keeps a-out, drops b-out.
        return {
          outputs: Object.values(req.outputs).flatMap((byName) => Object.values(byName).filter((o) => o.metadata.name === 'a-out')),
        };
      },
    });
    input('a', '1');
    input('b', '2');
    await pass();
    await kube.delete(inputs, { name: 'a', namespace: ns });
    await kube.delete(inputs, { name: 'b', namespace: ns });
    expect(await pass()).toMatchObject({ inputs: 0, deleted: 1, detachedKept: 1, problems: [] });
    expect(kept).toHaveLength(2);
    expect(output('a-out')).toBeDefined();
    expect(output('b-out')).toBeUndefined();
  });

  test("an object labelled as the parent's output but controlled by another is never deleted", async () => {
    const { kube, parent, input, output, pass, outputWrites } = scene();
    const [other] = kube.seed<KubeObject>(parents, {
      apiVersion: 'example.test/v1',
      kind: 'Parent',
      metadata: { name: 'other', namespace: ns },
    });
    const a = input('a', '1');
    await pass();
    // Labelled with this parent and a map key whose input is gone, but another's ControllerRef.
    kube.seed<KubeObject>(outputs, {
      apiVersion: 'example.test/v1',
      kind: 'Output',
      metadata: {
        name: 'foreign',
        namespace: ns,
        labels: { [PARENT_LABEL]: parent.metadata.uid, [MAP_KEY_LABEL]: 'gone-input' },
        ownerReferences: [newControllerRef({ ...(other as Stored), apiVersion: 'example.test/v1', kind: 'Parent' })],
      },
    });
    expect(await pass()).toMatchObject({ deleted: 0, unchanged: 1, problems: [] });
    expect(outputWrites()).toBe(0);
    expect(output('foreign')).toBeDefined();
    expect(output('a-out')!.metadata.labels?.[MAP_KEY_LABEL]).toBe(a.metadata.uid);
  });
});
