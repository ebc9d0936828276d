// The cluster configuration that docs/getting-started/deploy.md's step 2 writes, computed from the page itself: its
// `aws eks describe-cluster` command's --region, --name and --query, the query's JMESPath evaluated (as the AWS
// CLI does) over a describe-cluster answer. A test run on it holds the page to what the tests show safe.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { search } from '@aws-lambda-powertools/jmespath';

const PAGE = join(import.meta.dirname, '..', '..', 'docs', 'getting-started', 'deploy.md');

export interface DescribedCluster {
  /** Base64 PEM, as EKS's certificateAuthority.data. */
  caData: string;
}

/** The page's command: the one shell block that writes clusters.json with `aws eks describe-cluster`. */
export async function deployStepCommand(): Promise<{ region: string; name: string; query: string }> {
  const page = await readFile(PAGE, 'utf8');
  const blocks = [...page.matchAll(/```sh\n([\s\S]*?)```/g)]
    .map((m) => m[1]!)
    .filter((b) => /aws eks describe-cluster[\s\S]*> clusters\.json/.test(b));
  if (blocks.length !== 1) throw new Error(`${PAGE}: ${blocks.length} blocks write clusters.json with aws eks describe-cluster, want 1`);
  const command = blocks[0]!.replace(/\\\n\s*/g, ' ');
  const option = (name: string) => {
    const m = new RegExp(`--${name}\\s+('([^']*)'|\\S+)`).exec(command);
    if (!m) throw new Error(`${PAGE}: the describe-cluster command has no --${name}`);
    return m[2] ?? m[1]!;
  };
  return { region: option('region'), name: option('name'), query: option('query') };
}

/** clusters.json as the page's step 2 writes it for a cluster EKS describes so. */
export async function deployedClustersJson(cluster: DescribedCluster): Promise<unknown> {
  const { region, name, query } = await deployStepCommand();
  // The fields of DescribeCluster's answer that the query may read, as EKS names them.
  const described = {
    cluster: {
      name,
      arn: `arn:aws:eks:${region}:123456789012:cluster/${name}`,
      endpoint: `https://0123456789abcdef0123456789abcdef.gr7.${region}.eks.amazonaws.com`,
      certificateAuthority: { data: cluster.caData },
      status: 'ACTIVE',
      version: '1.35',
      accessConfig: { authenticationMode: 'API_AND_CONFIG_MAP' },
    },
  };
  return search(query, described as Parameters<typeof search>[1]);
}
