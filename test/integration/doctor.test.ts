// `outrigger doctor` against a real apiserver of its own (its checks break cluster-wide things, CRDs and
// ClusterRoleBindings, that the shared bed's other files rely on) and the bed's ElasticMQ: healthy with the
// forwarder running from its base's environment, then one thing broken at a time, each found with its fix, and
// the fix, run as printed (with the bed's kubectl), mends it.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CreateQueueCommand, PurgeQueueCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { load } from 'js-yaml';
import { doctor } from '../../cli/doctor/command.ts';
import { clusterQueues } from '../../cli/doctor/gather.ts';
import type { Finding } from '../../cli/doctor/findings.ts';
import { kubectlBinary, startTestCluster, type TestCluster } from '../../local/apiserver.ts';
import { localSqsClient } from '../../local/elasticmq.ts';
import { projectRoot } from '../../local/paths.ts';
import { clusterManifests } from '../../local/testbed.ts';
import { connect, gvr, Resources, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { queueName } from '../../shared/lambda/queues.ts';
import { deploymentEnv, FORWARDER_NAMESPACE, renderKustomize, startForwarder, type ForwarderProcess } from '../testbed/forwarder.ts';
import { eventually, testbed, uniqueName } from '../testbed/index.ts';

const run = promisify(execFile);
const CLUSTER = 'bed';

describe('outrigger doctor', () => {
  let cluster: TestCluster;
  let admin: KubeClient;
  let forwarder: ForwarderProcess | undefined;
  let args: string[];
  const sqs = localSqsClient(testbed().sqsEndpoint);
  let prefix: string;

  /** The doctor as the CLI runs it, in this process; its findings by check. */
  async function check(): Promise<{ code: number; output: string; by: (check: string) => Finding }> {
    const t0 = Date.now();
    const r = await doctor(args, { root: projectRoot });
    process.stdout.write(`[doctor] ${r.findings.length} findings in ${Date.now() - t0} ms\n`);
    const by = (name: string) => {
      const found = r.findings.find((f) => f.check === name);
      if (!found) throw new Error(`no finding ${name} in:\n${r.output}`);
      return found;
    };
    return { code: r.code, output: r.output, by };
  }

  /** A fix as printed, with the bed's kubectl for `kubectl`, from the checkout (its paths are relative to it). */
  async function runFix(fix: string): Promise<void> {
    expect(fix).toMatch(/^kubectl /);
    const argv = fix.split(' ').slice(1);
    await run(kubectlBinary, argv, { cwd: projectRoot });
  }

  beforeAll(async () => {
    const t0 = Date.now();
    cluster = await startTestCluster({});
    admin = connect({ kind: 'kubeconfig', path: cluster.kubeconfigs.admin });
    await applyManifests(admin, await clusterManifests());
    // The deployment's queues, as the stack names them, on the bed's ElasticMQ.
    prefix = `${uniqueName('doctor')}-`;
    const urls = await Promise.all(
      clusterQueues().flatMap((q) =>
        [false, true].map(async (dlq) => {
          const out = await sqs.send(
            new CreateQueueCommand({ QueueName: `${prefix}${queueName(CLUSTER, q, dlq)}`, Attributes: { FifoQueue: 'true' } }),
          );
          return out.QueueUrl!;
        }),
      ),
    );
    const events = urls.find((u) => u.endsWith(`${CLUSTER}-events.fifo`))!;
    const urlPrefix = events.slice(0, -`${CLUSTER}-events.fifo`.length);
    // The forwarder's ServiceAccount and RBAC from its base; the forwarder itself as a process with the base's
    // environment (its Lease and checkpoint ConfigMap), the bed having no kubelet to run its Deployment.
    const objects = await renderKustomize(join(projectRoot, 'deploy', 'forwarder', 'base'));
    const rbacKinds = new Set(['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);
    await applyManifests(
      admin,
      objects
        .filter((o) => rbacKinds.has(o.kind ?? ''))
        .map((o) => JSON.stringify(o))
        .join('\n---\n'),
    );
    forwarder = startForwarder({
      ...deploymentEnv(objects, { name: 'forwarder-0', namespace: FORWARDER_NAMESPACE }),
      KUBECONFIG: cluster.kubeconfigs.admin,
      OUTRIGGER_CLUSTER_ID: CLUSTER,
      OUTRIGGER_EVENT_QUEUE_URL: events,
      OUTRIGGER_SQS_ENDPOINT: testbed().sqsEndpoint,
    });
    await forwarder.logged('leader election: leading', 30_000);
    // Something for it to send, so that it writes its checkpoint.
    await admin.create(gvr('outrigger.dev', 'v1alpha1', 'revisionpolicies'), {
      apiVersion: 'outrigger.dev/v1alpha1',
      kind: 'RevisionPolicy',
      metadata: { name: 'statefulsets' },
      spec: { target: { apiVersion: 'apps/v1', kind: 'StatefulSet' }, targetState: ['spec.template'] },
    });
    await eventually(() =>
      admin.find(gvr('', 'v1', 'configmaps'), { name: 'outrigger-forwarder-checkpoint', namespace: FORWARDER_NAMESPACE }),
    );
    const dir = await mkdtemp(join(tmpdir(), 'outrigger-doctor-'));
    await writeFile(
      join(dir, 'clusters.json'),
      JSON.stringify([{ id: CLUSTER, access: { kind: 'kubeconfig', path: cluster.kubeconfigs.admin } }]),
    );
    args = [
      '--clusters',
      join(dir, 'clusters.json'),
      '--kubeconfig',
      cluster.kubeconfigs.admin,
      '--queue-url-prefix',
      urlPrefix,
      '--sqs-endpoint',
      testbed().sqsEndpoint,
    ];
    process.stdout.write(
      `[doctor] an apiserver of its own, Outrigger's manifests, the queues and the forwarder ready in ${Date.now() - t0} ms\n`,
    );
  }, 60_000);

  afterAll(async () => {
    if (forwarder && forwarder.child.exitCode === null) {
      forwarder.child.kill('SIGKILL');
      await forwarder.exited;
    }
    await cluster?.stop();
  });

  test('a healthy cluster: every check ok, but the Deployment (the bed runs the forwarder as a process) and EKS (not EKS)', async () => {
    const { code, output, by } = await check();
    process.stdout.write(output);
    expect(code).toBe(0);
    expect(by('apiserver').status).toBe('ok');
    expect(by('crd storageversionmigrations.migration.k8s.io')).toMatchObject({ status: 'ok' });
    expect(by('rbac ClusterRoleBinding outrigger')).toMatchObject({ status: 'ok', message: 'binds Group outrigger:controllers' });
    expect(by('forwarder rbac').status).toBe('ok');
    expect(by('admission ValidatingAdmissionPolicy outrigger-serviceaccount-use')).toMatchObject({ status: 'ok' });
    expect(by('admission ValidatingAdmissionPolicyBinding outrigger-serviceaccount-use')).toMatchObject({ status: 'ok' });
    expect(by('forwarder lease')).toMatchObject({
      status: 'ok',
      message: expect.stringMatching(/^held by forwarder-0, renewed \d s ago$/),
    });
    expect(by('forwarder sending')).toMatchObject({ status: 'ok' });
    expect(by('forwarder deployment')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('a forwarder installed some other way'),
    });
    expect(by(`dead letters ${prefix}${CLUSTER}-history-dlq.fifo`)).toMatchObject({ status: 'ok', message: 'empty' });
    // No storage block: sampled, the safe default.
    expect(by('storage reporters')).toMatchObject({ status: 'ok', message: 'one endpoint, discovery sampled over 4 connections per poll' });
    expect(by('eks access entries')).toMatchObject({
      status: 'skipped',
      message: "not an EKS cluster: its configuration's access is kubeconfig",
    });
  });

  test('a stale CRD (another installer replaced it without status.progress): the finding, and its fix mends it', async () => {
    const file = join(projectRoot, 'cluster', 'crds', 'storageversionmigrations.yaml');
    type Crd = KubeObject & {
      spec: { versions: Array<{ schema: { openAPIV3Schema: { properties: { status: { properties: Record<string, unknown> } } } } }> };
    };
    const crd = load(await readFile(file, 'utf8')) as Crd;
    delete crd.spec.versions[0]!.schema.openAPIV3Schema.properties.status.properties.progress;
    await applyManifests(admin, JSON.stringify(crd));
    const broken = await check();
    const finding = broken.by('crd storageversionmigrations.migration.k8s.io');
    expect(broken.code).toBe(1);
    expect(finding).toMatchObject({
      status: 'fail',
      message:
        'not current: differs from cluster/crds/storageversionmigrations.yaml at spec.versions[v1alpha1].schema.openAPIV3Schema.properties.status.properties.progress: absent in the cluster',
      fix: `kubectl --kubeconfig ${cluster.kubeconfigs.admin} apply --server-side --force-conflicts -f cluster/crds/storageversionmigrations.yaml`,
    });
    // The CLI itself: --json, and exit code 1.
    const cli = await run(process.execPath, ['bin/outrigger.ts', 'doctor', '--json', ...args], { cwd: projectRoot }).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (err: { code: number; stdout: string }) => err,
    );
    expect(cli.code).toBe(1);
    expect((JSON.parse(cli.stdout) as Finding[]).find((f) => f.check === finding.check)).toEqual({ ...finding, cluster: CLUSTER });
    await runFix(finding.fix!);
    expect((await check()).by(finding.check).status).toBe('ok');
  }, 30_000);

  test("Outrigger's ClusterRoleBinding deleted: the finding, and its fix mends it", async () => {
    await admin.delete(gvr('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings'), { name: 'outrigger' });
    const broken = await check();
    expect(broken.code).toBe(1);
    const finding = broken.by('rbac ClusterRoleBinding outrigger');
    expect(finding).toMatchObject({
      status: 'fail',
      message: 'absent (cluster/rbac.yaml)',
      fix: `kubectl --kubeconfig ${cluster.kubeconfigs.admin} apply --server-side -f cluster/rbac.yaml`,
    });
    await runFix(finding.fix!);
    expect((await check()).by(finding.check)).toMatchObject({ status: 'ok' });
  }, 30_000);

  test('a dead letter: the queue named, with the commands to read it and move it back', async () => {
    const url = `${args[args.indexOf('--queue-url-prefix') + 1]}${CLUSTER}-history-dlq.fifo`;
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: '{}', MessageGroupId: 'g', MessageDeduplicationId: 'd' }));
    try {
      const broken = await check();
      expect(broken.code).toBe(1);
      const finding = broken.by(`dead letters ${prefix}${CLUSTER}-history-dlq.fifo`);
      expect(finding.status).toBe('fail');
      expect(finding.message).toMatch(/^holds 1 message\(s\)/);
      // ElasticMQ's ARNs are of its own region, and the commands name its endpoint as the doctor was given it.
      const aws = `aws sqs --region elasticmq --endpoint-url ${testbed().sqsEndpoint}`;
      const arn = (name: string) => `arn:aws:sqs:elasticmq:000000000000:${prefix}${CLUSTER}-${name}.fifo`;
      expect(finding.fix).toBe(
        `${aws} receive-message --queue-url ${url} --message-attribute-names All --max-number-of-messages 10 && ` +
          `${aws} start-message-move-task --source-arn ${arn('history-dlq')} --destination-arn ${arn('history')}`,
      );
    } finally {
      await sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
    }
  });

  test('the forwarder gone: its Lease stale, then absent, each with the command that looks into it', async () => {
    forwarder!.child.kill('SIGKILL');
    await forwarder!.exited;
    const leases = Resources.leases;
    const tenMinutesAgo = new Date(Date.now() - 600_000).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
    await admin.patch(
      leases,
      { name: 'outrigger-forwarder-leader', namespace: FORWARDER_NAMESPACE },
      { spec: { renewTime: tenMinutesAgo } },
      'merge',
    );
    const stale = await check();
    expect(stale.code).toBe(1);
    const k = `kubectl --kubeconfig ${cluster.kubeconfigs.admin} -n ${FORWARDER_NAMESPACE}`;
    expect(stale.by('forwarder lease')).toEqual({
      check: 'forwarder lease',
      cluster: CLUSTER,
      status: 'fail',
      message: expect.stringMatching(
        /^Lease outrigger-system\/outrigger-forwarder-leader last renewed 60\d s ago by forwarder-0 \(over 120 s: no leader sends\)$/,
      ),
      fix: `${k} logs deployment/outrigger-forwarder; ${k} rollout restart deployment/outrigger-forwarder`,
    });
    expect(stale.by('forwarder deployment')).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('the forwarder is not installed'),
    });
    await admin.delete(leases, { name: 'outrigger-forwarder-leader', namespace: FORWARDER_NAMESPACE });
    const absent = await check();
    expect(absent.by('forwarder lease')).toMatchObject({
      status: 'fail',
      message: 'no Lease outrigger-system/outrigger-forwarder-leader: no forwarder has ever led here',
      fix: expect.stringMatching(
        /^npm run forwarder-overlay -- --cluster bed --clusters \S+ --outputs cdk-outputs\.json && kubectl --kubeconfig \S+ apply -k deploy\/forwarder\/overlays\/bed$/,
      ),
    });
  });
});
