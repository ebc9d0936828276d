// Which clusters a deployment serves and how it reaches each. The configuration holds no secret: an EKS
// cluster is reached with the function's own IAM identity, a kubeconfig only in the local runtime.
import { z } from 'zod';
import { clusterIdSchema } from './envelope/index.ts';
import { connect, type ClusterAccess, type KubeClient, type KubeClientOptions } from './kube/index.ts';

const accessSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('kubeconfig'), path: z.string().min(1).optional(), context: z.string().min(1).optional() }).strict(),
  z
    .object({
      kind: z.literal('eks'),
      server: z.url(),
      caData: z.string().min(1),
      clusterName: z.string().min(1),
      region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'must be an AWS region such as eu-west-1'),
    })
    .strict(),
]);

export const clusterConfigSchema = z.object({ id: clusterIdSchema, access: accessSchema }).strict();
export type ClusterConfig = z.infer<typeof clusterConfigSchema>;

/** Parses OUTRIGGER_CLUSTERS (a JSON array). Errors name the cluster entry and field. */
export function parseClusters(json: string): ClusterConfig[] {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new Error(`cluster configuration is not JSON: ${(err as Error).message}`);
  }
  const result = z.array(clusterConfigSchema).min(1, 'names no cluster').safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new Error(`cluster configuration: ${issue.path.map(String).join('.') || '(top)'}: ${issue.message}`);
  }
  const ids = new Set<string>();
  for (const c of result.data) {
    if (ids.has(c.id)) throw new Error(`cluster configuration: cluster id ${c.id} appears twice`);
    ids.add(c.id);
  }
  return result.data;
}

/** One KubeClient per cluster, made on first use and kept for the life of the process (a warm Lambda). */
export class Clusters {
  private readonly configs: Map<string, ClusterConfig>;
  private readonly clients = new Map<string, KubeClient>();
  private readonly options: KubeClientOptions;

  constructor(configs: ClusterConfig[], options: KubeClientOptions = {}) {
    this.configs = new Map(configs.map((c) => [c.id, c]));
    this.options = options;
  }

  ids(): string[] {
    return [...this.configs.keys()];
  }

  client(id: string): KubeClient {
    let client = this.clients.get(id);
    if (client) return client;
    const config = this.configs.get(id);
    if (!config) throw new Error(`unknown cluster ${JSON.stringify(id)}: this deployment serves ${this.ids().join(', ') || 'none'}`);
    client = connect(config.access as ClusterAccess, this.options);
    this.clients.set(id, client);
    return client;
  }
}
