// What a parent's history sync costs in DynamoDB write units, as DynamoDB Local reports them
// (ReturnConsumedCapacity): a sync that writes nothing costs the lease's acquire and release, and a sync that
// makes a revision costs the same whatever the parent's history length
// (docs/design/history-sync.md#the-history-record).
import { syncHistory } from '../../functions/history/sync.ts';
import type { SyncOutcome } from '../../functions/history/outcome.ts';
import type { RevisionPolicy } from '../../shared/history/policy.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import type { SyncKey } from '../../shared/ownership/index.ts';
import { statefulSetPolicy } from '../testbed/policies.ts';
import { adminClient, createNamespace, outriggerClient, testState, uniqueName } from '../testbed/index.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const kube = outriggerClient();
const state = testState();
let policy: RevisionPolicy;

/** Write and read units consumed by every DynamoDB call of `state`, as DynamoDB answers them. */
const consumed = { write: 0, read: 0 };
const WRITES = new Set(['PutItemCommand', 'UpdateItemCommand', 'DeleteItemCommand', 'TransactWriteItemsCommand', 'BatchWriteItemCommand']);
state.client.middlewareStack.add(
  (next, context) => async (args) => {
    (args.input as Record<string, unknown>).ReturnConsumedCapacity = 'TOTAL';
    const out = await next(args);
    const answered = (out.output as { ConsumedCapacity?: { CapacityUnits?: number } | Array<{ CapacityUnits?: number }> }).ConsumedCapacity;
    const units = [answered ?? []].flat().reduce((sum, c) => sum + (c.CapacityUnits ?? 0), 0);
    if (WRITES.has(context.commandName ?? '')) consumed.write += units;
    else consumed.read += units;
    return out;
  },
  { step: 'initialize', name: 'consumedCapacity' },
);

beforeAll(async () => {
  policy = await statefulSetPolicy(kube);
});

const template = (image: string) => ({ metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image }] } });

const keyOf = (o: KubeObject): SyncKey => ({
  cluster: 'it',
  group: 'apps',
  kind: 'StatefulSet',
  namespace: o.metadata.namespace,
  name: o.metadata.name!,
  uid: o.metadata.uid!,
});

/** The units one sync consumed. */
async function measured(sync: () => Promise<SyncOutcome>): Promise<{ outcome: SyncOutcome; write: number; read: number }> {
  const before = { ...consumed };
  const outcome = await sync();
  return { outcome, write: consumed.write - before.write, read: consumed.read - before.read };
}

/**
 * A parent with `length` revisions: the units of the sync that made the last one, and of a sync of a generated
 * object's event after it (it takes the lease, lists, and finds nothing to write).
 */
async function costsAt(length: number) {
  const ns = await createNamespace('hcost');
  const admin = adminClient();
  let sts = await admin.create<KubeObject>(statefulSets, {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: ns },
    spec: { serviceName: 'web', replicas: 1, selector: { matchLabels: { app: 'web' } }, template: template('registry.example/app:1') },
  });
  const deps = { kube, state, holder: uniqueName('cost') };
  const ownEvent = (o: KubeObject) =>
    syncHistory(deps, policy, keyOf(o), [`StatefulSet/it/${o.metadata.uid}/${o.metadata.resourceVersion}/modified`], o);
  let change = await measured(() => ownEvent(sts));
  for (let image = 2; image <= length; image += 1) {
    sts = await admin.patch<KubeObject>(
      statefulSets,
      { name: 'web', namespace: ns },
      { spec: { template: template(`registry.example/app:${image}`) } },
      'merge',
    );
    change = await measured(() => ownEvent(sts));
  }
  expect(change.outcome).toMatchObject({ outcome: 'created', number: length });
  const noop = await measured(() => syncHistory(deps, policy, keyOf(sts), [`Pod/it/${uniqueName('pod')}/1/modified`]));
  expect(noop.outcome).toMatchObject({ outcome: 'unchanged', number: length });
  return { length, revisionSync: change.write, noopSync: noop.write, revisionSyncReads: change.read, noopSyncReads: noop.read };
}

test('a sync under the lease that writes nothing costs at most 2 write units, and one that makes a revision the same at any history length', async () => {
  const figures = [];
  for (const length of [1, 10, 100]) figures.push(await costsAt(length));
  // The figures measured, for docs/operations/cost.md and bench/cost.ts's model.
  console.log(JSON.stringify({ dynamodbUnitsPerSync: figures }));
  for (const f of figures) expect(f.noopSync).toBeLessThanOrEqual(2);
  expect(figures[2]!.revisionSync).toBe(figures[0]!.revisionSync);
}, 300_000);
