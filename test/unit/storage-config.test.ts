// How a cluster's storage configuration reads its apiservers (docs/controllers/storage-migration.md#safe-by-default):
// sampled unless reporters are given, and reporters that would narrow `persisted` on one apiserver's word refused
// at synth and named by `outrigger doctor`.
import { deployableClusters } from '../../infra/config.ts';
import { DEFAULT_SAMPLES, parseClusters, storagePlan, unsafeStorage } from '../../shared/clusters.ts';
import { eksCluster, onpremCluster } from './clusters.ts';

const secret = onpremCluster;

describe('storage: safe by default', () => {
  test('no storage block, or one without reporters: one reporter, sampled', () => {
    expect(storagePlan(eksCluster('prod'))).toEqual({ reporters: ['apiserver'], samples: DEFAULT_SAMPLES });
    expect(storagePlan({ storage: { enabled: true, migrations: 'outrigger', samples: 8 } })).toEqual({
      reporters: ['apiserver'],
      samples: 8,
    });
    expect(storagePlan({ storage: { enabled: true, migrations: 'outrigger', reporters: [{ id: 'a' }] } })).toEqual({
      reporters: ['a'],
      samples: undefined,
    });
  });

  test('a reporter server must be https: the bearer token travels to it (security L5)', () => {
    const json = (server: string) => JSON.stringify([secret({ enabled: true, migrations: 'outrigger', reporters: [{ id: 'a', server }] })]);
    expect(() => parseClusters(json('http://10.0.0.1:6443'))).toThrow(
      'cluster configuration: cluster onprem: storage.reporters.0.server: must be an https URL',
    );
    expect(parseClusters(json('https://10.0.0.1:6443'))[0]!.storage?.reporters).toEqual([{ id: 'a', server: 'https://10.0.0.1:6443' }]);
  });

  test("reporters sharing an endpoint, or on EKS's balanced endpoint, are unsafe: synth refuses them, naming the cluster and field", () => {
    const eks = eksCluster('prod');
    const onEks = { ...eks, storage: { enabled: true, migrations: 'outrigger' as const, reporters: [{ id: 'apiserver' }] } };
    expect(unsafeStorage(onEks)).toMatch(/^apiserver reaches the EKS endpoint https:\/\/.* which balances over several apiservers/);
    expect(() => deployableClusters([onEks])).toThrow(
      /^cluster configuration: cluster prod: storage\.reporters: apiserver reaches the EKS endpoint/,
    );
    const shared = secret({
      enabled: true,
      migrations: 'outrigger',
      reporters: [
        { id: 'a', server: 'https://10.0.0.1:6443' },
        { id: 'b', server: 'https://10.0.0.1:6443' },
      ],
    });
    expect(unsafeStorage(shared)).toBe(
      'a and b both reach https://10.0.0.1:6443: each reporter must reach an apiserver of its own (or leave out reporters: discovery is then sampled)',
    );
    expect(() => deployableClusters([shared])).toThrow('cluster onprem: storage.reporters: a and b both reach https://10.0.0.1:6443');
    // Two reporters left on the cluster's own server are one endpoint too.
    expect(unsafeStorage(secret({ enabled: true, migrations: 'outrigger', reporters: [{ id: 'a' }, { id: 'b' }] }))).toMatch(
      /^a and b both reach https:\/\/k8s\.onprem\.corp\.internal:6443/,
    );
  });

  test('safe: the default, samples, one reporter per apiserver, or storage off', () => {
    expect(unsafeStorage(eksCluster('prod'))).toBeUndefined();
    expect(unsafeStorage({ ...eksCluster('prod'), storage: { enabled: true, migrations: 'outrigger', samples: 4 } })).toBeUndefined();
    expect(
      unsafeStorage({ ...eksCluster('prod'), storage: { enabled: false, migrations: 'outrigger', reporters: [{ id: 'a' }] } }),
    ).toBeUndefined();
    const perApiserver = secret({
      enabled: true,
      migrations: 'outrigger',
      reporters: [
        { id: 'a', server: 'https://10.0.0.1:6443' },
        { id: 'b', server: 'https://10.0.0.2:6443' },
      ],
    });
    expect(unsafeStorage(perApiserver)).toBeUndefined();
    expect(deployableClusters([perApiserver])).toHaveLength(1);
  });
});
