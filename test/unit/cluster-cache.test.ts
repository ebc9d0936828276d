// functions/cluster-cache.ts: where the definitions are watched, a set that depends on them alone is kept until
// the resync instead of being re-read every few seconds (docs/operations/cost.md#definitions-are-watched).
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { clusterCache, DEFINITION_RESYNC_MS, definitionsWatched } from '../../functions/cluster-cache.ts';
import { mapSource, mapControllerCache } from '../../functions/map/controllers.ts';
import { compositeCache, compositeSource, type CompositeSet } from '../../functions/composite/controllers.ts';

describe('clusterCache', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    definitionsWatched(undefined);
    jest.useRealTimers();
  });

  const counting = (value: { complete: boolean }) => {
    let reads = 0;
    const load = () => {
      reads += 1;
      return Promise.resolve(value);
    };
    return { load, reads: () => reads };
  };

  it('re-reads after its TTL where the definitions are not watched', async () => {
    const cache = clusterCache<{ complete: boolean }>(5_000, { watchable: (v) => v.complete });
    const source = counting({ complete: true });
    await cache.get('c', source.load);
    jest.advanceTimersByTime(6_000);
    await cache.get('c', source.load);
    expect(source.reads()).toBe(2);
  });

  it('keeps a watchable set until the resync where the definitions are watched, and forgets it on an event', async () => {
    definitionsWatched(DEFINITION_RESYNC_MS);
    const cache = clusterCache<{ complete: boolean }>(5_000, { watchable: (v) => v.complete });
    const source = counting({ complete: true });
    await cache.get('c', source.load);
    // A minute of the forwarder's refreshes (every 2 s locally): no read.
    for (let t = 0; t < 30; t += 1) {
      jest.advanceTimersByTime(2_000);
      await cache.get('c', source.load);
    }
    expect(source.reads()).toBe(1);
    // A definition's event (the forwarder's forget): read again at once.
    cache.forget('c');
    await cache.get('c', source.load);
    expect(source.reads()).toBe(2);
    // The resync.
    jest.advanceTimersByTime(DEFINITION_RESYNC_MS);
    await cache.get('c', source.load);
    expect(source.reads()).toBe(3);
  });

  it('keeps the short TTL for a set that depends on what is not watched', async () => {
    definitionsWatched(DEFINITION_RESYNC_MS);
    const cache = clusterCache<{ complete: boolean }>(5_000, { watchable: (v) => v.complete });
    const source = counting({ complete: false });
    await cache.get('c', source.load);
    jest.advanceTimersByTime(6_000);
    await cache.get('c', source.load);
    expect(source.reads()).toBe(2);
  });

  it('keeps no failed read', async () => {
    definitionsWatched(DEFINITION_RESYNC_MS);
    const cache = clusterCache<{ complete: boolean }>(5_000, { watchable: () => true });
    await expect(cache.get('c', () => Promise.reject(new Error('apiserver down')))).rejects.toThrow('apiserver down');
    const source = counting({ complete: true });
    await cache.get('c', source.load);
    expect(source.reads()).toBe(1);
  });

  it("a MapController's event forgets the MapControllers kept (the map source's forget)", async () => {
    definitionsWatched(DEFINITION_RESYNC_MS);
    let reads = 0;
    const load = () => {
      reads += 1;
      return Promise.resolve({ valid: [], invalid: [], objects: [] });
    };
    await mapControllerCache.get('c', load);
    mapSource.forget?.('c');
    await mapControllerCache.get('c', load);
    expect(reads).toBe(2);
  });

  it('CompositeControllers and DecoratorControllers are kept as MapControllers are: none installed, until the resync or their event', async () => {
    definitionsWatched(DEFINITION_RESYNC_MS);
    let reads = 0;
    const load = (set: Partial<CompositeSet>) => () => {
      reads += 1;
      return Promise.resolve({ composites: [], decorators: [], invalid: [], objects: [], ...set });
    };
    await compositeCache.get('none', load({}));
    jest.advanceTimersByTime(60_000);
    await compositeCache.get('none', load({}));
    expect(reads).toBe(1);
    compositeSource.forget?.('none');
    await compositeCache.get('none', load({}));
    expect(reads).toBe(2);
    // A definition names a ServiceAccount, whose consent is not watched: the short TTL.
    const object = {
      resource: { group: 'metacontroller.k8s.io', version: 'v1alpha1', resource: 'compositecontrollers' },
      object: { metadata: {} },
    };
    await compositeCache.get('some', load({ objects: [object] }));
    jest.advanceTimersByTime(6_000);
    await compositeCache.get('some', load({ objects: [object] }));
    expect(reads).toBe(4);
  });
});
