// Outrigger's migrator on the real apiserver and its etcd, as the `migrator` identity: objects are rewritten
// without their bodies passing through JavaScript, an expired continue token is gone on from rather than
// restarted, progress in status tells "finished" from "not started" and adds up over invocations, only
// Outrigger's migrations run, and kubectl shows them. Each test has its own CRD group, namespace and DynamoDB
// cluster id.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { randomUUID } from 'node:crypto';
import { LEADER_LEASE, migrations, storageStates } from '../../functions/storage/context.ts';
import { lead, recordMigration } from '../../functions/storage/leader.ts';
import { runMigration, type MigratorContext } from '../../functions/storage/migrator.ts';
import { pollReporter } from '../../functions/storage/poll.ts';
import { Resources, getResourceList, isKubeError, type GVR, type KubeError, type KubeObject } from '../../shared/kube/index.ts';
import {
  HASH_ANNOTATION,
  migrationRecordKey,
  MIGRATOR_LABEL,
  MIGRATOR_LABEL_VALUE,
  MIGRATOR_LEASE_MS,
  progressOf,
  storageVersionHash,
  type StorageState,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';
import { compactEtcd, etcdRead, recordCompaction, registryKey } from '../testbed/etcd.ts';
import { storageTestContext } from '../testbed/storage-scene.ts';
import {
  adminClient,
  createNamespace,
  eventually,
  migratorClient,
  outriggerClient,
  testbed,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { kubectl } from '../testbed/kubectl.ts';
import { widgetCrd } from '../testbed/widgets.ts';

interface CRD extends KubeObject {
  spec: { versions: Array<{ name: string; served: boolean; storage: boolean }> };
  status?: { storedVersions?: string[] };
}

const admin = adminClient();

function migratorContext(): MigratorContext {
  return {
    cluster: uniqueName('migrator'),
    kube: migratorClient(),
    state: testState(),
    holder: `test-${randomUUID()}`,
    now: () => new Date(),
  };
}

/**
 * A migration of the resource, made as the storage leader makes one (recorded under the migrator's cluster id,
 * fenced on the leader's lease, then created) or, with `recordFor` undefined, as anyone who may create a migration
 * could make one; `labelled` routes it to Outrigger's migrator.
 */
async function migrationOf(r: GVR, recordFor: MigratorContext | undefined, labelled = true): Promise<string> {
  const name = uniqueName('m');
  const labels: Record<string, string> = labelled ? { [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE } : {};
  const hash = 'test-hash';
  if (recordFor) {
    const lease = await recordFor.state.leases.acquire(recordFor.cluster, LEADER_LEASE, `leader-${randomUUID()}`, 60_000);
    await recordMigration(recordFor.state, recordFor.cluster, lease!, name, {
      state: `${r.resource}.${r.group}`,
      resource: { group: r.group, version: r.version, resource: r.resource },
      hash,
    });
    await recordFor.state.leases.release(lease!);
  }
  await admin.create(migrations, {
    apiVersion: 'migration.k8s.io/v1alpha1',
    kind: 'StorageVersionMigration',
    metadata: { name, labels, annotations: { [HASH_ANNOTATION]: hash } },
    spec: { resource: { group: r.group, version: r.version, resource: r.resource } },
  });
  return name;
}

const migrationNamed = (name: string) => admin.get<StorageVersionMigration>(migrations, { name });

async function widgets(r: GVR, ns: string, n: number): Promise<void> {
  for (let i = 0; i < n; i += 1)
    await admin.create(r, {
      apiVersion: `${r.group}/v1`,
      kind: 'Widget',
      metadata: { name: `w${i}`, namespace: ns },
      spec: { i },
    } as KubeObject);
}

/** The admin's request with the apiserver's answer as the text it sent: nothing parses the JSON in between. */
function raw(method: 'GET' | 'POST', path: string, body?: string, accept = 'application/json'): Promise<{ status: number; text: string }> {
  const bed = testbed();
  const url = new URL(bed.server + path);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      authorization: `Bearer ${bed.tokens.admin}`,
      accept,
      ...(body ? { 'content-type': 'application/json' } : {}),
    };
    const req = request(
      { hostname: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, ca: readFileSync(bed.caFile) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const resourceVersionOf = (text: string) => /"resourceVersion":"(\d+)"/.exec(text)?.[1];
/** The object's text with its resourceVersion (which a rewrite changes: it is etcd's revision of the write) masked. */
const withoutResourceVersion = (text: string) => text.replace(/"resourceVersion":"\d+"/, '"resourceVersion":"-"');

async function moveStorageTo(crdName: string, group: string, to: string): Promise<void> {
  const current = await admin.get<CRD>(Resources.customResourceDefinitions, { name: crdName });
  await admin.patch(
    Resources.customResourceDefinitions,
    { name: crdName },
    { spec: { versions: current.spec.versions.map((v) => ({ ...v, storage: v.name === to })) } },
    'merge',
  );
  const hash = storageVersionHash(group, to, 'Widget');
  await eventually(
    async () => (await getResourceList(admin, group, 'v1')).resources.find((r) => r.name === 'widgets')?.storageVersionHash === hash,
    30_000,
  );
}

describe("Outrigger's migrator", () => {
  test('an int64 above 2^53 and a large, deeply nested object come back byte for byte, while etcd holds them in the new storage version', async () => {
    const group = `${uniqueName('mig')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('migrator');
    const base = `/apis/${group}/v1/namespaces/${ns}/widgets`;
    // Written as text: JSON.stringify cannot even express these numbers.
    const numbers = `{"apiVersion":"${group}/v1","kind":"Widget","metadata":{"name":"numbers"},"spec":{"big":9007199254740993,"negative":-9007199254740993,"max":9223372036854775807,"fraction":0.1,"tiny":5e-324}}`;
    let nested = '{"leaf":"\\u2028 é 😀"}';
    for (let i = 0; i < 200; i += 1) nested = `{"n${i % 7}":${nested},"i":${i}}`;
    const large = `{"apiVersion":"${group}/v1","kind":"Widget","metadata":{"name":"large"},"spec":{"nested":${nested},"rows":[${Array.from({ length: 4_000 }, (_, i) => `{"id":${i},"text":"${'x'.repeat(100)}","n":${2 ** 53 + i * 2 + 1}}`).join(',')}]}}`;
    for (const body of [numbers, large]) expect((await raw('POST', base, body)).status).toBe(201);
    const before = new Map<string, string>();
    for (const name of ['numbers', 'large']) before.set(name, (await raw('GET', `${base}/${name}`)).text);
    expect(before.get('numbers')).toContain('"big":9007199254740993');
    expect(before.get('large')!.length).toBeGreaterThan(500_000);
    const key = (name: string) => registryKey({ group, resource: 'widgets', namespace: ns, name });
    expect((await etcdRead(key('numbers')))?.toString()).toContain(`"apiVersion":"${group}/v1"`);

    await moveStorageTo(crd.name, group, 'v2');
    const ctx = migratorContext();
    const result = await runMigration(ctx, await migrationOf(crd.resource, ctx));
    expect(result).toMatchObject({ outcome: 'Succeeded', rewritten: 2, storedVersions: ['v2'] });

    for (const [name, text] of before) {
      const after = (await raw('GET', `${base}/${name}`)).text;
      expect(withoutResourceVersion(after)).toBe(withoutResourceVersion(text));
      // Rewritten in etcd: a new revision, and the stored object is now in v2.
      expect(resourceVersionOf(after)).not.toBe(resourceVersionOf(text));
      const stored = (await etcdRead(key(name)))!.toString();
      expect(stored).toContain(`"apiVersion":"${group}/v2"`);
    }
    expect((await etcdRead(key('numbers')))!.toString()).toContain('"big":9007199254740993');
    // Metadata lists and merge patches only: no object body is read or sent by the migrator (its own status writes
    // are JSON patches that test the migration's uid first).
    expect(Object.keys(ctx.kube.stats.byVerb).sort()).toEqual(['get', 'list/metadata', 'patch/json', 'patch/merge']);
    expect((await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name })).status?.storedVersions).toEqual(['v2']);
  });

  test("an expired continue token: the list goes on from the apiserver's token, not from the start", async () => {
    const group = `${uniqueName('mig')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('migrator');
    await widgets(crd.resource, ns, 6);
    const ctx = migratorContext();
    const name = await migrationOf(crd.resource, ctx);
    expect(await runMigration(ctx, name, { chunk: 2, shouldPause: () => true })).toMatchObject({ outcome: 'paused', rewritten: 2 });
    const token = progressOf(await migrationNamed(name))!.continueToken!;
    expect(token).toBeTruthy();

    // The revision moves on, and etcd forgets what came before.
    for (let i = 0; i < 6; i += 1) await admin.patch(crd.resource, { name: `w${i}`, namespace: ns }, { spec: { touched: i } }, 'merge');
    const revision = await compactEtcd();
    // Kubernetes 1.35 still serves the token from its watch cache: etcd's compaction alone expires nothing.
    expect((await admin.listMetadata(crd.resource, { limit: 2, continue: token })).items.map((i) => i.metadata.name)).toEqual(['w2', 'w3']);
    // Once the apiserver learns of the compaction (as from its own compactor), it answers 410 with a token.
    await recordCompaction(revision);
    const expired = await eventually(
      () =>
        admin.listMetadata(crd.resource, { limit: 2, continue: token }).then(
          () => undefined,
          (err: unknown) => (isKubeError(err, 'Gone') ? err : Promise.reject(err)),
        ),
      40_000,
    );
    expect((expired as KubeError).continueToken).toBeTruthy();

    ctx.kube.stats.reset();
    const resumed = await runMigration(ctx, name, { chunk: 2 });
    // The expired list (1), then w2-w3 and w4-w5 from the apiserver's token: w0 and w1 are not rewritten again.
    expect(resumed).toMatchObject({ outcome: 'Succeeded', expiredTokens: 1, chunks: 2, rewritten: 4 });
    expect(ctx.kube.stats.byVerb['list/metadata']).toBe(3);
    const progress = progressOf(await migrationNamed(name));
    expect(progress).toMatchObject({ complete: true, rewritten: 6, expiredTokens: 1 });
    expect(progress?.restarts).toBeUndefined();
  }, 90_000);

  test('"finished" is not "not started": a run whose last write was lost only finishes; counts add up over invocations and kubectl shows them', async () => {
    const group = `${uniqueName('mig')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('migrator');
    await widgets(crd.resource, ns, 5);
    const ctx = migratorContext();
    const name = await migrationOf(crd.resource, ctx);
    expect(await runMigration(ctx, name, { chunk: 3, shouldPause: () => true })).toMatchObject({ outcome: 'paused', rewritten: 3 });
    expect(await runMigration(ctx, name, { chunk: 3 })).toMatchObject({ outcome: 'Succeeded', rewritten: 2 });
    let svm = await migrationNamed(name);
    expect(progressOf(svm)).toMatchObject({ complete: true, continueToken: '', rewritten: 5, chunks: 2 });
    expect(svm.status?.conditions?.find((c) => c.type === 'Succeeded')?.message).toMatch(/^rewrote 5 object/);

    // The invocation that wrote the last chunk died before its Succeeded condition landed: Running, as it left it.
    const running = svm.status!.conditions!.map((c) => (c.type === 'Succeeded' ? { ...c, type: 'Running' } : c));
    await admin.patch(migrations, { name, subresource: 'status' }, { status: { conditions: running } }, 'merge');
    const again = await runMigration(ctx, name, { chunk: 3 });
    expect(again).toMatchObject({ outcome: 'Succeeded', chunks: 0, rewritten: 0 });
    svm = await migrationNamed(name);
    expect(progressOf(svm)).toMatchObject({ complete: true, rewritten: 5, chunks: 2 });

    // kubectl: the full name (the plural alone is the in-tree storagemigration.k8s.io API here), the short name, the category.
    const table = await kubectl('get', 'storageversionmigrations.migration.k8s.io', name);
    const [header = '', row = ''] = table.split('\n');
    // Columns start where their headings do (an empty cell is blanks).
    const starts = [...header.matchAll(/\S+/g)].map((m) => m.index);
    const cells = Object.fromEntries(starts.map((at, i) => [header.slice(at).split(/\s/)[0], row.slice(at, starts[i + 1]).trim()]));
    expect(Object.keys(cells)).toEqual(['NAME', 'RESOURCE', 'GROUP', 'RUNNING', 'SUCCEEDED', 'FAILED', 'REWRITTEN', 'LISTED', 'AGE']);
    expect(cells).toMatchObject({
      NAME: name,
      RESOURCE: 'widgets',
      GROUP: group,
      RUNNING: '',
      SUCCEEDED: 'True',
      FAILED: '',
      REWRITTEN: '5',
      LISTED: 'true',
    });
    expect(await kubectl('get', 'svm', name, '-o', 'jsonpath={.status.progress.rewritten}')).toBe('5');
    await expect(kubectl('get', 'storageversionmigrations', name)).rejects.toMatchObject({
      stderr: expect.stringContaining(`storageversionmigrations.storagemigration.k8s.io "${name}" not found`),
    });
    expect(await kubectl('get', 'outrigger', '-A', '-o', 'name')).toContain(`storageversionmigration.migration.k8s.io/${name}`);
    expect((await kubectl('api-resources', '--categories', 'outrigger', '-o', 'name')).trim().split('\n').sort()).toEqual([
      'compositecontrollers.metacontroller.k8s.io',
      'decoratorcontrollers.metacontroller.k8s.io',
      'mapcontrollers.metacontroller.k8s.io',
      'revisionpolicies.outrigger.dev',
      'storagestates.migration.k8s.io',
      'storageversionmigrations.migration.k8s.io',
    ]);
  });

  test("only Outrigger's migrations run, and storedVersions is narrowed only for a run this migrator verified end to end", async () => {
    const group = `${uniqueName('mig')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('migrator');
    await widgets(crd.resource, ns, 4);
    await moveStorageTo(crd.name, group, 'v2');
    const ctx = migratorContext();

    // Not labelled (kube-storage-version-migrator's, someone else's): left alone, even when recorded.
    const foreign = await migrationOf(crd.resource, ctx, false);
    expect(await runMigration(ctx, foreign)).toMatchObject({ outcome: 'not-ours', rewritten: 0 });
    expect((await migrationNamed(foreign)).status).toBeUndefined();
    // Labelled and recorded by the leader: run.
    await admin.patch(migrations, { name: foreign }, { metadata: { labels: { [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE } } }, 'merge');
    expect(await runMigration(ctx, foreign, { chunk: 2, shouldPause: () => true })).toMatchObject({ outcome: 'paused', rewritten: 2 });

    // The CRD changes during the run (its storage version does not): every object is still rewritten, but the
    // migrator cannot vouch that nothing was written in between through another version, so storedVersions stays.
    await admin.patch(
      Resources.customResourceDefinitions,
      { name: crd.name },
      { metadata: { annotations: { touched: 'yes' } }, spec: { names: { shortNames: ['wdg'] } } },
      'merge',
    );
    const done = await runMigration(ctx, foreign, { chunk: 2 });
    expect(done).toMatchObject({ outcome: 'Succeeded', rewritten: 2 });
    expect(done.storedVersions).toBeUndefined();
    expect(done.message).toMatch(/status\.storedVersions left as it is: the CRD changed during the run \(generation 2 to 3\)/);
    expect((await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name })).status?.storedVersions).toEqual(['v1', 'v2']);

    // A fresh run, with the CRD left alone, narrows it.
    expect(await runMigration(ctx, await migrationOf(crd.resource, ctx))).toMatchObject({ outcome: 'Succeeded', storedVersions: ['v2'] });
    expect((await admin.get<CRD>(Resources.customResourceDefinitions, { name: crd.name })).status?.storedVersions).toEqual(['v2']);
  });

  test('the leader step queues again a migration nothing is working on: Pending, or Running with no progress, for longer than the lease', async () => {
    const group = `${uniqueName('mig')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('migrator');
    await widgets(crd.resource, ns, 4);
    const queued: string[][] = [];
    const base = Date.now();
    let clock = base;
    const ctx = storageTestContext({
      now: () => new Date(clock),
      queueMigrations: async (ms, cause) => {
        queued.push(ms.map((m) => `${cause}:${m.metadata.name}`));
      },
    });
    const polled = await pollReporter(ctx, { id: 'apiserver', client: outriggerClient() }, { groups: [group] });
    const name = polled.leader!.created[0]!;
    expect((await migrationNamed(name)).metadata.labels).toMatchObject({ [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE });
    const state = await ctx.kube.get<StorageState>(storageStates, { name: crd.name });
    const step = (minutes: number) => {
      clock = base + minutes * 60_000;
      return lead(ctx, { states: [state] });
    };

    // Its event's message was lost: Pending, queued again once older than the migrator's lease.
    expect((await step(1)).resumed).toEqual([]);
    expect((await step(MIGRATOR_LEASE_MS / 60_000 + 1)).resumed).toEqual([name]);
    expect(queued).toEqual([[`resume:${name}`]]);

    // Running, its invocation dead after one chunk: queued again once its progress is older than the lease.
    const migrator = { ...migratorContext(), cluster: ctx.cluster, now: () => new Date(clock) };
    clock = base + 20 * 60_000;
    expect(await runMigration(migrator, name, { chunk: 2, shouldPause: () => true })).toMatchObject({ outcome: 'paused' });
    expect((await step(25)).resumed).toEqual([]);
    expect((await step(20 + MIGRATOR_LEASE_MS / 60_000 + 1)).resumed).toEqual([name]);
    // Finished: never again.
    expect(await runMigration(migrator, name)).toMatchObject({ outcome: 'Succeeded' });
    expect((await step(120)).resumed).toEqual([]);
  });

  test('trust boundary: the label grants nothing; the migrator runs only what the storage leader recorded, as recorded', async () => {
    const group = `${uniqueName('mig')}.storage.test`;
    const crd = await widgetCrd(group);
    const ns = await createNamespace('migrator');
    await widgets(crd.resource, ns, 3);
    const ctx = migratorContext();
    const untouched = async (name: string) => {
      expect((await migrationNamed(name)).status).toBeUndefined();
      const items = await admin.list(crd.resource, { namespace: ns });
      return items.items.map((i) => i.metadata.resourceVersion);
    };
    const before = (await admin.list(crd.resource, { namespace: ns })).items.map((i) => i.metadata.resourceVersion);

    // A forged migration carrying the label, which anyone who may create migrations (every function's group)
    // can make: not run, its status not written, no object rewritten.
    const forged = await migrationOf(crd.resource, undefined);
    expect(await runMigration(ctx, forged)).toMatchObject({ outcome: 'not-recorded', rewritten: 0 });
    expect(await untouched(forged)).toEqual(before);

    // A recorded name whose migration was replaced by one for another resource: not run either.
    const recorded = await migrationOf(crd.resource, ctx);
    await admin.delete(migrations, { name: recorded });
    await eventually(async () => !(await admin.find(migrations, { name: recorded })));
    await admin.create(migrations, {
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageVersionMigration',
      metadata: { name: recorded, labels: { [MIGRATOR_LABEL]: MIGRATOR_LABEL_VALUE }, annotations: { [HASH_ANNOTATION]: 'test-hash' } },
      spec: { resource: { group: '', version: 'v1', resource: 'secrets' } },
    });
    const swapped = await runMigration(ctx, recorded);
    expect(swapped).toMatchObject({ outcome: 'not-recorded', rewritten: 0 });
    expect(swapped.message).toContain(`it names secrets./v1, the storage leader recorded widgets.${group}/v1`);
    expect((await migrationNamed(recorded)).status).toBeUndefined();

    // A record written by a leader whose lease is gone fails its fence: nothing to trust.
    const stale = await ctx.state.leases.acquire(ctx.cluster, LEADER_LEASE, 'deposed', 60_000);
    await ctx.state.leases.release(stale!);
    await expect(
      recordMigration(ctx.state, ctx.cluster, stale!, 'deposed-leaders', {
        state: crd.name,
        resource: { group, version: 'v1', resource: 'widgets' },
        hash: 'test-hash',
      }),
    ).rejects.toThrow();
    expect(await ctx.state.records.get(migrationRecordKey(ctx.cluster, 'deposed-leaders'))).toBeUndefined();
  });
  test('a run whose migration was deleted and made again under its name writes nothing into the successor', async () => {
    const crd = await widgetCrd(`${uniqueName('reuse')}.storage.test`);
    const ns = await createNamespace('reuse');
    await widgets(crd.resource, ns, 5);
    const ctx = migratorContext();
    const name = await migrationOf(crd.resource, ctx);
    const successor = async () => {
      const old = await migrationNamed(name);
      await admin.delete(migrations, { name }, { preconditions: { uid: old.metadata.uid! } });
      await admin.create(migrations, {
        apiVersion: 'migration.k8s.io/v1alpha1',
        kind: 'StorageVersionMigration',
        metadata: { name, labels: old.metadata.labels, annotations: old.metadata.annotations },
        spec: old.spec,
      });
    };
    // The migration is cancelled and a successor made under its name (a retry, or a decision made again) while
    // this run rewrites its first chunk: its progress write then addresses the name, which is the successor's.
    let statusWrites = 0;
    const kube = ctx.kube;
    const racing = new Proxy(kube, {
      get(target, prop) {
        if (prop === 'patch')
          return async (...args: Parameters<typeof kube.patch>) => {
            if (args[0] === migrations && args[1].subresource === 'status' && ++statusWrites === 2) await successor();
            return target.patch(...args);
          };
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    await expect(runMigration({ ...ctx, kube: racing }, name, { chunk: 2 })).rejects.toThrow();
    expect(statusWrites).toBe(2);
    expect((await migrationNamed(name)).status).toBeUndefined();
  });
});
