// Cluster configurations as the stack's tests use them: what `aws eks describe-cluster` would give (an endpoint of
// EKS's form, a real certificate as CA data), so the construct's placeholder checks take them for a cluster.
import { readFileSync } from 'node:fs';
import type { ClusterConfig } from '../../shared/clusters.ts';

/** A self-signed certificate made for these tests (no key kept), base64 as in certificateAuthority.data. */
export const CA_DATA = Buffer.from(readFileSync(new URL('./cluster-ca.pem', import.meta.url))).toString('base64');

/** An EKS cluster named `clusterName` (default: its id) in `region`, reachable at an endpoint of EKS's form. */
export function eksCluster(id: string, opts: { clusterName?: string; region?: string } = {}): ClusterConfig & { access: { kind: 'eks' } } {
  const region = opts.region ?? 'eu-west-1';
  const endpointId = Buffer.from(id.padEnd(16, '0').slice(0, 16)).toString('hex').toUpperCase();
  return {
    id,
    access: {
      kind: 'eks',
      server: `https://${endpointId}.gr7.${region}.eks.amazonaws.com`,
      caData: CA_DATA,
      clusterName: opts.clusterName ?? id,
      region,
    },
  };
}

/** The cluster outside EKS the tests use: its token, and the migrator's, in Secrets Manager. */
export function onpremCluster(storage?: ClusterConfig['storage']): ClusterConfig & { access: { kind: 'secret' } } {
  return {
    id: 'onprem',
    access: {
      kind: 'secret',
      server: 'https://k8s.onprem.corp.internal:6443',
      secretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem',
      migratorTokenSecretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem-migrator',
    },
    ...(storage ? { storage } : {}),
  };
}
