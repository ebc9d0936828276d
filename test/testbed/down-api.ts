// An aggregated API whose backend is down, as a stopped metrics-server's is: an APIService naming a Service that
// does not exist, so its group is listed in /apis and its group version answers 503.
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { adminClient, eventually, uniqueName } from './index.ts';

export const apiServices = gvr('apiregistration.k8s.io', 'v1', 'apiservices');

/** Registers `<prefix>-<unique>.<domain>/v1` and waits until discovery lists its group; returns the group. */
export async function downApiGroup(prefix: string, domain: string): Promise<string> {
  const admin = adminClient();
  const group = `${uniqueName(prefix)}.${domain}`;
  await admin.create(apiServices, {
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name: `v1.${group}` },
    spec: {
      group,
      version: 'v1',
      service: { namespace: 'default', name: uniqueName('gone'), port: 443 },
      insecureSkipTLSVerify: true,
      groupPriorityMinimum: 1000,
      versionPriority: 15,
    },
  } as KubeObject);
  await eventually(async () =>
    (await admin.getPath<{ groups: Array<{ name: string }> }>('/apis')).groups.some((g) => g.name === group) ? true : undefined,
  );
  return group;
}
