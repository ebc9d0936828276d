// The wider beds: a control plane of several apiservers behind a load balancer, and kube-controller-manager,
// started by the test files that need them (docs/contributing/test-beds.md#test-bed), with Outrigger's CRDs and RBAC installed as
// on the default bed.
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { startControlPlane, type ControlPlane } from '../../local/apiserver.ts';
import { ensureKwok } from '../../local/kwok.ts';
import { clusterManifests } from '../../local/testbed.ts';

const nodes = gvr('', 'v1', 'nodes');

export interface TestControlPlane extends ControlPlane {
  /** Clients through the load balancer, as the identity's kubeconfig says. */
  client(identity: keyof ControlPlane['kubeconfigs']): KubeClient;
  /** A client of one apiserver, bypassing the load balancer (a reporter per apiserver). */
  clientOf(apiserver: string, identity: keyof ControlPlane['kubeconfigs']): KubeClient;
  /** How long it took to be ready, manifests included. */
  startedInMs: number;
}

/** The kube-controller-manager controllers that make ownership real: garbage collection, PVC protection, namespaces. */
export const GC_CONTROLLERS = ['garbage-collector-controller', 'persistentvolumeclaim-protection-controller', 'namespace-controller'];
/** kube-controller-manager's default controller set (deployment, replicaset, statefulset, daemonset, job, GC, namespace...). */
export const DEFAULT_CONTROLLERS = ['*'];

/** A node kwok plays the kubelet of: schedulable, with room for any test's pods. */
export function kwokNode(name: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', type: 'kwok' },
    },
    spec: {},
    status: {
      allocatable: { cpu: '32', memory: '256Gi', pods: '110' },
      capacity: { cpu: '32', memory: '256Gi', pods: '110' },
    },
  };
}

const isReady = (node: KubeObject) =>
  ((node.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? []).some(
    (c) => c.type === 'Ready' && c.status === 'True',
  );

/**
 * `nodes`: that many nodes (named node-1...), kube-scheduler binding pods to them and kwok playing their kubelet,
 * so pods run: scheduled, Running and Ready, deleted when asked, node leases renewed. Resolves once every node
 * is Ready. Give it `controllers` too (DEFAULT_CONTROLLERS) for anything to create pods.
 */
export async function startTestControlPlane(opts: {
  apiservers?: number;
  controllers?: readonly string[];
  apiserverFlags?: readonly string[];
  nodes?: number;
}): Promise<TestControlPlane> {
  const started = Date.now();
  const log = (m: string) => process.stderr.write(`[control plane] ${m}\n`);
  const cp = await startControlPlane({
    ...opts,
    ...(opts.nodes ? { scheduler: true, kwok: await ensureKwok(log) } : {}),
    ...(process.env.OUTRIGGER_CONTROL_PLANE_DIR ? { dir: process.env.OUTRIGGER_CONTROL_PLANE_DIR } : {}),
    log,
  });
  const client = (identity: keyof ControlPlane['kubeconfigs']) => connect({ kind: 'kubeconfig', path: cp.kubeconfigs[identity] });
  try {
    await applyManifests(client('admin'), await clusterManifests());
    if (opts.nodes) await startNodes(client('admin'), opts.nodes);
  } catch (err) {
    await cp.stop();
    throw err;
  }
  const clientOf = (apiserver: string, identity: keyof ControlPlane['kubeconfigs']) => {
    const instance = cp.apiservers.find((a) => a.name === apiserver);
    if (!instance) throw new Error(`no apiserver ${apiserver} in this control plane`);
    return connect({ kind: 'kubeconfig', path: instance.kubeconfigs[identity] });
  };
  return { ...cp, client, clientOf, startedInMs: Date.now() - started };
}

async function startNodes(admin: KubeClient, n: number): Promise<void> {
  const names = Array.from({ length: n }, (_, i) => `node-${i + 1}`);
  await Promise.all(names.map((name) => admin.create(nodes, kwokNode(name))));
  for (const deadline = Date.now() + 60_000; ;) {
    const ready = (await admin.listAll<KubeObject>(nodes)).filter(isReady).length;
    if (ready >= n) return;
    if (Date.now() > deadline)
      throw new Error(`${ready} of ${n} nodes Ready after 60 s: is kwok running (its log is kwok.log in the bed's directory)?`);
    await sleep(200);
  }
}
