// What the storage benchmarks make on the test bed: many CRDs, each a resource with a storage version hash of
// its own, in groups of 50; and the end state of migrations that all succeeded, set directly (running 1,000
// empty migrations measures nothing).
import { performance } from 'node:perf_hooks';
import pLimit from 'p-limit';
import { migrations, storageStates } from '../functions/storage/context.ts';
import type { Log } from '../local/process.ts';
import { Resources, getResourceList, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import { conditionsFor, type StorageState, type StorageVersionMigration } from '../shared/storage/index.ts';

const PER_GROUP = 50;
const limit = pLimit(16);

/** Creates `count` CRDs in groups `g<n>-<run>.bench.test` and resolves once discovery serves every one. */
export async function createCrds(admin: KubeClient, count: number, run: string, log: Log): Promise<string[]> {
  const groups = Array.from({ length: Math.ceil(count / PER_GROUP) }, (_, g) => `g${g}-${run}.bench.test`);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      limit(() => admin.create(Resources.customResourceDefinitions, crd(groups[Math.floor(i / PER_GROUP)]!, `Kind${i}`, `kind${i}s`))),
    ),
  );
  for (const g of groups) {
    for (;;) {
      const served = await getResourceList(admin, g, 'v1').catch(() => undefined);
      if ((served?.resources.filter((r) => !r.name.includes('/')).length ?? 0) >= Math.min(PER_GROUP, count)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  log(`${count} CRDs in ${groups.length} groups served after ${Math.round((performance.now() - t0) / 1000)} s`);
  return groups;
}

/**
 * Marks every migration.k8s.io migration Succeeded; with `narrow`, also sets the persisted hashes of each
 * Outrigger StorageState it picks to its first reporter's current one, as the leader does after the
 * confirmation round.
 */
export async function succeedAll(admin: KubeClient, narrow?: (s: StorageState) => boolean): Promise<void> {
  const done = new Date();
  const made = await admin.listAll<StorageVersionMigration>(migrations);
  await Promise.all(
    made.map((m) =>
      limit(() =>
        admin.patch(
          migrations,
          { name: m.metadata.name!, subresource: 'status' },
          { status: { conditions: conditionsFor(m.status?.conditions, 'Succeeded', done, 'Bench') } },
          'merge',
        ),
      ),
    ),
  );
  if (!narrow) return;
  const states = (await admin.listAll<StorageState>(storageStates)).filter(narrow);
  await Promise.all(
    states.map((s) =>
      limit(() =>
        admin.patch(
          storageStates,
          { name: s.metadata.name!, subresource: 'status' },
          { status: { persistedStorageVersionHashes: [s.status!.currentStorageVersionHashes![0]!.currentStorageVersionHash] } },
          'merge',
        ),
      ),
    ),
  );
}

export function crd(group: string, kind: string, plural: string): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase() },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } },
          },
        },
      ],
    },
  } as KubeObject;
}
