// What a warm process keeps of a cluster's controller definitions (RevisionPolicies, MapControllers): read at
// most every few seconds per cluster, so a batch of events does not list them once per event, and a new
// definition is picked up within the TTL. A failed read is not kept.
//
// A process that watches the definitions (the forwarder: each definition's event forgets what is kept) needs no
// such re-read: there a set that depends on nothing but the definitions is kept until the resync
// (docs/operations/cost.md#definitions-are-watched), as an informer's cache is. A set that also depends on what
// is not watched (a ServiceAccount's consent, a kind discovery could not resolve, a definition found invalid)
// keeps the short TTL, so that a change there is picked up as soon as before.
export interface ClusterCache<T> {
  get(cluster: string, load: () => Promise<T>): Promise<T>;
  forget(cluster?: string): void;
}

export interface ClusterCacheOptions<T> {
  /** Whether a value depends on the definitions alone, so that their watch tells of every change to it. */
  watchable?: (value: T) => boolean;
}

/** The resync of what a watching process keeps: not per minute, as an informer's (kube-controller-manager's: none). */
export const DEFINITION_RESYNC_MS = 10 * 60_000;

/** How long a watchable value is kept where the definitions are watched; undefined where they are not. */
let watchedResyncMs: number | undefined;

/** Tells this process's definition caches that the definitions are watched here (see the top of this file). */
export function definitionsWatched(resyncMs: number | undefined): void {
  watchedResyncMs = resyncMs;
}

export function clusterCache<T>(ttlMs: number, opts: ClusterCacheOptions<T> = {}): ClusterCache<T> {
  const entries = new Map<string, { at: number; value: Promise<T>; ttlMs: number }>();
  return {
    get(cluster, load) {
      const hit = entries.get(cluster);
      if (hit && Date.now() - hit.at < hit.ttlMs) return hit.value;
      const value = load();
      const entry = { at: Date.now(), value, ttlMs };
      entries.set(cluster, entry);
      value.then(
        (v) => {
          if (watchedResyncMs !== undefined && opts.watchable?.(v)) entry.ttlMs = Math.max(ttlMs, watchedResyncMs);
        },
        () => {
          if (entries.get(cluster) === entry) entries.delete(cluster);
        },
      );
      return value;
    },
    forget(cluster) {
      if (cluster) entries.delete(cluster);
      else entries.clear();
    },
  };
}
