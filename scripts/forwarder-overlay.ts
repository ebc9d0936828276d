// npm run forwarder-overlay -- --cluster <id> [--outputs cdk-outputs.json] [--image REF] [--out DIR | --helm-values FILE]:
// writes the kustomize overlay (or the Helm chart's values) that installs one cluster's forwarder
// (docs/getting-started/deploy.md, step 5) from the cluster configuration (the stack's `outrigger:clusters`) and the stack's outputs,
// so nothing is edited by hand.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { dump } from 'js-yaml';
import { projectRoot } from '../local/paths.ts';
import { parseClusters, type ClusterConfig } from '../shared/clusters.ts';

const usage = `usage: npm run forwarder-overlay -- --cluster ID [options]

Writes a kustomize overlay for cluster ID's forwarder: apply it with kubectl apply -k DIR. With --helm-values,
writes the values of the Helm chart deploy/forwarder/chart instead: install it with helm install -f FILE.

options:
  --cluster ID            the cluster's id in the configuration (required)
  --clusters FILE         the cluster configuration, a JSON array (default: OUTRIGGER_CLUSTERS, else cdk.json's
                          context outrigger:clustersFile, the file, or outrigger:clusters, the JSON)
  --outputs FILE          the stack's outputs, as \`cdk deploy --outputs-file FILE\` writes them: the queue URLs
                          <Cluster>EventsQueueUrl and <Cluster>EventsDeadLetterQueueUrl (<Cluster> is the id in
                          PascalCase: prod-eu -> ProdEu), and the image from ForwarderImageUri if there is one
  --events-queue-url URL  instead of the output (and --dead-letter-queue-url URL)
  --image REF             the forwarder image (forwarder/Dockerfile), e.g. <registry>/outrigger-forwarder:0.1.0
  --out DIR               where to write (default: deploy/forwarder/overlays/ID)
  --namespace NS          install in NS rather than outrigger-system (name it in the Pod Identity association)
  --base PATH|URL         the base (default: deploy/forwarder/base; written relative to DIR), or a remote
                          kustomize URL
  --helm-values FILE      write the chart's values for the same settings to FILE, and no overlay`;

export interface OverlayInput {
  cluster: string;
  clusters: ClusterConfig[];
  /** `cdk deploy --outputs-file`'s content: outputs per stack. */
  outputs?: Record<string, Record<string, string>>;
  eventsQueueUrl?: string | undefined;
  deadLetterQueueUrl?: string | undefined;
  image?: string | undefined;
  /** The base, as kustomize resolves it from the overlay's directory. */
  base: string;
  /** Another namespace than the base's outrigger-system (the Pod Identity association must name it too). */
  namespace?: string | undefined;
}

/** The cluster's part of construct ids and output names (infra: the id in PascalCase). */
export function pascal(id: string): string {
  return id.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase()).replace(/[^A-Za-z0-9]/g, '');
}

/**
 * An output by name: the stack's own (`ProdEventsQueueUrl`), or one CDK named inside a construct (a prefix of
 * construct ids, a hash suffix of 8 hex digits), when exactly one matches.
 */
export function findOutput(outputs: Record<string, Record<string, string>>, name: string): string | undefined {
  const all = Object.entries(outputs).flatMap(([stack, values]) => Object.entries(values).map(([key, value]) => ({ stack, key, value })));
  const exact = all.filter((o) => o.key === name || new RegExp(`^${name}[0-9A-F]{8}$`).test(o.key));
  const loose = exact.length ? exact : all.filter((o) => new RegExp(`${name}([0-9A-F]{8})?$`).test(o.key));
  if (loose.length > 1)
    throw new Error(
      `several outputs match ${name}: ${loose.map((o) => `${o.stack}.${o.key}`).join(', ')}; name the value with a flag instead`,
    );
  return loose[0]?.value;
}

/** The region of an SQS queue URL (https://sqs.<region>.amazonaws.com/...): the SDK needs one, and Pod Identity sets none. */
export function queueRegion(url: string): string | undefined {
  return /^https:\/\/sqs[.-]([a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?\//.exec(url)?.[1];
}

/** What a cluster's forwarder is installed with: the one source of both the overlay and the Helm values. */
export interface ForwarderSettings {
  clusterId: string;
  eventsQueueUrl: string;
  deadLetterQueueUrl: string;
  /** The queue URL's region, where it names one. */
  region?: string;
  /** The cluster's storage settings, as the forwarder reads them in OUTRIGGER_CLUSTERS. */
  storage?: Record<string, unknown>;
  /** The cluster's controllerSelector: the forwarder watches the kinds of those controllers only, as the router routes. */
  controllerSelector?: string;
  /** The cluster's Metacontroller APIs setting: off, the forwarder watches none of their kinds, as the router routes. */
  metacontroller?: { enabled: boolean };
  image: { repository: string; tag?: string; digest?: string };
  namespace?: string;
}

/** The settings of `input.cluster`'s forwarder, from the configuration, the outputs and the flags; refuses what it lacks. */
export function forwarderSettings(input: Omit<OverlayInput, 'base'>): ForwarderSettings {
  const config = input.clusters.find((c) => c.id === input.cluster);
  if (!config)
    throw new Error(`the cluster configuration has no cluster ${input.cluster} (it names ${input.clusters.map((c) => c.id).join(', ')})`);
  const id = pascal(input.cluster);
  const fromOutputs = (name: string) => (input.outputs ? findOutput(input.outputs, name) : undefined);
  const events = input.eventsQueueUrl ?? fromOutputs(`${id}EventsQueueUrl`);
  const deadLetter = input.deadLetterQueueUrl ?? fromOutputs(`${id}EventsDeadLetterQueueUrl`);
  const image = input.image ?? fromOutputs('ForwarderImageUri');
  if (!events)
    throw new Error(`no events queue for cluster ${input.cluster}: pass --outputs with ${id}EventsQueueUrl, or --events-queue-url`);
  if (!deadLetter)
    throw new Error(
      `no events dead-letter queue for cluster ${input.cluster}: pass --outputs with ${id}EventsDeadLetterQueueUrl, or --dead-letter-queue-url`,
    );
  if (!image) throw new Error('no forwarder image: pass --image (built from forwarder/Dockerfile), or --outputs with ForwarderImageUri');
  // What the forwarder needs of the cluster's entry: its storage settings, which decide whether and which
  // StorageVersionMigrations it watches. migratorAccess is the local runtime's; absent fields stay absent (YAML
  // has no undefined).
  const storage = config.storage
    ? Object.fromEntries(Object.entries(config.storage).filter(([key, value]) => key !== 'migratorAccess' && value !== undefined))
    : undefined;
  const region = queueRegion(events);
  const at = image.lastIndexOf('@');
  const colon = image.lastIndexOf(':');
  const tagged = colon > image.lastIndexOf('/');
  return {
    clusterId: config.id,
    eventsQueueUrl: events,
    deadLetterQueueUrl: deadLetter,
    ...(region ? { region } : {}),
    ...(storage ? { storage } : {}),
    ...(config.controllerSelector ? { controllerSelector: config.controllerSelector } : {}),
    ...(config.metacontroller ? { metacontroller: config.metacontroller } : {}),
    image:
      at > 0
        ? { repository: image.slice(0, at), digest: image.slice(at + 1) }
        : tagged
          ? { repository: image.slice(0, colon), tag: image.slice(colon + 1) }
          : { repository: image },
    ...(input.namespace ? { namespace: input.namespace } : {}),
  };
}

/** The forwarder's own cluster entry (OUTRIGGER_CLUSTERS): its access is in-cluster, whatever the functions use. */
function forwarderClusters(settings: ForwarderSettings): string {
  return JSON.stringify([
    {
      id: settings.clusterId,
      access: { kind: 'kubeconfig' },
      ...(settings.storage ? { storage: settings.storage } : {}),
      ...(settings.controllerSelector ? { controllerSelector: settings.controllerSelector } : {}),
      ...(settings.metacontroller ? { metacontroller: settings.metacontroller } : {}),
    },
  ]);
}

/** The overlay's files, by name. */
export function forwarderOverlay(input: OverlayInput): Record<string, string> {
  const settings = forwarderSettings(input);
  const env = [
    `OUTRIGGER_CLUSTER_ID=${settings.clusterId}`,
    `OUTRIGGER_EVENT_QUEUE_URL=${settings.eventsQueueUrl}`,
    `OUTRIGGER_DEAD_LETTER_QUEUE_URL=${settings.deadLetterQueueUrl}`,
    `OUTRIGGER_CLUSTERS=${forwarderClusters(settings)}`,
    ...(settings.region ? [`AWS_REGION=${settings.region}`] : []),
  ];
  const { repository, tag, digest } = settings.image;
  const imageEntry = { name: 'outrigger-forwarder', newName: repository, ...(digest ? { digest } : tag ? { newTag: tag } : {}) };
  // kustomize's namespace moves the objects but not the bindings' ServiceAccount subjects: patched to follow.
  const subject = (kind: string) => ({
    target: { group: 'rbac.authorization.k8s.io', kind, name: 'outrigger-forwarder' },
    patch: JSON.stringify([{ op: 'replace', path: '/subjects/0/namespace', value: settings.namespace }]),
  });
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    ...(settings.namespace ? { namespace: settings.namespace } : {}),
    resources: [input.base],
    images: [imageEntry],
    configMapGenerator: [{ name: 'outrigger-forwarder', behavior: 'merge', envs: ['forwarder.env'] }],
    ...(settings.namespace ? { patches: [subject('ClusterRoleBinding'), subject('RoleBinding')] } : {}),
  };
  const header = `# Cluster ${settings.clusterId}'s forwarder, generated by \`npm run forwarder-overlay\` from the cluster configuration and the\n# stack's outputs: generate it again rather than editing it. Apply with: kubectl apply -k <this directory>\n`;
  return {
    'kustomization.yaml': header + dump(kustomization, { lineWidth: -1 }),
    'forwarder.env': `${env.join('\n')}\n`,
  };
}

/** The Helm chart's values for the same cluster (deploy/forwarder/chart; its values.schema.json names each field). */
export function forwarderHelmValues(input: Omit<OverlayInput, 'base'>): string {
  const settings = forwarderSettings(input);
  const header = `# Cluster ${settings.clusterId}'s forwarder values for deploy/forwarder/chart, generated by \`npm run forwarder-overlay\` from the\n# cluster configuration and the stack's outputs: generate them again rather than editing them.\n`;
  return header + dump(settings, { lineWidth: -1 });
}

export async function readJson(file: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The cluster configuration's JSON: `file`, else OUTRIGGER_CLUSTERS, else cdk.json's context (outrigger:clustersFile,
 * the file, or outrigger:clusters, the JSON), as `cdk deploy` was given it; undefined when none names one.
 */
export async function clusterConfigurationJson(file: string | undefined): Promise<string | undefined> {
  if (file) return readFile(file, 'utf8');
  if (process.env.OUTRIGGER_CLUSTERS) return process.env.OUTRIGGER_CLUSTERS;
  const cdk = (await readJson(join(projectRoot, 'cdk.json'))) as { context?: Record<string, unknown> };
  const inFile = cdk.context?.['outrigger:clustersFile'];
  const inline = cdk.context?.['outrigger:clusters'];
  if (typeof inFile === 'string') return readFile(resolve(projectRoot, inFile), 'utf8');
  return inline === undefined ? undefined : JSON.stringify(inline);
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      cluster: { type: 'string' },
      clusters: { type: 'string' },
      outputs: { type: 'string' },
      'events-queue-url': { type: 'string' },
      'dead-letter-queue-url': { type: 'string' },
      image: { type: 'string' },
      out: { type: 'string' },
      base: { type: 'string' },
      namespace: { type: 'string' },
      'helm-values': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help || !values.cluster) {
    process.stderr.write(`${usage}\n`);
    process.exit(values.help ? 0 : 2);
  }
  const clustersJson = await clusterConfigurationJson(values.clusters);
  if (clustersJson === undefined)
    throw new Error('no cluster configuration: pass --clusters FILE (the file `cdk deploy` was given as outrigger:clustersFile)');
  const input = {
    cluster: values.cluster,
    clusters: parseClusters(clustersJson),
    outputs: values.outputs ? ((await readJson(values.outputs)) as Record<string, Record<string, string>>) : undefined,
    eventsQueueUrl: values['events-queue-url'],
    deadLetterQueueUrl: values['dead-letter-queue-url'],
    image: values.image,
    namespace: values.namespace,
  };
  const helmValues = values['helm-values'];
  if (helmValues) {
    await writeFile(helmValues, forwarderHelmValues(input));
    process.stdout.write(`wrote ${helmValues}: helm install outrigger-forwarder deploy/forwarder/chart -f ${helmValues}\n`);
    return;
  }
  const out = resolve(values.out ?? join(projectRoot, 'deploy', 'forwarder', 'overlays', values.cluster));
  const files = forwarderOverlay({
    ...input,
    // kustomize takes a local base only as a relative path.
    base:
      values.base && /^[a-z]+:\/\/|^github\.com\//.test(values.base)
        ? values.base
        : relative(out, resolve(values.base ?? join(projectRoot, 'deploy', 'forwarder', 'base'))),
  });
  await mkdir(out, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(out, name), text);
  process.stdout.write(`wrote ${relative(process.cwd(), out) || '.'}: kubectl apply -k ${relative(process.cwd(), out) || '.'}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`forwarder-overlay: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  });
}
