// What a warm process keeps of a cluster's controller definitions (RevisionPolicies, MapControllers): read at
// most every few seconds per cluster, so a batch of events does not list them once per event, and a new
// definition is picked up within the TTL. A failed read is not kept.
export interface ClusterCache<T> {
  get(cluster: string, load: () => Promise<T>): Promise<T>;
  forget(cluster?: string): void;
}

export function clusterCache<T>(ttlMs: number): ClusterCache<T> {
  const entries = new Map<string, { at: number; value: Promise<T> }>();
  return {
    get(cluster, load) {
      const hit = entries.get(cluster);
      if (hit && Date.now() - hit.at < ttlMs) return hit.value;
      const value = load();
      entries.set(cluster, { at: Date.now(), value });
      value.catch(() => entries.delete(cluster));
      return value;
    },
    forget(cluster) {
      if (cluster) entries.delete(cluster);
      else entries.clear();
    },
  };
}
