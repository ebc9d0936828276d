// The doctor's EKS reads: the few calls that tell whether an EKS cluster lets Outrigger in (docs/getting-started/deploy.md:
// the authentication mode, the Pod Identity Agent add-on, access entries and the forwarder's association). Narrow,
// so that the branches of what they answer are tested with an in-memory EksApi; only the SDK adapter talks to AWS.
import {
  DescribeAccessEntryCommand,
  DescribeAddonCommand,
  DescribeClusterCommand,
  DescribePodIdentityAssociationCommand,
  EKSClient,
  paginateListAccessEntries,
  paginateListPodIdentityAssociations,
} from '@aws-sdk/client-eks';
import type { EksFacts } from './findings.ts';

export interface EksApi {
  authenticationMode(cluster: string): Promise<string | undefined>;
  /** The add-on's status, or undefined when it is not installed. */
  addonStatus(cluster: string, addon: string): Promise<string | undefined>;
  accessEntries(cluster: string): Promise<Array<{ principalArn: string; groups: string[] }>>;
  podIdentityAssociations(cluster: string, namespace: string, serviceAccount: string): Promise<Array<{ roleArn: string | undefined }>>;
}

export const POD_IDENTITY_AGENT = 'eks-pod-identity-agent';

export function sdkEks(region: string): EksApi {
  const eks = new EKSClient({ region });
  return {
    async authenticationMode(name) {
      return (await eks.send(new DescribeClusterCommand({ name }))).cluster?.accessConfig?.authenticationMode;
    },
    async addonStatus(clusterName, addonName) {
      try {
        return (await eks.send(new DescribeAddonCommand({ clusterName, addonName }))).addon?.status ?? 'UNKNOWN';
      } catch (err) {
        if ((err as Error).name === 'ResourceNotFoundException') return undefined;
        throw err;
      }
    },
    async accessEntries(clusterName) {
      const arns: string[] = [];
      for await (const page of paginateListAccessEntries({ client: eks }, { clusterName })) arns.push(...(page.accessEntries ?? []));
      return Promise.all(
        arns.map(async (principalArn) => ({
          principalArn,
          groups: (await eks.send(new DescribeAccessEntryCommand({ clusterName, principalArn }))).accessEntry?.kubernetesGroups ?? [],
        })),
      );
    },
    async podIdentityAssociations(clusterName, namespace, serviceAccount) {
      const ids: string[] = [];
      for await (const page of paginateListPodIdentityAssociations({ client: eks }, { clusterName, namespace, serviceAccount }))
        ids.push(...(page.associations ?? []).flatMap((a) => (a.associationId ? [a.associationId] : [])));
      return Promise.all(
        ids.map(async (associationId) => ({
          roleArn: (await eks.send(new DescribePodIdentityAssociationCommand({ clusterName, associationId }))).association?.roleArn,
        })),
      );
    },
  };
}

const failure = (err: unknown) => ({ error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });

/** Each read on its own: one refused (IAM, a cluster in CONFIG_MAP mode has no access entries) leaves the others. */
export async function gatherEks(
  api: EksApi,
  cluster: { clusterName: string; region: string; forwarderNamespace: string },
  expected: EksFacts['expected'],
): Promise<EksFacts> {
  const name = cluster.clusterName;
  const [authenticationMode, podIdentityAgent, accessEntries, podIdentity] = await Promise.all([
    api.authenticationMode(name).then((value) => ({ value }), failure),
    api.addonStatus(name, POD_IDENTITY_AGENT).then((status) => ({ status }), failure),
    api.accessEntries(name).catch(failure),
    api.podIdentityAssociations(name, cluster.forwarderNamespace, 'outrigger-forwarder').catch(failure),
  ]);
  return {
    clusterName: name,
    region: cluster.region,
    forwarderNamespace: cluster.forwarderNamespace,
    authenticationMode,
    podIdentityAgent,
    accessEntries,
    podIdentity,
    expected,
  };
}
