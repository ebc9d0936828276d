// What a deployment accepts as cluster configuration, checked at synth so that a placeholder or a mistake fails
// `cdk synth` with the cluster's id and the field, instead of deploying functions that fail at their first call.
// The shape itself is shared/clusters.ts's (the functions read the same); these are the checks only a
// deployment needs: how it reaches each cluster, and values that are plainly not a real cluster's.
import { X509Certificate } from 'node:crypto';
import { parseClusters, unsafeStorage, type ClusterConfig } from '../shared/clusters.ts';

/** An EKS cluster's entry: its access is the kind the stack makes access entries and Pod Identity for. */
export type EksCluster = ClusterConfig & { access: Extract<ClusterConfig['access'], { kind: 'eks' }> };

export function isEks(c: ClusterConfig): c is EksCluster {
  return c.access.kind === 'eks';
}

/**
 * Names reserved for documentation and testing (RFC 2606, RFC 6761: `example`, `test`, `invalid`, `localhost`
 * and example.com/.net/.org): a server there is a placeholder, never a cluster.
 */
const RESERVED_HOST = /(^|\.)(example|test|invalid|localhost|example\.com|example\.net|example\.org)$/i;

/**
 * An EKS API server endpoint, as `aws eks describe-cluster` prints it: a 32-digit hexadecimal id, a zone, the
 * region, then eks.amazonaws.com (eks.amazonaws.com.cn in China); matched against the URL's hostname, which is
 * lowercase.
 */
const EKS_ENDPOINT = /^([0-9a-f]{32})\.[a-z0-9]+\.([a-z0-9-]+)\.eks\.amazonaws\.com(\.cn)?$/;

const DESCRIBE = (field: string) => `aws eks describe-cluster --name <name> --query ${field} --output text`;

/**
 * The clusters a deployed stack serves, checked: the shared schema (unknown fields refused), EKS or Secrets
 * Manager access only, and no placeholder (an endpoint that is not EKS's form or is in a reserved domain, CA
 * data that is not a certificate), and no storage reporters that would narrow `persisted` on one apiserver's word
 * (unsafeStorage). Errors read `cluster <id>: <field>: <problem>`.
 */
export function deployableClusters(clusters: readonly unknown[]): ClusterConfig[] {
  const parsed = parseClusters(JSON.stringify(clusters));
  const eksClusters = new Map<string, string>();
  for (const c of parsed) {
    const fail = (field: string, problem: string): never => {
      throw new Error(`cluster configuration: cluster ${c.id}: ${field}: ${problem}`);
    };
    const { access } = c;
    if (access.kind !== 'eks' && access.kind !== 'secret') {
      fail('access.kind', `a deployed stack reaches clusters through EKS IAM tokens or a token in Secrets Manager, not ${access.kind}`);
    }
    if (access.kind === 'kubeconfig') continue;
    const host = new URL(access.server).hostname;
    if (RESERVED_HOST.test(host))
      fail('access.server', `${access.server} is in a domain reserved for examples (RFC 2606), not a cluster's endpoint`);
    if (access.kind === 'eks') {
      const endpoint = EKS_ENDPOINT.exec(host);
      if (!endpoint)
        fail(
          'access.server',
          `${access.server} is not an EKS endpoint (https://<32 hex digits>.<zone>.<region>.eks.amazonaws.com): ${DESCRIBE('cluster.endpoint')}`,
        );
      if (endpoint![2] !== access.region)
        fail('access.region', `is ${access.region}, but the endpoint ${access.server} is in ${endpoint![2]}`);
      // One EKS cluster served as two would be reconciled twice, and its access entries made twice (which fails).
      const key = `${access.clusterName} in ${access.region}`;
      const other = eksClusters.get(key);
      if (other) fail('access.clusterName', `cluster ${other} is EKS cluster ${key} too: serve each cluster once`);
      eksClusters.set(key, c.id);
    }
    if (access.caData !== undefined) checkCertificate(access.caData, fail);
    const unsafe = unsafeStorage(c);
    if (unsafe) fail('storage.reporters', unsafe);
  }
  return parsed;
}

/** CA data must be a base64 PEM certificate, as a kubeconfig's certificate-authority-data and EKS's certificateAuthority.data are. */
function checkCertificate(caData: string, fail: (field: string, problem: string) => never): void {
  const pem = Buffer.from(caData, 'base64').toString('utf8');
  try {
    new X509Certificate(pem);
  } catch {
    fail('access.caData', `is not a base64-encoded PEM certificate (${DESCRIBE('cluster.certificateAuthority.data')})`);
  }
}
