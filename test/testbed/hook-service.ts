// A hook server inside the cluster, as far as the apiserver's service proxy can tell
// (docs/contributing/test-beds.md#a-hook-server-the-apiserver-proxies-to): an HTTP server this process starts on an
// address the apiserver will proxy to (netns.ts), and a Service without a selector whose Endpoints name it.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gvr, type KubeClient } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { proxyableAddress } from './netns.ts';

const pods = gvr('', 'v1', 'pods');

export interface HookServer {
  /** Where it listens: the host end of a veth pair made for it. */
  address: string;
  port: number;
  server: Server;
  /** Closes the server and removes the pair; safe to call twice. */
  close(): Promise<void>;
}

/** An HTTP server on a proxyable address of its own, answering with `handler`. */
export async function startHookServer(handler: RequestListener): Promise<HookServer> {
  const net = proxyableAddress();
  const server = createServer(handler);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, net.address, resolve);
    });
  } catch (err) {
    net.remove();
    throw err;
  }
  let closed: Promise<void> | undefined;
  return {
    address: net.address,
    port: (server.address() as AddressInfo).port,
    server,
    close: () =>
      (closed ??= new Promise<void>((r) => server.close(() => r())).finally(() => {
        net.remove();
      })),
  };
}

/**
 * A Service `name` without a selector (port 80), its Endpoints (what the apiserver's service proxy reads), and the
 * Pod its address names: the proxy takes only an address whose targetRef is a Pod with that IP. The Pod is bound to
 * a node that does not exist, so no kubelet (nor kwok) runs or rewrites it; its status (the hook server's address)
 * is written here. On a bed with kube-controller-manager, its pod garbage collector deletes such a Pod: leave
 * `pod-garbage-collector-controller` out there (test/integration/composite-realistic.test.ts).
 */
export async function serviceTo(
  kube: KubeClient,
  namespace: string,
  name: string,
  server: Pick<HookServer, 'address' | 'port'>,
): Promise<void> {
  const { address, port } = server;
  await applyManifests(
    kube,
    `
apiVersion: v1
kind: ServiceAccount
metadata: { name: ${name}-server, namespace: ${namespace} }
---
apiVersion: v1
kind: Pod
metadata: { name: ${name}-server, namespace: ${namespace} }
spec:
  nodeName: outrigger-no-such-node
  serviceAccountName: ${name}-server
  automountServiceAccountToken: false
  containers: [{ name: hook, image: hook-server-started-by-the-test }]
`,
  );
  await kube.patch(
    pods,
    { name: `${name}-server`, namespace, subresource: 'status' },
    { status: { phase: 'Running', podIP: address, podIPs: [{ ip: address }] } },
    'merge',
  );
  await applyManifests(
    kube,
    `
apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${namespace} }
spec: { ports: [{ name: http, port: 80, targetPort: ${port} }] }
---
apiVersion: v1
kind: Endpoints
metadata: { name: ${name}, namespace: ${namespace} }
subsets:
  - addresses: [{ ip: "${address}", targetRef: { kind: Pod, name: ${name}-server, namespace: ${namespace} } }]
    ports: [{ name: http, port: ${port} }]
`,
  );
}

/**
 * What the docs tell a cluster admin to grant a controller's account: `services/proxy` in the hooks' namespace
 * (docs/reference/hooks.md#hooks-inside-the-cluster); `create` is what a hook call needs, `get` is for kubectl-style probes.
 */
export function proxyGrant(
  namespace: string,
  name: string,
  subject: { kind: string; name: string; namespace?: string; apiGroup?: string },
  verbs: readonly string[] = ['create', 'get'],
): string {
  return `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: ${name}, namespace: ${namespace} }
rules: [{ apiGroups: [""], resources: ["services/proxy"], verbs: ${JSON.stringify(verbs)} }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: ${name}, namespace: ${namespace} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: ${name} }
subjects: [${JSON.stringify(subject)}]
`;
}
