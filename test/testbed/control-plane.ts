// The wider beds: a control plane of several apiservers behind a load balancer, and kube-controller-manager,
// started by the test files that need them (docs/contributing/test-beds.md#test-bed), with Outrigger's CRDs and RBAC installed as
// on the default bed.
import { connect, type KubeClient } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { startControlPlane, type ControlPlane } from '../../local/apiserver.ts';
import { clusterManifests } from '../../local/testbed.ts';

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

export async function startTestControlPlane(opts: {
  apiservers?: number;
  controllers?: readonly string[];
  apiserverFlags?: readonly string[];
}): Promise<TestControlPlane> {
  const started = Date.now();
  const cp = await startControlPlane({
    ...opts,
    ...(process.env.OUTRIGGER_CONTROL_PLANE_DIR ? { dir: process.env.OUTRIGGER_CONTROL_PLANE_DIR } : {}),
    log: (m) => process.stderr.write(`[control plane] ${m}\n`),
  });
  const client = (identity: keyof ControlPlane['kubeconfigs']) => connect({ kind: 'kubeconfig', path: cp.kubeconfigs[identity] });
  try {
    await applyManifests(client('admin'), await clusterManifests());
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
