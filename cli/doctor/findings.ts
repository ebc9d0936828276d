// `outrigger doctor`'s judgement (docs/operations/operating.md#the-preflight): what was read from a cluster, its queues and
// EKS, turned into findings, each naming the problem and the command that fixes it. Pure: the gathering is in
// gather.ts, so every branch here is tested without a cluster.
import { CONTROLLERS_GROUP, MIGRATORS_GROUP } from '../../shared/clusters.ts';
import { FORWARDER_SILENT_SECONDS } from '../../functions/heartbeat/heartbeat.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import { MIGRATOR_ROLE } from '../../shared/storage/index.ts';
import { crdDifference, firstDifference, label, rbacProblem, type Binding, type Shipped } from './shipped.ts';

export type Status = 'ok' | 'warn' | 'fail' | 'skipped';

export interface Finding {
  check: string;
  cluster: string;
  status: Status;
  message: string;
  /** The command that fixes it; every warn and fail has one. */
  fix?: string;
}

export interface LeaseSpec {
  holderIdentity?: string;
  renewTime?: string;
}

export interface ForwarderFacts {
  namespace: string;
  /** Its ServiceAccount and RBAC (deploy/forwarder/base), in its namespace. */
  objects: Shipped[];
  deployment: { replicas: number; readyReplicas: number } | undefined;
  /** The leader-election Lease and checkpoint ConfigMap, as the base names them. */
  leaseName: string;
  checkpointName: string;
  lease: LeaseSpec | undefined;
  /** When the leader last wrote its checkpoint (it writes one only after SQS took something new). */
  checkpointWrittenAt: string | undefined;
  /** The Secret holding its signing key (outrigger-forwarder-key): absent, or not 64 hex digits under `key`. */
  key: 'present' | 'absent' | 'malformed';
}

export interface DeadLetterQueue {
  name: string;
  url: string;
  /** The queue whose failures it holds: the redrive's destination. */
  sourceArn: string | undefined;
  arn: string | undefined;
  messages: number | undefined;
  error?: string;
}

/** What the narrow EKS reads answered (eks.ts); each may have failed on its own. */
export interface EksFacts {
  clusterName: string;
  region: string;
  /** Where the forwarder runs: its association names this namespace. */
  forwarderNamespace: string;
  authenticationMode: { value: string | undefined } | { error: string };
  podIdentityAgent: { status: string | undefined } | { error: string };
  accessEntries: Array<{ principalArn: string; groups: string[] }> | { error: string };
  podIdentity: Array<{ roleArn: string | undefined }> | { error: string };
  /** The stack's outputs, when given: the roles that must be let in. */
  expected: { controllerRoles: string[]; migratorRole: string | undefined; forwarderRole: string | undefined };
}

export interface ClusterFacts {
  cluster: string;
  now: Date;
  /** How fixes address this cluster: `kubectl` with its --kubeconfig and --context, as the doctor was given them. */
  kubectl: string;
  /** The overlay command's options (docs/getting-started/deploy.md, step 5). */
  overlayArgs: string;
  /** Storage migration on, with Outrigger's migrations: the migration.k8s.io CRDs are then needed. */
  storage: boolean;
  apiserver: { version: string } | { error: string };
  /** Absent when the apiserver did not answer. */
  crds?: Shipped[];
  rbac?: Shipped[];
  /**
   * The migrator's ClusterRole narrowed to the resources the cluster's StorageStates name, as `outrigger
   * migrator-role` prints it (docs/operations/security.md#the-migrator); absent when none could be read.
   */
  narrowedMigratorRole?: KubeObject | undefined;
  admission?: Shipped[];
  forwarder?: ForwarderFacts;
  deadLetters: DeadLetterQueue[] | { skipped: string };
  /** An SQS-compatible endpoint the queues were read at, which the fixes' aws commands must name too. */
  sqsEndpoint?: string | undefined;
  eks: EksFacts | { skipped: string };
  /** How the storage poll reads the apiservers, when a configuration names the cluster and storage is on. */
  storageReporters?: StorageReporterFacts;
}

export interface StorageReporterFacts {
  /** Why the configured reporters cannot be trusted to narrow persisted (shared/clusters.ts unsafeStorage). */
  unsafe: string | undefined;
  reporters: number;
  /** Discovery samples per poll: set for one endpoint, the default. */
  samples: number | undefined;
  /** The apiservers holding identity leases in kube-system, or why they could not be counted. */
  apiservers: number | { error: string };
}

/** A checkpoint older than this is worth a look: most clusters change something within the hour. */
export const QUIET_SECONDS = 3600;

export function findings(f: ClusterFacts): Finding[] {
  const out: Finding[] = [];
  const add = (check: string, status: Status, message: string, fix?: string) =>
    out.push({ check, cluster: f.cluster, status, message, ...(fix ? { fix } : {}) });
  if ('error' in f.apiserver) {
    add(
      'apiserver',
      'fail',
      `the apiserver did not answer: ${f.apiserver.error}; the cluster's other checks are skipped`,
      `${f.kubectl} version (for EKS: aws eks update-kubeconfig --name <cluster> --alias ${f.cluster})`,
    );
  } else add('apiserver', 'ok', `answers, ${f.apiserver.version}`);
  for (const c of f.crds ?? []) crdFinding(c, f, add);
  for (const r of f.rbac ?? [])
    if (!narrowedMigratorRoleFinding(r, f, add)) rbacFinding(r, `${f.kubectl} apply --server-side -f ${r.file}`, add);
  for (const a of f.admission ?? []) admissionFinding(a, `${f.kubectl} apply --server-side -f ${a.file}`, add);
  if (f.forwarder) forwarderFindings(f.forwarder, f, add);
  deadLetterFindings(f, add);
  eksFindings(f, add);
  if (f.storageReporters && !('error' in f.apiserver)) storageReporterFinding(f.storageReporters, f, add);
  return out;
}

/** Reporters that would narrow persisted on one apiserver's word (docs/controllers/storage-migration.md#safe-by-default). */
function storageReporterFinding(s: StorageReporterFacts, f: ClusterFacts, add: Add): void {
  const check = 'storage reporters';
  const fix = `remove storage.reporters from cluster ${f.cluster} in clusters.json (discovery is then sampled), or give each reporter its own apiserver's https server`;
  if (s.unsafe) return add(check, 'fail', `unsafe: storage.reporters: ${s.unsafe}`, fix);
  if (s.samples) return add(check, 'ok', `one endpoint, discovery sampled over ${s.samples} connections per poll`);
  const counted = `kubectl get leases -n kube-system -l apiserver.kubernetes.io/identity=kube-apiserver (as ${f.kubectl.replace(/^kubectl ?/, '') || 'the kubeconfig'})`;
  if (typeof s.apiservers !== 'number')
    return add(check, 'warn', `${s.reporters} reporter(s); the apiservers could not be counted: ${s.apiservers.error}`, counted);
  if (s.apiservers > s.reporters)
    return add(
      check,
      'fail',
      `unsafe: ${s.apiservers} apiservers hold identity leases, but storage.reporters names ${s.reporters}: a migration would be judged on part of the control plane`,
      fix,
    );
  add(check, 'ok', `${s.reporters} reporter(s), one per apiserver (${s.apiservers} hold identity leases)`);
}

type Add = (check: string, status: Status, message: string, fix?: string) => void;

function crdFinding(c: Shipped, f: ClusterFacts, add: Add): void {
  const name = c.object.metadata.name ?? '';
  const check = `crd ${name}`;
  const storageOnly = name.endsWith('.migration.k8s.io');
  // Without storage migration nothing of Outrigger reads these: a problem is worth a warning, not a failure.
  const bad: Status = storageOnly && !f.storage ? 'warn' : 'fail';
  const fix = `${f.kubectl} apply --server-side --force-conflicts -f ${c.file}`;
  if (!c.installed) return add(check, bad, `not installed (${c.file})`, fix);
  const difference = crdDifference(c.object, c.installed);
  if (difference) return add(check, bad, `not current: differs from ${c.file} at ${difference}`, fix);
  add(check, 'ok', `current (${c.file})`);
}

/**
 * The admission policy that lets a definition name only a ServiceAccount its author may impersonate
 * (docs/operations/security.md#serviceaccounts-a-definition-names): installed, with the shipped rules and
 * binding. Only the fields that decide are compared; the apiserver defaults the others.
 */
function admissionFinding(a: Shipped, fix: string, add: Add): void {
  const check = `admission ${a.object.kind ?? ''} ${a.object.metadata.name ?? ''}`;
  if (!a.installed)
    return add(
      check,
      'fail',
      `absent (${a.file}): a MapController or RevisionPolicy may name any ServiceAccount Outrigger may act as`,
      fix,
    );
  const spec = (o: KubeObject) => (o.spec ?? {}) as Record<string, unknown>;
  for (const key of ['validations', 'variables', 'policyName', 'validationActions']) {
    if (!(key in spec(a.object))) continue;
    const d = firstDifference(spec(a.object)[key], spec(a.installed)[key], `spec.${key}`);
    if (d) return add(check, 'fail', `not current: differs from ${a.file} at ${d}`, fix);
  }
  add(check, 'ok', `current (${a.file})`);
}

function rbacFinding(r: Shipped, fix: string, add: Add): void {
  const problem = rbacProblem(r);
  const o = r.object;
  const ok = o.kind?.endsWith('Binding')
    ? `binds ${((o as Binding).subjects ?? []).map((s) => `${s.kind} ${s.name}`).join(', ')}`
    : 'grants what it should';
  if (problem) add(`rbac ${label(o)}`, 'fail', problem, fix);
  else add(`rbac ${label(o)}`, 'ok', ok);
}

/**
 * The migrator's ClusterRole narrowed by `outrigger migrator-role` lacks what cluster/rbac.yaml ships (list and
 * patch on every resource) by design: judged against the narrowed role instead. False when that does not apply
 * (another object, the shipped role installed, or no StorageStates read), leaving the object to rbacFinding.
 */
function narrowedMigratorRoleFinding(r: Shipped, f: ClusterFacts, add: Add): boolean {
  const o = r.object;
  if (o.kind !== 'ClusterRole' || o.metadata.name !== MIGRATOR_ROLE || !f.narrowedMigratorRole || !r.installed || !rbacProblem(r))
    return false;
  const command = f.kubectl.replace(/^kubectl/, 'outrigger migrator-role');
  const problem = rbacProblem({ file: 'outrigger migrator-role', object: f.narrowedMigratorRole, installed: r.installed });
  if (problem)
    add(
      `rbac ${label(o)}`,
      'fail',
      `neither as shipped nor narrowed to the StorageStates' resources: ${problem}`,
      `${command} | ${f.kubectl} apply -f - (or ${f.kubectl} apply --server-side -f ${r.file} for the shipped role)`,
    );
  else add(`rbac ${label(o)}`, 'ok', "narrowed to the StorageStates' resources, as outrigger migrator-role prints it");
  return true;
}

function secondsSince(time: string | undefined, now: Date): number | undefined {
  const at = Date.parse(time ?? '');
  return Number.isNaN(at) ? undefined : Math.max(0, Math.round((now.getTime() - at) / 1000));
}

function forwarderFindings(fw: ForwarderFacts, f: ClusterFacts, add: Add): void {
  const k = `${f.kubectl} -n ${fw.namespace}`;
  const install = `npm run forwarder-overlay -- --cluster ${f.cluster} ${f.overlayArgs} && ${f.kubectl} apply -k deploy/forwarder/overlays/${f.cluster}`;
  // One finding for the base's ServiceAccount and RBAC: the overlay installs (and fixes) them together.
  const problems = fw.objects.flatMap((r) => {
    const p = rbacProblem(r);
    return p ? [`${label(r.object)} ${p}`] : [];
  });
  if (problems.length) add('forwarder rbac', 'fail', problems.join('; '), install);
  else add('forwarder rbac', 'ok', `${fw.objects.map((r) => label(r.object)).join(', ')} as the base has them`);
  const silent = secondsSince(fw.lease?.renewTime, f.now);
  const leaseName = `${fw.namespace}/${fw.leaseName}`;
  const logs = `${k} logs deployment/outrigger-forwarder`;
  const leading = silent !== undefined && silent <= FORWARDER_SILENT_SECONDS;
  if (!fw.deployment) {
    if (leading)
      add(
        'forwarder deployment',
        'warn',
        `no Deployment outrigger-forwarder in ${fw.namespace}, yet ${fw.lease?.holderIdentity ?? 'someone'} renews its Lease: a forwarder installed some other way`,
        install,
      );
    else
      add('forwarder deployment', 'fail', `no Deployment outrigger-forwarder in ${fw.namespace}: the forwarder is not installed`, install);
  } else if (fw.deployment.readyReplicas === 0)
    add(
      'forwarder deployment',
      'fail',
      `none of ${fw.deployment.replicas} replicas is ready`,
      `${k} describe deployment outrigger-forwarder; ${logs}`,
    );
  else if (fw.deployment.readyReplicas < fw.deployment.replicas)
    add(
      'forwarder deployment',
      'warn',
      `${fw.deployment.readyReplicas} of ${fw.deployment.replicas} replicas ready (the leader is unready when SQS refuses what it sends)`,
      `${k} describe deployment outrigger-forwarder; ${logs}`,
    );
  else add('forwarder deployment', 'ok', `${fw.deployment.readyReplicas} of ${fw.deployment.replicas} replicas ready`);

  if (!fw.lease) add('forwarder lease', 'fail', `no Lease ${leaseName}: no forwarder has ever led here`, fw.deployment ? logs : install);
  else if (silent === undefined) add('forwarder lease', 'fail', `Lease ${leaseName} has no renewTime: no leader`, logs);
  else if (!leading)
    add(
      'forwarder lease',
      'fail',
      `Lease ${leaseName} last renewed ${silent} s ago by ${fw.lease.holderIdentity ?? 'nobody'} (over ${FORWARDER_SILENT_SECONDS} s: no leader sends)`,
      `${logs}; ${k} rollout restart deployment/outrigger-forwarder`,
    );
  else add('forwarder lease', 'ok', `held by ${fw.lease.holderIdentity ?? '?'}, renewed ${silent} s ago`);

  const sent = secondsSince(fw.checkpointWrittenAt, f.now);
  const checkpoint = `${k} get configmap ${fw.checkpointName}`;
  if (!leading) add('forwarder sending', 'skipped', 'no leader, so nothing sends (see forwarder lease)');
  else if (sent === undefined)
    add(
      'forwarder sending',
      'warn',
      `no checkpoint in ${fw.namespace}: the forwarder has not had SQS take anything yet`,
      `${logs}; ${checkpoint}`,
    );
  else if (sent > QUIET_SECONDS)
    add(
      'forwarder sending',
      'warn',
      `last sent ${Math.round(sent / 60)} min ago (its checkpoint's last write): a quiet cluster, or a forwarder SQS refuses`,
      logs,
    );
  else add('forwarder sending', 'ok', `last sent ${sent} s ago (its checkpoint's last write)`);

  // Unsigned envelopes are correct, a read of the parent per change dearer (docs/operations/forwarder.md#the-forwarder-key).
  const store = `${k} create secret generic outrigger-forwarder-key --from-literal=key="$(outrigger forwarder-key --cluster ${f.cluster})" && ${k} rollout restart deployment/outrigger-forwarder`;
  if (fw.key === 'absent')
    add(
      'forwarder key',
      'warn',
      `no Secret outrigger-forwarder-key in ${fw.namespace}: the forwarder sends unsigned envelopes, so history reads each parent it records (4 requests per change instead of 3)`,
      store,
    );
  else if (fw.key === 'malformed')
    add(
      'forwarder key',
      'fail',
      `Secret outrigger-forwarder-key in ${fw.namespace} holds no key (64 hex digits under "key"): the forwarder will not start`,
      `${k} delete secret outrigger-forwarder-key && ${store}`,
    );
  else add('forwarder key', 'ok', `Secret outrigger-forwarder-key holds a key: envelopes are signed`);
}

function deadLetterFindings(f: ClusterFacts, add: Add): void {
  if (!Array.isArray(f.deadLetters)) return add('dead letters', 'skipped', f.deadLetters.skipped);
  for (const q of f.deadLetters) {
    const check = `dead letters ${q.name}`;
    const region = /^arn:aws[a-z-]*:sqs:([a-z0-9-]+):/.exec(q.arn ?? '')?.[1];
    const aws = `aws sqs${region ? ` --region ${region}` : ''}${f.sqsEndpoint ? ` --endpoint-url ${f.sqsEndpoint}` : ''}`;
    if (q.error || q.messages === undefined)
      add(
        check,
        'fail',
        `could not be read: ${q.error ?? 'no message count'}`,
        "npm run deploy -- -c outrigger:clustersFile=<file> (docs/getting-started/deploy.md, step 3), or pass the stack's own --outputs",
      );
    else if (q.messages > 0)
      add(
        check,
        'fail',
        `holds ${q.messages} message(s): read their reason attribute, fix the cause, then move them back`,
        `${aws} receive-message --queue-url ${q.url} --message-attribute-names All --max-number-of-messages 10 && ${aws} start-message-move-task --source-arn ${q.arn ?? '<its ARN>'} --destination-arn ${q.sourceArn ?? '<its queue ARN>'}`,
      );
    else add(check, 'ok', 'empty');
  }
}

function eksFindings(f: ClusterFacts, add: Add): void {
  const checks = ['eks authentication mode', 'eks pod identity agent', 'eks access entries', 'eks pod identity association'];
  if ('skipped' in f.eks) {
    for (const c of checks) add(c, 'skipped', f.eks.skipped);
    return;
  }
  const e = f.eks;
  const eks = `aws eks --region ${e.region}`;
  const mode = e.authenticationMode;
  if ('error' in mode) add(checks[0]!, 'fail', `could not be read: ${mode.error}`, `${eks} describe-cluster --name ${e.clusterName}`);
  else if (mode.value === 'API' || mode.value === 'API_AND_CONFIG_MAP') add(checks[0]!, 'ok', mode.value);
  else
    add(
      checks[0]!,
      'fail',
      `${mode.value ?? 'unset'}: access entries need API or API_AND_CONFIG_MAP`,
      `${eks} update-cluster-config --name ${e.clusterName} --access-config authenticationMode=API_AND_CONFIG_MAP`,
    );

  const agent = e.podIdentityAgent;
  const createAgent = `${eks} create-addon --cluster-name ${e.clusterName} --addon-name eks-pod-identity-agent`;
  if ('error' in agent) add(checks[1]!, 'fail', `could not be read: ${agent.error}`, createAgent);
  else if (agent.status === undefined)
    add(checks[1]!, 'fail', 'the eks-pod-identity-agent add-on is not installed: the forwarder gets no AWS credentials', createAgent);
  else if (agent.status !== 'ACTIVE')
    add(
      checks[1]!,
      'warn',
      `the eks-pod-identity-agent add-on is ${agent.status}`,
      `${eks} describe-addon --cluster-name ${e.clusterName} --addon-name eks-pod-identity-agent`,
    );
  else add(checks[1]!, 'ok', 'eks-pod-identity-agent ACTIVE');

  accessEntryFindings(e, f.storage, checks[2]!, add);

  const assoc = e.podIdentity;
  const ns = e.forwarderNamespace;
  const role = e.expected.forwarderRole ?? '<the stack output <Cluster>ForwarderRoleArn (pass --outputs)>';
  const create = `${eks} create-pod-identity-association --cluster-name ${e.clusterName} --namespace ${ns} --service-account outrigger-forwarder --role-arn ${role}`;
  if ('error' in assoc) add(checks[3]!, 'fail', `could not be read: ${assoc.error}`, create);
  else if (!assoc.length)
    add(checks[3]!, 'fail', `no Pod Identity association for ${ns}/outrigger-forwarder: the forwarder cannot send`, create);
  else if (e.expected.forwarderRole && !assoc.some((a) => a.roleArn === e.expected.forwarderRole))
    add(
      checks[3]!,
      'fail',
      `${ns}/outrigger-forwarder is associated with ${assoc.map((a) => a.roleArn ?? '?').join(', ')}, not ${e.expected.forwarderRole}`,
      `${eks} list-pod-identity-associations --cluster-name ${e.clusterName} --namespace ${ns} (then update-pod-identity-association --association-id <id> --role-arn ${e.expected.forwarderRole})`,
    );
  else add(checks[3]!, 'ok', `${ns}/outrigger-forwarder: ${assoc.map((a) => a.roleArn ?? '?').join(', ')}`);
}

function accessEntryFindings(e: EksFacts, storage: boolean, check: string, add: Add): void {
  const eks = `aws eks --region ${e.region}`;
  const entries = e.accessEntries;
  const create = (arn: string, groups: string[]) =>
    `${eks} create-access-entry --cluster-name ${e.clusterName} --principal-arn ${arn} --kubernetes-groups ${groups.join(' ')}`;
  if ('error' in entries)
    return add(check, 'fail', `could not be read: ${entries.error}`, `${eks} list-access-entries --cluster-name ${e.clusterName}`);
  const groupsOf = (arn: string) => entries.find((x) => x.principalArn === arn)?.groups;
  const problems: Array<{ message: string; fix: string }> = [];
  const need = (arn: string, groups: string[]) => {
    const have = groupsOf(arn);
    if (!have) problems.push({ message: `${arn} has no access entry`, fix: create(arn, groups) });
    else if (!groups.every((g) => have.includes(g)))
      problems.push({
        message: `${arn} is in ${have.join(', ') || 'no group'}, not ${groups.join(' and ')}`,
        fix: `${eks} update-access-entry --cluster-name ${e.clusterName} --principal-arn ${arn} --kubernetes-groups ${[...new Set([...have, ...groups])].join(' ')}`,
      });
  };
  const migratorGroups = storage ? [CONTROLLERS_GROUP, MIGRATORS_GROUP] : [CONTROLLERS_GROUP];
  if (e.expected.controllerRoles.length || e.expected.migratorRole) {
    for (const arn of e.expected.controllerRoles) need(arn, [CONTROLLERS_GROUP]);
    if (e.expected.migratorRole) need(e.expected.migratorRole, migratorGroups);
  } else {
    // Without the stack's outputs the roles are unknown: at least the groups must be someone's.
    const placeholder = '<a role of the stack output ControllerRoleArns>';
    if (!entries.some((x) => x.groups.includes(CONTROLLERS_GROUP)))
      problems.push({
        message: `no access entry is in ${CONTROLLERS_GROUP} (pass --outputs to check each role)`,
        fix: create(placeholder, [CONTROLLERS_GROUP]),
      });
    if (storage && !entries.some((x) => x.groups.includes(CONTROLLERS_GROUP) && x.groups.includes(MIGRATORS_GROUP)))
      problems.push({
        message: `no access entry is in both ${CONTROLLERS_GROUP} and ${MIGRATORS_GROUP} (the migrator's)`,
        fix: create('<the stack output MigratorRoleArn>', migratorGroups),
      });
  }
  if (!problems.length)
    return add(check, 'ok', `${entries.filter((x) => x.groups.includes(CONTROLLERS_GROUP)).length} in ${CONTROLLERS_GROUP}`);
  add(check, 'fail', problems.map((p) => p.message).join('; '), problems.map((p) => p.fix).join(' && '));
}

const LABEL: Record<Status, string> = { ok: 'ok', warn: 'WARN', fail: 'FAIL', skipped: 'skip' };

/** For people: one block per cluster, one line per finding, its fix under it, and a count at the end. */
export function renderText(all: readonly Finding[]): string {
  const lines: string[] = [];
  const width = Math.max(0, ...all.map((x) => x.check.length));
  for (const cluster of [...new Set(all.map((x) => x.cluster))]) {
    lines.push(`cluster ${cluster}`);
    for (const x of all.filter((y) => y.cluster === cluster)) {
      lines.push(`  ${LABEL[x.status].padEnd(4)}  ${x.check.padEnd(width)}  ${x.message}`);
      if (x.fix && (x.status === 'fail' || x.status === 'warn')) lines.push(`        fix: ${x.fix}`);
    }
  }
  const count = (s: Status) => all.filter((x) => x.status === s).length;
  lines.push(`${count('fail')} failed, ${count('warn')} warnings, ${count('ok')} ok, ${count('skipped')} skipped`);
  return `${lines.join('\n')}\n`;
}

/** Non-zero when any check failed. */
export function exitCode(all: readonly Finding[]): number {
  return all.some((x) => x.status === 'fail') ? 1 : 0;
}
