// Which clusters a deployment serves and how it reaches each. The configuration holds no secret: an EKS
// cluster is reached with the function's own IAM identity, another with a token read from Secrets Manager
// (named here by ARN), a kubeconfig only in the local runtime.
import { readFileSync } from 'node:fs';
// A namespace import, so bundles keep only what is used (see shared/envelope/index.ts).
import * as z from 'zod/mini';
import { clusterIdSchema, nonEmpty } from './validation.ts';
import { parseSelector } from './ownership/selector.ts';
import { connect, type ClusterAccess, type KubeClient, type KubeClientOptions } from './kube/index.ts';

const secretArnSchema = z
  .string()
  .check(z.regex(/^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+$/, 'must be a Secrets Manager secret ARN'));

const accessSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('kubeconfig'), path: z.optional(nonEmpty()), context: z.optional(nonEmpty()) }),
  z.strictObject({
    kind: z.literal('eks'),
    server: z.url(),
    caData: nonEmpty(),
    clusterName: nonEmpty(),
    // Every partition's form: eu-west-1, cn-north-1, us-gov-west-1, us-isob-east-1, eusc-de-east-1.
    region: z.string().check(z.regex(/^[a-z]{2,4}(-[a-z]+)+-\d{1,2}$/, 'must be an AWS region such as eu-west-1')),
  }),
  // A cluster outside EKS: its bearer token lives in Secrets Manager (the configuration holds only its ARN).
  z.strictObject({
    kind: z.literal('secret'),
    server: z.url({ protocol: /^https$/, error: 'must be an https URL' }),
    caData: z.optional(nonEmpty()),
    secretArn: secretArnSchema,
    /**
     * The migrator's own token (its identity is in outrigger:migrators: list and patch on everything), which only
     * the migrator function may read; docs/design/architecture.md#cluster-access-sharedkube. Required while storage migration is on.
     */
    migratorTokenSecretArn: z.optional(secretArnSchema),
  }),
]);

// Storage version migration (docs/controllers/storage-migration.md). A reporter is one apiserver endpoint whose discovery the poll reads:
// one in a plain cluster (the access's own server), one per apiserver in an HA control plane, so that a
// rolling upgrade shows as disagreeing reporters. `groups` limits the poll to some API groups ("" is core).
const storageSchema = z
  .strictObject({
    /** Off: no StorageStates, migrations or polls for this cluster. */
    enabled: z._default(z.boolean(), true),
    reporters: z.optional(
      z
        .array(
          z.strictObject({
            id: z.string().check(z.regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a lowercase DNS name'), z.maxLength(253)),
            // The bearer token travels to it: https only, as for the cluster's own server.
            server: z.optional(z.url({ protocol: /^https$/, error: 'must be an https URL' })),
          }),
        )
        .check(
          z.minLength(1),
          z.refine((rs) => new Set(rs.map((r) => r.id)).size === rs.length, 'reporter ids must be unique'),
        ),
    ),
    /**
     * For apiservers reachable only through one endpoint (a load balancer): discovery is sampled over this many
     * fresh connections per poll, and migrations wait on the control plane's stability
     * (docs/controllers/storage-migration.md#one-endpoint-eks-and-most-managed-control-planes). Not with `reporters`, which reach each apiserver.
     * Default DEFAULT_SAMPLES when no `reporters` are given: one endpoint is all Outrigger can assume.
     */
    samples: z.optional(z.int().check(z.minimum(2), z.maximum(16))),
    migrations: z._default(z.enum(['outrigger', 'in-tree']), 'outrigger'),
    /** The migrator's own access, where it differs (the local runtime's migrator identity); in AWS its IAM role decides. */
    migratorAccess: z.optional(accessSchema),
    groups: z.optional(z.array(z.string())),
  })
  .check(
    z.refine((s) => !(s.samples && s.reporters), {
      message: 'samples is for one endpoint; with reporters, each apiserver has its own',
      path: ['samples'],
    }),
  );
export type StorageConfig = z.infer<typeof storageSchema>;

/**
 * Discovery samples per poll when the configuration names no reporters: the one endpoint may front several
 * apiservers (EKS runs at least two), and only sampled evidence may narrow `persisted` there
 * (docs/controllers/storage-migration.md#safe-by-default).
 */
export const DEFAULT_SAMPLES = 4;

/** How the storage poll reads a cluster: its reporters' ids, and the samples per poll of a one-endpoint control plane. */
export interface StoragePlan {
  reporters: string[];
  samples: number | undefined;
}

export function storagePlan(config: Pick<ClusterConfig, 'storage'>): StoragePlan {
  const { reporters, samples } = config.storage ?? {};
  if (reporters) return { reporters: reporters.map((r) => r.id), samples: undefined };
  return { reporters: ['apiserver'], samples: samples ?? DEFAULT_SAMPLES };
}

/**
 * Why a cluster's reporters cannot be trusted to narrow `persisted`, or undefined: reporters are one per
 * apiserver, so two reaching one endpoint, or one reaching EKS's (which balances over at least two apiservers),
 * see a single apiserver at a time and agree when the control plane does not
 * (docs/controllers/storage-migration.md#safe-by-default). Synth refuses it and `outrigger doctor` names it.
 */
export function unsafeStorage(config: Pick<ClusterConfig, 'access' | 'storage'>): string | undefined {
  const reporters = config.storage?.enabled === false ? undefined : config.storage?.reporters;
  if (!reporters) return undefined;
  const own = 'server' in config.access ? config.access.server : undefined;
  const endpoint = (server: string | undefined) => server ?? own ?? "the kubeconfig's server";
  const seen = new Map<string, string>();
  for (const r of reporters) {
    const where = endpoint(r.server);
    const other = seen.get(where);
    if (other !== undefined)
      return `${other} and ${r.id} both reach ${where}: each reporter must reach an apiserver of its own (or leave out reporters: discovery is then sampled)`;
    seen.set(where, r.id);
    if (config.access.kind === 'eks' && (r.server === undefined || r.server === own))
      return `${r.id} reaches the EKS endpoint ${where}, which balances over several apiservers: one reporter there sees one of them at a time; leave out reporters (discovery is then sampled)`;
  }
  return undefined;
}

/**
 * The Kubernetes groups cluster/rbac.yaml binds: every function that talks to clusters, and the migrator besides
 * (an EKS access entry, or the user a Secrets Manager token belongs to, is in them).
 */
export const CONTROLLERS_GROUP = 'outrigger:controllers';
export const MIGRATORS_GROUP = 'outrigger:migrators';

/** Lambda's bounds on an SQS event source's maximum concurrency (ScalingConfig.MaximumConcurrency). */
export const MAX_CONCURRENCY_BOUNDS = { min: 2, max: 1000 } as const;
/** A cluster's concurrency when its configuration names none: enough for a few busy objects, little of the account's 1000. */
export const DEFAULT_MAX_CONCURRENCY = 5;

const maxConcurrencySchema = z
  .number({ error: 'must be a whole number' })
  .check(
    z.int('must be a whole number'),
    z.gte(
      MAX_CONCURRENCY_BOUNDS.min,
      `must be at least ${MAX_CONCURRENCY_BOUNDS.min}: Lambda's lowest maximum concurrency for an SQS event source`,
    ),
    z.lte(
      MAX_CONCURRENCY_BOUNDS.max,
      `must be at most ${MAX_CONCURRENCY_BOUNDS.max}: Lambda's highest maximum concurrency for an SQS event source`,
    ),
  );

/**
 * An IAM role or user, by ARN (a role's path may be given or left out: an assumed-role session names only the
 * role's name, which is unique in its account whatever the path).
 */
const iamPrincipalSchema = z
  .string()
  .check(
    z.regex(
      /^arn:aws[a-z-]*:iam::\d{12}:(role|user)\/[\w+=,.@/-]{1,512}$/,
      'must be an IAM role or user ARN (arn:aws:iam::<account>:role/<name>)',
    ),
  );

export const clusterConfigSchema = z.strictObject({
  id: clusterIdSchema,
  access: accessSchema,
  storage: z.optional(storageSchema),
  /**
   * Off: no MapController, CompositeController or DecoratorController of this cluster is served (none routed, synced
   * or resynced), and the cluster has no map queue to poll (docs/operations/cost.md#idle-polling).
   */
  metacontroller: z.optional(z.strictObject({ enabled: z._default(z.boolean(), true) })),
  /**
   * How many invocations of each function may work on this cluster's queues at once (the event source mapping
   * of each of its queues): a noisy cluster is held to it, and the others keep their own. Default
   * DEFAULT_MAX_CONCURRENCY.
   */
  maxConcurrency: z.optional(maxConcurrencySchema),
  /**
   * Who may send this cluster's events to the ingest URL: the IAM roles (or users) its signing proxy runs as. A
   * caller speaks only for the clusters naming it; a cluster naming none takes no events through the ingest.
   */
  ingestPrincipals: z.optional(z.array(iamPrincipalSchema)),
  /**
   * Which controllers (MapControllers, CompositeControllers, DecoratorControllers) this deployment serves in the cluster: a
   * label selector in kubectl's form, as Metacontroller's --target-label-selector, so the two share a cluster while
   * controllers move over (docs/reference/configuration.md#clustersjson). Unset: every one.
   */
  controllerSelector: z.optional(
    z.string().check(
      z.refine((s) => {
        try {
          parseSelector(s);
          return true;
        } catch {
          return false;
        }
      }, 'must be a label selector (app=x, tier in (a,b), !legacy)'),
    ),
  ),
});
export type ClusterConfig = z.infer<typeof clusterConfigSchema>;

/** Whether the cluster's MapControllers, CompositeControllers and DecoratorControllers are served (default: they are). */
export const metacontrollerOn = (config: Pick<ClusterConfig, 'metacontroller'>): boolean => config.metacontroller?.enabled !== false;

export function maxConcurrency(config: Pick<ClusterConfig, 'maxConcurrency'>): number {
  return config.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY;
}

/**
 * Whether the Function URL's caller (its request's requestContext.authorizer.iam.userArn) is the configured
 * principal: the same ARN, or a session of the configured role (`arn:aws:sts::<account>:assumed-role/<name>/<session>`).
 */
export function isPrincipal(configured: string, caller: string): boolean {
  if (configured === caller) return true;
  const session = /^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role\/([^/]+)\/[^/]+$/.exec(caller);
  const role = /^arn:(aws[a-z-]*):iam::(\d{12}):role\/(?:.*\/)?([^/]+)$/.exec(configured);
  return session !== null && role !== null && session[1] === role[1] && session[2] === role[2] && session[3] === role[3];
}

/** The clusters whose events `caller` may send to the ingest URL; none for a caller not named, or no caller. */
export function ingestClustersOf(
  configs: readonly Pick<ClusterConfig, 'id' | 'ingestPrincipals'>[],
  caller: string | undefined,
): Set<string> {
  if (caller === undefined) return new Set();
  return new Set(configs.filter((c) => (c.ingestPrincipals ?? []).some((p) => isPrincipal(p, caller))).map((c) => c.id));
}

/** Parses the cluster configuration (a JSON array). Errors name the cluster entry and field. */
export function parseClusters(json: string): ClusterConfig[] {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new Error(`cluster configuration is not JSON: ${(err as Error).message}`);
  }
  const result = z.array(clusterConfigSchema).check(z.minLength(1, 'names no cluster')).safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    // An unknown field is named as a field (`access.roleArn`), not as its object.
    const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys.join(', ')] : issue.path;
    const [entry, ...field] = path;
    if (typeof entry !== 'number') throw new Error(`cluster configuration: ${path.map(String).join('.') || '(top)'}: ${issue.message}`);
    // Named by the cluster's id where it has one: an operator reads ids, not positions in an array.
    const id = (value as Array<{ id?: unknown } | null>)[entry]?.id;
    const which = typeof id === 'string' && id ? `cluster ${id}` : `entry ${entry} (no id)`;
    throw new Error(`cluster configuration: ${which}: ${field.map(String).join('.') || '(entry)'}: ${issue.message}`);
  }
  const ids = new Set<string>();
  for (const c of result.data) {
    if (ids.has(c.id)) throw new Error(`cluster configuration: cluster id ${c.id} appears twice`);
    ids.add(c.id);
    if (c.access.kind === 'secret' && c.storage?.enabled !== false && !c.access.migratorTokenSecretArn) {
      throw new Error(
        `cluster configuration: cluster ${c.id}: access.migratorTokenSecretArn: required with storage migration on (storage.enabled: false turns it off): the migrator lists and patches everything, so it never acts with the token every other function reads`,
      );
    }
  }
  return result.data;
}

/**
 * The cluster configuration a process is given, from one of:
 *   OUTRIGGER_CLUSTERS       the JSON itself (the local runtime, `npm run invoke`, tests)
 *   OUTRIGGER_CLUSTERS_FILE  a file holding it: in AWS, the stack's layer. Lambda allows 4 KB of environment in
 *                            all, and each EKS cluster's CA data takes about 1.5 KB of it.
 * Both set is refused rather than one silently winning. Errors name the variable (and the file).
 */
export function clustersFromEnv(env: NodeJS.ProcessEnv = process.env): ClusterConfig[] {
  const json = env.OUTRIGGER_CLUSTERS;
  const file = env.OUTRIGGER_CLUSTERS_FILE;
  if (json && file) throw new Error(`OUTRIGGER_CLUSTERS and OUTRIGGER_CLUSTERS_FILE (${file}) are both set: set one`);
  if (json) return parsedFrom('OUTRIGGER_CLUSTERS', json);
  if (!file)
    throw new Error(
      'neither OUTRIGGER_CLUSTERS (the cluster configuration as JSON) nor OUTRIGGER_CLUSTERS_FILE (a file holding it) is set',
    );
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`OUTRIGGER_CLUSTERS_FILE ${file}: cannot read it: ${(err as Error).message}`, { cause: err });
  }
  return parsedFrom(`OUTRIGGER_CLUSTERS_FILE ${file}`, text);
}

function parsedFrom(source: string, json: string): ClusterConfig[] {
  try {
    return parseClusters(json);
  } catch (err) {
    throw new Error(`${source}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * How the migrator reaches a cluster: its own access where configured (the local runtime's migrator identity);
 * with a token in Secrets Manager, its own secret, never the one every function reads; with EKS, the cluster's
 * access, as the migrator function's own IAM role (mapped to outrigger:migrators).
 */
export function migratorAccess(config: ClusterConfig): ClusterAccess {
  const { access } = config;
  if (config.storage?.migratorAccess) return config.storage.migratorAccess as ClusterAccess;
  if (access.kind !== 'secret') return access as ClusterAccess;
  if (!access.migratorTokenSecretArn)
    throw new Error(
      `cluster ${config.id}: no access.migratorTokenSecretArn, so no migrator token: the migrator never acts with the controllers' token`,
    );
  const { migratorTokenSecretArn, ...rest } = access;
  return { ...rest, secretArn: migratorTokenSecretArn };
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

  config(id: string): ClusterConfig {
    const config = this.configs.get(id);
    if (!config) throw new Error(`unknown cluster ${JSON.stringify(id)}: this deployment serves ${this.ids().join(', ') || 'none'}`);
    return config;
  }

  /**
   * The storage poll's reporters: the configured apiserver endpoints, or the cluster's own server as `apiserver`,
   * sampled (storagePlan).
   */
  reporters(id: string): Array<{ id: string; client: KubeClient; sample?: () => KubeClient }> {
    const config = this.config(id);
    const configured = config.storage?.reporters;
    // A client of its own per sample: its own keep-alive agent, so a new connection the load balancer places anew.
    if (!configured)
      return [{ id: 'apiserver', client: this.client(id), sample: () => connect(config.access as ClusterAccess, this.options) }];
    return configured.map((r) => {
      const server = r.server;
      return {
        id: r.id,
        client: server
          ? this.cached(`${id}\u0000reporter\u0000${r.id}`, () => connect(config.access as ClusterAccess, { ...this.options, server }))
          : this.client(id),
      };
    });
  }

  /** The client the migrator rewrites objects with. */
  migratorClient(id: string): KubeClient {
    return this.cached(`${id}\u0000migrator`, () => connect(migratorAccess(this.config(id)), this.options));
  }

  client(id: string): KubeClient {
    return this.cached(id, () => connect(this.config(id).access as ClusterAccess, this.options));
  }

  private cached(key: string, make: () => KubeClient): KubeClient {
    let client = this.clients.get(key);
    if (!client) this.clients.set(key, (client = make()));
    return client;
  }
}
