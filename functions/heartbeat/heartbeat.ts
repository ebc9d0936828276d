// One reachability record per cluster: the last time its apiserver answered, its version, and the last
// error. Compare-and-set keeps concurrent runs from losing each other's writes.
import type { KubeClient } from '../../shared/kube/index.ts';
import { VersionConflictError, type State } from '../../shared/state/index.ts';

export interface Heartbeat {
  reachedAt?: string;
  gitVersion?: string;
  lastAttemptAt: string;
  lastError?: string;
}

export const heartbeatKey = (cluster: string) => ({ cluster, kind: 'heartbeat', name: 'apiserver' });

export async function recordHeartbeat(cluster: string, kube: KubeClient, state: State, now = new Date()): Promise<Heartbeat> {
  let observed: Pick<Heartbeat, 'reachedAt' | 'gitVersion' | 'lastError'>;
  try {
    const version = await kube.getPath<{ gitVersion: string }>('/version');
    observed = { reachedAt: now.toISOString(), gitVersion: version.gitVersion };
  } catch (err) {
    observed = { lastError: err instanceof Error ? err.message : String(err) };
  }
  for (let attempt = 0; ; attempt += 1) {
    const previous = await state.records.get<Heartbeat>(heartbeatKey(cluster));
    const next: Heartbeat = { ...previous?.value, ...observed, lastAttemptAt: now.toISOString() };
    if (observed.reachedAt) delete next.lastError;
    try {
      await state.records.put(heartbeatKey(cluster), next, previous?.version ?? 'absent');
      return next;
    } catch (err) {
      if (!(err instanceof VersionConflictError) || attempt >= 3) throw err;
    }
  }
}
