// A churn generator for benches on the nodes-and-pods bed (docs/contributing/test-beds.md#nodes-and-pods): K
// StatefulSets holding M pods between them (kwok runs them), a status condition of one pod after another
// flipping at a rate (as a kubelet reports readiness), and one parent after another taking a new image at a rate
// (a rolling update, which kube-controller-manager and kwok carry out). The nodes' heartbeats are kwok's own.
// bench/pipeline.ts --churn measures what Outrigger's pipeline spends under it
// (docs/measurements.md#what-a-busy-cluster-costs).
import { setTimeout as sleep } from 'node:timers/promises';
import { statefulSet } from '../local/fixtures.ts';
import { Resources, gvr, isKubeError, type KubeClient, type KubeObject } from '../shared/kube/index.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
/** The pod condition the generator flips: a readiness gate's kind of condition, which kwok leaves alone. */
export const CHURN_CONDITION = 'outrigger.dev/churn';

/** How many changes a schedule of `perMinute` is due to have made `elapsedMs` after it started: evenly spread. */
export function dueBy(perMinute: number, elapsedMs: number): number {
  if (perMinute <= 0 || elapsedMs <= 0) return 0;
  return Math.floor((perMinute * elapsedMs) / 60_000);
}

/** M pods over K parents, as evenly as they go: each parent's replicas, summing to M. */
export function replicasOf(pods: number, parents: number): number[] {
  if (parents <= 0) return [];
  return Array.from({ length: parents }, (_, i) => Math.floor(pods / parents) + (i < pods % parents ? 1 : 0));
}

/** The n-th change of a schedule lands on this one of `count` (one after another, round robin). */
export function target(n: number, count: number): number {
  return count > 0 ? n % count : 0;
}

export interface ChurnOptions {
  admin: KubeClient;
  namespace: string;
  pods: number;
  parents: number;
  podChangesPerMinute: number;
  specChangesPerMinute: number;
  log?: (m: string) => void;
}

export interface ChurnCounts {
  podStatusChanges: number;
  /** Status changes aimed at a pod that was not there (replaced by a rolling update): not made. */
  podsMissing: number;
  specChanges: number;
  /** Changes the generator was due to make and had not when it stopped (it falls behind on a loaded machine). */
  behind: number;
}

export const parentName = (k: number) => `p${k}`;

/** The K parents and their M pods; resolves once every pod is Running. */
export async function createParents(opts: ChurnOptions, timeoutMs = 600_000): Promise<void> {
  const replicas = replicasOf(opts.pods, opts.parents);
  await Promise.all(
    replicas.map((r, k) => {
      const parent = statefulSet(parentName(k), opts.namespace, 'registry.example/churn:0');
      return opts.admin.create(statefulSets, { ...parent, spec: { ...(parent.spec as object), replicas: r } });
    }),
  );
  for (const deadline = Date.now() + timeoutMs; ;) {
    const running = (await opts.admin.listAll<KubeObject>(Resources.pods, { namespace: opts.namespace })).filter(
      (p) => (p.status as { phase?: string } | undefined)?.phase === 'Running',
    ).length;
    if (running >= opts.pods) return;
    if (Date.now() > deadline) throw new Error(`${running} of ${opts.pods} pods Running after ${timeoutMs / 1000} s`);
    await sleep(500);
  }
}

function podTemplate(app: string, version: number) {
  return { template: { metadata: { labels: { app } }, spec: { containers: [{ name: 'c', image: `registry.example/churn:${version}` }] } } };
}

/** Starts the schedules; `stop` ends them and says what was done. */
export function startChurn(opts: ChurnOptions): { stop(): Promise<ChurnCounts> } {
  const replicas = replicasOf(opts.pods, opts.parents);
  const podNames = replicas.flatMap((r, k) => Array.from({ length: r }, (_, i) => `${parentName(k)}-${i}`));
  const counts: ChurnCounts = { podStatusChanges: 0, podsMissing: 0, specChanges: 0, behind: 0 };
  let podsDone = 0;
  let specsDone = 0;
  let running = true;
  const started = Date.now();

  const flipPod = async (n: number) => {
    const name = podNames[target(n, podNames.length)]!;
    // Strategic merge: the conditions list merges by type, so the kubelet's (kwok's) own conditions stay.
    const status = Math.floor(n / podNames.length) % 2 === 0 ? 'False' : 'True';
    try {
      await opts.admin.patch(
        Resources.pods,
        { name, namespace: opts.namespace, subresource: 'status' },
        { status: { conditions: [{ type: CHURN_CONDITION, status, lastTransitionTime: new Date().toISOString() }] } },
        'strategic',
      );
      counts.podStatusChanges += 1;
    } catch (err) {
      if (!isKubeError(err, 'NotFound')) throw err;
      counts.podsMissing += 1;
    }
  };
  const bumpParent = async (n: number) => {
    const k = target(n, opts.parents);
    // The version is the round the parent is in: every parent's image changes at each of its turns.
    const version = Math.floor(n / opts.parents) + 1;
    await opts.admin.patch(
      statefulSets,
      { name: parentName(k), namespace: opts.namespace },
      { spec: podTemplate(parentName(k), version) },
      'strategic',
    );
    counts.specChanges += 1;
  };

  const loop = (async () => {
    while (running) {
      const elapsed = Date.now() - started;
      const pods = podNames.length ? dueBy(opts.podChangesPerMinute, elapsed) : 0;
      const specs = opts.parents ? dueBy(opts.specChangesPerMinute, elapsed) : 0;
      // One at a time, in schedule order: a change waits for the one before it, as one writer's would.
      while (running && (podsDone < pods || specsDone < specs)) {
        if (specsDone < specs && (podsDone >= pods || specsDone * pods <= podsDone * specs)) await bumpParent(specsDone++);
        else await flipPod(podsDone++);
      }
      await sleep(100);
    }
    const elapsed = Date.now() - started;
    counts.behind =
      Math.max(0, dueBy(opts.podChangesPerMinute, elapsed) - podsDone) + Math.max(0, dueBy(opts.specChangesPerMinute, elapsed) - specsDone);
  })();

  return {
    stop: async () => {
      running = false;
      await loop;
      opts.log?.(`churn: ${JSON.stringify(counts)}`);
      return counts;
    },
  };
}
