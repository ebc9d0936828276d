// Discovery's cache in a warm function: a resource added to a group version already read is found at its first
// lookup a second later, one removed is forgotten within DISCOVERY_MAX_AGE_MS, and lookups that hit read nothing
// (docs/controllers/mapcontroller.md#kinds-the-cluster-starts-or-stops-serving).
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { DISCOVERY_MAX_AGE_MS, MISS_REFRESH_MS, NotServedError, resolveKind, resolveResource } from '../../shared/kube/discovery.ts';
import { FakeKube } from '../fakes/kube.ts';

const widgets = { group: 'example.com', version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true };
const gadgets = { group: 'example.com', version: 'v1', resource: 'gadgets', kind: 'Gadget', namespaced: false };

describe('discovery in a warm function', () => {
  let kube: FakeKube;
  const reads = () => kube.stats.byVerb.discovery ?? 0;

  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    kube = new FakeKube();
    kube.served.push(widgets);
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('finds a resource added to a group version it has already read, once the cached list is a second old', async () => {
    await resolveResource(kube, 'example.com/v1', 'widgets');
    kube.served.push(gadgets);
    jest.advanceTimersByTime(MISS_REFRESH_MS + 1);
    await expect(resolveResource(kube, 'example.com/v1', 'gadgets')).resolves.toMatchObject({ kind: 'Gadget', namespaced: false });
    await expect(resolveKind(kube, 'example.com/v1', 'Gadget')).resolves.toMatchObject({ resource: 'gadgets' });
    expect(reads()).toBe(2);
  });

  it('reads a list again for misses at most once a second', async () => {
    await resolveResource(kube, 'example.com/v1', 'widgets');
    for (let i = 0; i < 5; i++) await expect(resolveResource(kube, 'example.com/v1', 'gadgets')).rejects.toThrow(NotServedError);
    expect(reads()).toBe(1);
    jest.advanceTimersByTime(MISS_REFRESH_MS + 1);
    await expect(resolveResource(kube, 'example.com/v1', 'gadgets')).rejects.toThrow(
      'the cluster serves no resource gadgets in example.com/v1',
    );
    expect(reads()).toBe(2);
  });

  it('forgets a resource the cluster stopped serving once the cached list is older than the cache keeps lists', async () => {
    kube.served.push(gadgets);
    await resolveKind(kube, 'example.com/v1', 'Widget');
    kube.served.splice(kube.served.indexOf(widgets), 1);
    jest.advanceTimersByTime(DISCOVERY_MAX_AGE_MS - 1);
    await expect(resolveKind(kube, 'example.com/v1', 'Widget')).resolves.toMatchObject({ resource: 'widgets' });
    jest.advanceTimersByTime(2);
    await expect(resolveKind(kube, 'example.com/v1', 'Widget')).rejects.toThrow('the cluster serves no kind Widget in example.com/v1');
  });

  it('answers lookups that hit a fresh list without a read', async () => {
    await resolveKind(kube, 'example.com/v1', 'Widget');
    for (let i = 0; i < 10; i++) await resolveResource(kube, 'example.com/v1', 'widgets');
    expect(reads()).toBe(1);
  });
});
