// The scene the storage HA tests replay on a control-plane bed: DeviceClasses (resource.k8s.io, whose storage
// version moves between Kubernetes 1.34 emulation and 1.35), a clock stepped in poll periods, the migrator run
// by hand, and a check after each step that every DeviceClass's encoding in etcd is listed in persisted.
import { randomUUID } from 'node:crypto';
import { lead } from '../../functions/storage/leader.ts';
import { runMigration, type MigratorContext } from '../../functions/storage/migrator.ts';
import type { StorageContext } from '../../functions/storage/context.ts';
import { gvr } from '../../shared/kube/index.ts';
import {
  DEFAULT_PERIOD_MS,
  isOutriggers,
  isTerminal,
  phaseOf,
  storageStateName,
  storageVersionHash,
  UNKNOWN,
  type StorageState,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';
import type { TestControlPlane } from './control-plane.ts';
import { etcdRead } from './etcd.ts';
import { outriggerClient, testState, uniqueName } from './index.ts';

export const GROUP = 'resource.k8s.io';
export const MINUTE = 60_000;
const deviceClasses = gvr(GROUP, 'v1', 'deviceclasses');
const storageStates = gvr('migration.k8s.io', 'v1alpha1', 'storagestates');
const migrations = gvr('migration.k8s.io', 'v1alpha1', 'storageversionmigrations');

export interface StorageScene {
  ctx: StorageContext;
  /** Sets the simulated clock to this many minutes after the scene began. */
  at(minute: number): void;
  /** Creates a DeviceClass through one apiserver, so it is stored in that apiserver's storage version. */
  write(apiserver: string): Promise<string>;
  /** The hash of the storage version a DeviceClass is stored in, from etcd's bytes. */
  stored(name: string): Promise<string>;
  /** Runs every pending migration of Outrigger's, then the leader step (as a migration's event does); returns DeviceClasses'. */
  migrateAll(): Promise<number>;
  /** Persisted for DeviceClasses, after checking that it lists every written DeviceClass's encoding (or Unknown). */
  persisted(when: string): Promise<string[]>;
}

/** A storage controller's context on the default bed, as the outrigger identity, under a cluster id of its own. */
export function storageTestContext(over: Partial<StorageContext> = {}): StorageContext {
  return {
    cluster: uniqueName('storage'),
    kube: outriggerClient(),
    state: testState(),
    holder: `test-${randomUUID()}`,
    reporters: ['apiserver'],
    mode: 'outrigger',
    periodMs: DEFAULT_PERIOD_MS,
    now: () => new Date(),
    ...over,
  };
}

export function storageScene(cp: TestControlPlane, over: Partial<StorageContext>): StorageScene {
  const start = Date.now();
  let minute = 0;
  const now = () => new Date(start + minute * MINUTE + (Date.now() - start) / 1000);
  const ctx = storageTestContext({ cluster: uniqueName('ha'), kube: cp.client('outrigger'), periodMs: 10 * MINUTE, now, ...over });
  const migrator: MigratorContext = {
    cluster: ctx.cluster,
    kube: cp.client('migrator'),
    state: ctx.state,
    holder: `migrator-${randomUUID()}`,
    now,
  };
  const classes: string[] = [];
  const stored = async (name: string) => {
    // Protobuf, in which the apiVersion is plain text.
    const version = /resource\.k8s\.io\/(v\w+)/.exec(
      (await etcdRead(`/registry/deviceclasses/${name}`, cp.etcdUrl))?.toString('latin1') ?? '',
    )?.[1];
    if (!version) throw new Error(`no stored apiVersion for DeviceClass ${name}`);
    return storageVersionHash(GROUP, version, 'DeviceClass');
  };
  return {
    ctx,
    at: (m) => {
      minute = m;
    },
    write: async (apiserver) => {
      const name = uniqueName('dc');
      await cp
        .clientOf(apiserver, 'admin')
        .create(deviceClasses, { apiVersion: `${GROUP}/v1`, kind: 'DeviceClass', metadata: { name }, spec: {} });
      classes.push(name);
      return name;
    },
    stored,
    migrateAll: async () => {
      const pending = (await ctx.kube.listAll<StorageVersionMigration>(migrations)).filter(
        (m) => isOutriggers(m) && !isTerminal(phaseOf(m)),
      );
      for (const m of pending) await runMigration(migrator, m.metadata.name!);
      await lead(ctx);
      // Every resource.k8s.io resource changes alike; the count is DeviceClasses'.
      return pending.filter((m) => m.spec.resource.resource === 'deviceclasses').length;
    },
    persisted: async (when) => {
      const state = await ctx.kube.get<StorageState>(storageStates, {
        name: storageStateName({ group: GROUP, resource: 'deviceclasses' }),
      });
      const p = state.status?.persistedStorageVersionHashes ?? [UNKNOWN];
      if (!p.includes(UNKNOWN)) {
        for (const name of classes)
          if (!p.includes(await stored(name)))
            throw new Error(
              `${when}: DeviceClass ${name} is stored in ${await stored(name)}, which persisted (${p.join(', ')}) does not list`,
            );
      }
      return p;
    },
  };
}
