// One reachability record per cluster: the last time its apiserver answered, its version, and the last
// error. Compare-and-set keeps concurrent runs from losing each other's writes.
import { isKubeError, Resources, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { VersionConflictError, type State } from '../../shared/state/index.ts';

export interface Heartbeat {
  reachedAt?: string;
  gitVersion?: string;
  lastAttemptAt: string;
  lastError?: string;
}

/**
 * How long a cluster's requests may take in one heartbeat (retries included): an apiserver that has not answered
 * `/version` by then counts as unreachable this minute.
 */
export const HEARTBEAT_REQUESTS_MS = 10_000;

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

/**
 * The forwarder's leader-election Lease, as its kustomize base names it (deploy/forwarder/base), in the namespace
 * the deployment installs the forwarder in (OUTRIGGER_FORWARDER_NAMESPACE, set from the construct's
 * `forwarder.namespace`; docs/reference/configuration.md#the-functions).
 */
export const FORWARDER_LEASE = { namespace: 'outrigger-system', name: 'outrigger-forwarder-leader' };

/** Where the forwarder runs, hence where its Lease is. */
export function forwarderNamespace(): string {
  return process.env.OUTRIGGER_FORWARDER_NAMESPACE || FORWARDER_LEASE.namespace;
}

/** The leader renews every 2 s: two minutes unrenewed is no leader at all (the ForwarderSilent alarm, the doctor). */
export const FORWARDER_SILENT_SECONDS = 120;

/**
 * Seconds since the forwarder's leader last renewed its Lease (it renews every few seconds while it watches), or
 * undefined when the cluster has no such Lease or Outrigger may not read it (a cluster wired through the ingest
 * URL instead): then no figure is published and the alarm has nothing to judge.
 */
export async function forwarderSilence(kube: KubeClient, namespace = forwarderNamespace(), now = new Date()): Promise<number | undefined> {
  try {
    const lease = await kube.get<KubeObject & { spec?: { renewTime?: string } }>(Resources.leases, {
      name: FORWARDER_LEASE.name,
      namespace,
    });
    const renewed = Date.parse(lease.spec?.renewTime ?? '');
    return Number.isNaN(renewed) ? undefined : Math.max(0, Math.round((now.getTime() - renewed) / 1000));
  } catch (err) {
    if (isKubeError(err, 'NotFound') || isKubeError(err, 'Forbidden')) return undefined;
    throw err;
  }
}
