// `outrigger doctor`: the preflight from a laptop (docs/operations/operating.md#the-preflight). Reads each cluster as the kubeconfig's
// user, its dead-letter queues and EKS with the caller's AWS credentials, and prints every finding with the command
// that fixes it. Needs a checkout: it compares the cluster with the manifests the checkout ships.
import { SQSClient } from '@aws-sdk/client-sqs';
import { parseArgs } from 'node:util';
import { findOutput, pascal, queueRegion, readJson, clusterConfigurationJson } from '../../scripts/forwarder-overlay.ts';
import { parseClusters, type ClusterConfig } from '../../shared/clusters.ts';
import { connect } from '../../shared/kube/index.ts';
import { EVENTS_QUEUE, QueueUrls, queueName } from '../../shared/lambda/queues.ts';
import { sdkEks, type EksApi } from './eks.ts';
import { exitCode, findings, renderText, type Finding } from './findings.ts';
import { gatherCluster, readManifests, type ClusterTarget, type GatherOptions } from './gather.ts';

export const doctorUsage = `usage: outrigger doctor [--cluster ID]... [options]

Checks, per cluster, what Outrigger's stack and forwarder need: the apiserver answers; Outrigger's CRDs are
installed and current (as cluster/crds/ ships them); its RBAC (cluster/rbac.yaml) and the forwarder's are bound;
its admission policy on named ServiceAccounts (cluster/admission.yaml) is installed; the forwarder is installed,
its leader renews its Lease and it sent recently; each dead-letter queue is empty; and on EKS the authentication
mode, the Pod Identity Agent add-on, the access entries and their groups, and the forwarder's Pod Identity
association. Each finding that is not ok comes with the command that fixes it. Reads only. Exits 1 when a check
failed. The migrator's ClusterRole passes as shipped or as outrigger migrator-role narrows it for the cluster.

options:
  --cluster ID             check this cluster of the configuration (repeatable; default: every one, or \`local\`
                           without a configuration)
  --clusters FILE          the cluster configuration (default: OUTRIGGER_CLUSTERS, else cdk.json's context)
  --outputs FILE           the stack's outputs (cdk deploy --outputs-file): its queues and roles
  --queue-url-prefix URL   the queues instead (OUTRIGGER_QUEUE_URL_PREFIX's form: https://sqs.<region>.amazonaws.com/<account>/<stack>-)
  --sqs-endpoint URL       an SQS-compatible endpoint (a local one: placeholder credentials)
  --kubeconfig PATH        default: $KUBECONFIG
  --context NAME|ID=NAME   the kubeconfig context (ID=NAME for one cluster of several; default: the current
                           context for one cluster, a context named as the cluster's id for several)
  --forwarder-namespace NS where the forwarder runs (default: the base's, outrigger-system)
  --json                   the findings as JSON, one array
`;

export interface DoctorDependencies {
  /** The checkout whose manifests the clusters are compared with. */
  root: string;
  eks?: (region: string) => EksApi;
  sqs?: (region: string | undefined, endpoint: string | undefined) => SQSClient;
  now?: () => Date;
}

export interface DoctorRun {
  findings: Finding[];
  output: string;
  code: number;
}

const quote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export async function doctor(argv: string[], deps: DoctorDependencies): Promise<DoctorRun> {
  const { values } = parseArgs({
    args: argv,
    options: {
      cluster: { type: 'string', multiple: true },
      clusters: { type: 'string' },
      outputs: { type: 'string' },
      'queue-url-prefix': { type: 'string' },
      'sqs-endpoint': { type: 'string' },
      kubeconfig: { type: 'string' },
      context: { type: 'string', multiple: true },
      'forwarder-namespace': { type: 'string' },
      json: { type: 'boolean' },
    },
    strict: true,
  });
  const json = await clusterConfigurationJson(values.clusters);
  const configs: ClusterConfig[] | undefined = json === undefined ? undefined : parseClusters(json);
  const ids = values.cluster?.length ? values.cluster : (configs?.map((c) => c.id) ?? ['local']);
  for (const id of ids)
    if (configs && !configs.some((c) => c.id === id))
      throw new Error(`the cluster configuration has no cluster ${id} (it names ${configs.map((c) => c.id).join(', ')})`);
  const outputs = values.outputs ? ((await readJson(values.outputs)) as Record<string, Record<string, string>>) : undefined;
  const output = (name: string) => (outputs ? findOutput(outputs, name) : undefined);

  const contexts = new Map<string, string>();
  let anyContext: string | undefined;
  for (const c of values.context ?? []) {
    const eq = c.indexOf('=');
    if (eq > 0) contexts.set(c.slice(0, eq), c.slice(eq + 1));
    else anyContext = c;
  }
  const kubeconfig = values.kubeconfig ?? (process.env.KUBECONFIG || undefined);
  const target = (id: string): ClusterTarget => {
    const context = contexts.get(id) ?? anyContext ?? (ids.length > 1 ? id : undefined);
    const kubectl = [
      'kubectl',
      ...(values.kubeconfig ? ['--kubeconfig', quote(values.kubeconfig)] : []),
      ...(context ? ['--context', quote(context)] : []),
    ];
    return {
      id,
      config: configs?.find((c) => c.id === id),
      kube: connect({ kind: 'kubeconfig', path: kubeconfig, context }, { retry: { retries: 1 }, timeoutMs: 10_000 }),
      kubectl: kubectl.join(' '),
    };
  };

  // The queues: a prefix given, or the one every queue URL of the stack shares, from a cluster's events queue output.
  const sqs = deps.sqs ?? defaultSqs;
  const queues = (id: string): GatherOptions['queues'] => {
    const events = output(`${pascal(id)}EventsQueueUrl`);
    const prefix =
      values['queue-url-prefix'] ??
      (events?.endsWith(queueName(id, EVENTS_QUEUE)) ? events.slice(0, -queueName(id, EVENTS_QUEUE).length) : undefined);
    if (!prefix)
      return {
        skipped: outputs
          ? `the outputs name no ${pascal(id)}EventsQueueUrl: is the cluster in the deployed configuration?`
          : 'no queues named: pass --outputs cdk-outputs.json (or --queue-url-prefix)',
      };
    const endpoint = values['sqs-endpoint'];
    return { urls: new QueueUrls(prefix), sqs: sqs(queueRegion(prefix + queueName(id, EVENTS_QUEUE)), endpoint), endpoint };
  };
  const overlayArgs = [
    // Without --clusters the overlay finds the configuration where the doctor did (OUTRIGGER_CLUSTERS, cdk.json).
    ...(values.clusters ? [`--clusters ${quote(values.clusters)}`] : json === undefined ? ['--clusters clusters.json'] : []),
    values.outputs ? `--outputs ${quote(values.outputs)}` : '--outputs cdk-outputs.json',
    ...(values['forwarder-namespace'] ? [`--namespace ${quote(values['forwarder-namespace'])}`] : []),
  ].join(' ');
  const manifests = await readManifests(deps.root);
  const all = (
    await Promise.all(
      ids.map(async (id) =>
        findings(
          await gatherCluster(target(id), {
            manifests,
            queues: queues(id),
            eks: deps.eks ?? sdkEks,
            expected: () => ({
              controllerRoles: (output('ControllerRoleArns') ?? '').split(/\s+/).filter(Boolean),
              migratorRole: output('MigratorRoleArn'),
              forwarderRole: output(`${pascal(id)}ForwarderRoleArn`),
            }),
            forwarderNamespace: values['forwarder-namespace'],
            overlayArgs,
            now: deps.now,
          }),
        ),
      ),
    )
  ).flat();
  return { findings: all, output: values.json ? `${JSON.stringify(all, null, 2)}\n` : renderText(all), code: exitCode(all) };
}

function defaultSqs(region: string | undefined, endpoint: string | undefined): SQSClient {
  return endpoint
    ? new SQSClient({ endpoint, region: region ?? 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } })
    : new SQSClient(region ? { region } : {});
}
