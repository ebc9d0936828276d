// The forwarder installed as an add-on (docs/operations/forwarder.md#the-overlay): the overlay `npm run forwarder-overlay`
// generates renders with the project's kubectl and applies with server-side dry-run; the forwarder started
// with its environment (as a process, under the ServiceAccount's RBAC) forwards an event and watches the
// migrations its cluster's storage settings name. A new forwarder process with nothing on disk forwards a
// deletion made while none ran (the checkpoint lives in a ConfigMap); of two forwarders only the Lease's holder
// sends, and the standby takes over when the leader is killed or stops (a deletion made during the handover is sent).
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { dump } from 'js-yaml';
import { ConfigMapCheckpoint } from '../../forwarder/checkpoint.ts';
import type { Lease } from '../../forwarder/leader.ts';
import { kubectlBinary } from '../../local/apiserver.ts';
import { projectRoot } from '../../local/paths.ts';
import { pascal } from '../../scripts/forwarder-overlay.ts';
import { parseEnvelope, type Envelope } from '../../shared/envelope/index.ts';
import { connect, gvr, Resources, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import {
  FORWARDER_NAMESPACE,
  deploymentEnv,
  forwarderKubeconfig,
  renderKustomize,
  startForwarder,
  type ForwarderProcess,
} from '../testbed/forwarder.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testbed, testQueue, uniqueName } from '../testbed/index.ts';

const run = promisify(execFile);

const revision = (namespace: string, name: string): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'ControllerRevision',
  metadata: { name, namespace },
  data: {},
  revision: 1,
});

/** Envelopes received from the queue (and deleted from it) until `done` holds (60 s at most). */
async function receive(sqs: SQSClient, url: string, into: Envelope[], done: () => boolean, log?: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!done()) {
    if (Date.now() > deadline)
      throw new Error(
        `not received in time (${into.length} envelopes: ${into.map(label).join(', ')})${log ? `\nforwarder log:\n${log()}` : ''}`,
      );
    const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    const messages = out.Messages ?? [];
    for (const m of messages) into.push(parseEnvelope(m.Body ?? ''));
    if (messages.length)
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
  }
}
const label = (e: Envelope) => `${e.type.split('.').pop()}:${e.data.object.metadata.name}`;
const has = (got: Envelope[], what: string) => got.some((e) => label(e) === what);

async function get(port: number, path: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, text: await res.text() };
}

async function stop(p: ForwarderProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill(signal);
  return p.exited;
}

describe('the forwarder installed from its kustomize base and generated overlay', () => {
  const running: ForwarderProcess[] = [];
  afterAll(async () => {
    await Promise.all(running.map((p) => stop(p, 'SIGKILL')));
  });
  const started = (p: ForwarderProcess) => (running.push(p), p);

  test('the overlay renders with kubectl kustomize, applies with server-side dry-run, and the forwarder started from it forwards an event, watching in-tree migrations', async () => {
    const ns = await createNamespace('fwd-install');
    const cluster = uniqueName('fwd-install');
    const events = await testQueue('fwd-install');
    const dead = await testQueue('fwd-install-dlq');
    const dir = await mkdtemp(join(tmpdir(), 'outrigger-overlay-'));
    // The stack's configuration and outputs, as an operator has them after `cdk deploy --outputs-file`.
    const clusters = [
      {
        id: cluster,
        access: {
          kind: 'eks',
          server: 'https://EXAMPLE.gr7.eu-west-1.eks.amazonaws.com',
          caData: 'Q0E=',
          clusterName: 'prod',
          region: 'eu-west-1',
        },
        storage: { migrations: 'in-tree' },
      },
    ];
    const outputs = {
      Outrigger: {
        [`${pascal(cluster)}EventsQueueUrl`]: events.url,
        [`${pascal(cluster)}EventsDeadLetterQueueUrl`]: dead.url,
        AlarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:alarms',
      },
    };
    await writeFile(join(dir, 'clusters.json'), JSON.stringify(clusters));
    await writeFile(join(dir, 'cdk-outputs.json'), JSON.stringify(outputs));
    const overlay = join(dir, 'overlay');
    await run(
      process.execPath,
      [
        'scripts/forwarder-overlay.ts',
        '--cluster',
        cluster,
        '--clusters',
        join(dir, 'clusters.json'),
        '--outputs',
        join(dir, 'cdk-outputs.json'),
        '--image',
        'registry.example/outrigger-forwarder:0.1.0',
        '--out',
        overlay,
      ],
      { cwd: projectRoot },
    );

    const objects = await renderKustomize(overlay);
    const byKind = (kind: string) => objects.filter((o) => o.kind === kind);
    expect(new Set(objects.map((o) => o.kind))).toEqual(
      new Set([
        'ClusterRole',
        'ClusterRoleBinding',
        'ConfigMap',
        'Deployment',
        'Namespace',
        'PodDisruptionBudget',
        'Role',
        'RoleBinding',
        'ServiceAccount',
      ]),
    );
    const deployment = byKind('Deployment')[0] as KubeObject & {
      spec: {
        replicas: number;
        template: { spec: { containers: Array<{ image: string; resources: unknown; livenessProbe: unknown; readinessProbe: unknown }> } };
      };
    };
    expect(deployment.spec.replicas).toBe(2);
    expect(deployment.spec.template.spec.containers[0]).toMatchObject({
      image: 'registry.example/outrigger-forwarder:0.1.0',
      resources: { requests: { cpu: expect.any(String), memory: expect.any(String) }, limits: { memory: expect.any(String) } },
    });
    const env = deploymentEnv(objects, { name: 'outrigger-forwarder-0', namespace: FORWARDER_NAMESPACE });
    expect(env).toMatchObject({
      OUTRIGGER_CLUSTER_ID: cluster,
      OUTRIGGER_EVENT_QUEUE_URL: events.url,
      OUTRIGGER_DEAD_LETTER_QUEUE_URL: dead.url,
      OUTRIGGER_POD_NAMESPACE: FORWARDER_NAMESPACE,
    });
    expect(JSON.parse(env.OUTRIGGER_CLUSTERS!)).toEqual([
      { id: cluster, access: { kind: 'kubeconfig' }, storage: expect.objectContaining({ migrations: 'in-tree' }) },
    ]);

    // Server-side dry-run of everything (its namespace exists first, as `kubectl apply -k` would have created
    // it in the same call); the namespace enforces the restricted Pod Security Standard, so a warning would
    // mean the pod template breaks it.
    await applyManifests(adminClient(), dump(byKind('Namespace')[0]));
    const rendered = join(dir, 'rendered.yaml');
    await writeFile(rendered, objects.map((o) => dump(o)).join('---\n'));
    const dry = await run(kubectlBinary, ['apply', '--server-side', '--dry-run=server', '-f', rendered], {
      env: { ...process.env, KUBECONFIG: testbed().kubeconfigs.admin },
    });
    expect(dry.stdout).toMatch(/deployment\.apps\/outrigger-forwarder serverside-applied \(server dry run\)/);
    expect(dry.stdout).toMatch(/poddisruptionbudget\.policy\/outrigger-forwarder serverside-applied \(server dry run\)/);
    expect(dry.stderr).not.toMatch(/[Ww]arning/);

    const kubeconfig = await forwarderKubeconfig(objects);
    const fwd = started(
      startForwarder({ ...env, KUBECONFIG: kubeconfig, OUTRIGGER_SQS_ENDPOINT: testbed().sqsEndpoint, OUTRIGGER_NAMESPACE: ns }),
    );
    await fwd.logged('forwarder started');
    await outriggerClient().create(Resources.controllerRevisions, revision(ns, 'installed'));
    const got: Envelope[] = [];
    await receive(events.sqs, events.url, got, () => has(got, 'added:installed'), fwd.log);
    expect(got.find((e) => e.data.object.metadata.name === 'installed')!.source).toBe(`outrigger://${cluster}/forwarder`);
    // The cluster's storage settings reached it: in-tree migrations are watched, Outrigger's own API is not.
    expect(fwd.log()).toMatch(/"message":"watching","resource":"storageversionmigrations\.[^"]+\.storagemigration\.k8s\.io"/);
    expect(fwd.log()).not.toMatch(/"resource":"storageversionmigrations\.[^"]+\.migration\.k8s\.io"/);
    expect(await stop(fwd)).toBe(0);
    // A clean stop hands the Lease back.
    const lease = await adminClient().get<Lease>(Resources.leases, {
      name: env.OUTRIGGER_LEADER_ELECTION_LEASE!,
      namespace: FORWARDER_NAMESPACE,
    });
    expect(lease.spec?.holderIdentity).toBe('');
  }, 120_000);

  /** Leader election's timing for the tests that wait for a Lease to run out or to change hands. */
  const SHORT_LEASE = {
    OUTRIGGER_LEASE_DURATION_SECONDS: '4',
    OUTRIGGER_RENEW_DEADLINE_SECONDS: '3',
    OUTRIGGER_RETRY_PERIOD_SECONDS: '0.5',
  };

  /** The base's environment with this test's cluster, queue, namespace and its own Lease and checkpoint. */
  async function baseEnv(ns: string, url: string, extra: Record<string, string> = {}): Promise<Record<string, string>> {
    const objects = await renderKustomize(join(projectRoot, 'deploy', 'forwarder', 'base'));
    const kubeconfig = await forwarderKubeconfig(objects);
    return {
      ...deploymentEnv(objects, { name: 'unused', namespace: FORWARDER_NAMESPACE }),
      KUBECONFIG: kubeconfig,
      OUTRIGGER_CLUSTER_ID: 'it',
      OUTRIGGER_EVENT_QUEUE_URL: url,
      OUTRIGGER_SQS_ENDPOINT: testbed().sqsEndpoint,
      OUTRIGGER_NAMESPACE: ns,
      OUTRIGGER_LEADER_ELECTION_LEASE: uniqueName('fwd-lease'),
      OUTRIGGER_CHECKPOINT_CONFIGMAP: uniqueName('fwd-checkpoint'),
      ...extra,
    };
  }

  test('a new forwarder process, with nothing on local disk, forwards a deletion made while no forwarder ran', async () => {
    const ns = await createNamespace('fwd-newpod');
    const { sqs, url } = await testQueue('fwd-newpod');
    // The killed pod's Lease runs out before the new one leads: 4 s here rather than the deployed 15 s, which
    // would only add waiting.
    const env = await baseEnv(ns, url, SHORT_LEASE);
    const kube = outriggerClient();
    const got: Envelope[] = [];
    const first = started(startForwarder({ ...env, OUTRIGGER_POD_NAME: 'pod-a' }));
    await first.logged('forwarder started');
    for (let i = 0; i < 5; i += 1) await kube.create(Resources.controllerRevisions, revision(ns, `d${i}`));
    await receive(sqs, url, got, () => [0, 1, 2, 3, 4].every((i) => has(got, `added:d${i}`)), first.log);
    // Checkpointed in its ConfigMap (every second), as read by anyone with the ServiceAccount's rights.
    const store = new ConfigMapCheckpoint({
      kube: connect({ kind: 'kubeconfig', path: env.KUBECONFIG }),
      namespace: FORWARDER_NAMESPACE,
      name: env.OUTRIGGER_CHECKPOINT_CONFIGMAP!,
    });
    await eventually(async () => {
      const text = (await store.load()) ?? '';
      return ['d0', 'd1', 'd2', 'd3', 'd4'].every((n) => text.includes(`"name":"${n}"`));
    });
    // The pod is lost (SIGKILL: no last checkpoint, no release), and the objects are deleted while none runs.
    await stop(first, 'SIGKILL');
    await kube.delete(Resources.controllerRevisions, { name: 'd0', namespace: ns });
    await kube.delete(Resources.controllerRevisions, { name: 'd1', namespace: ns });
    got.length = 0;
    const t0 = Date.now();
    const second = started(startForwarder({ ...env, OUTRIGGER_POD_NAME: 'pod-b' }));
    await receive(sqs, url, got, () => has(got, 'deleted:d0') && has(got, 'deleted:d1'), second.log);
    const resumedMs = Date.now() - t0;
    expect(second.log()).toMatch(/"message":"checkpoint loaded","from":"configmap outrigger-system\//);
    // The objects still there and unchanged are not sent again.
    expect(got.filter((e) => ['d2', 'd3', 'd4'].includes(e.data.object.metadata.name ?? ''))).toEqual([]);
    process.stdout.write(
      `[forwarder-install] a new forwarder (the last one SIGKILLed, its Lease expiring after 4 s) forwarded the deletions ${resumedMs} ms after it started\n`,
    );
    expect(await stop(second)).toBe(0);
  }, 120_000);

  test('of two forwarders only the leader sends; when it is killed the standby takes over, and a clean stop hands over at once', async () => {
    const ns = await createNamespace('fwd-leader');
    const { sqs, url } = await testQueue('fwd-leader');
    const env = await baseEnv(ns, url, SHORT_LEASE);
    const kube = outriggerClient();
    const got: Envelope[] = [];
    const a = started(startForwarder({ ...env, OUTRIGGER_POD_NAME: 'pod-a' }));
    await a.logged('forwarder started');
    const b = started(startForwarder({ ...env, OUTRIGGER_POD_NAME: 'pod-b' }));
    await b.logged('leader election: standing by');
    const [portA, portB] = [await a.port(), await b.port()];
    // The standby is ready (a rollout waits for that before stopping the leader), and names the leader.
    await eventually(async () => {
      const ready = await get(portB, '/readyz');
      return ready.status === 200 && ready.text === 'standby; leader: pod-a\n';
    });

    await kube.create(Resources.controllerRevisions, revision(ns, 'l0'));
    await receive(sqs, url, got, () => has(got, 'added:l0'), a.log);
    expect((await get(portA, '/metrics')).text).toMatch(/outrigger_forwarder_sent_total [1-9]/);
    expect((await get(portB, '/metrics')).text).toMatch(/outrigger_forwarder_sent_total 0\n/);
    expect(b.log()).not.toMatch(/"message":"forwarder started"/);

    // The leader is lost: the standby waits out the lease (4 s here; 15 s by default), then leads and sends.
    const killed = Date.now();
    await stop(a, 'SIGKILL');
    await kube.create(Resources.controllerRevisions, revision(ns, 'l1'));
    await b.logged('leader election: leading', 30_000);
    const failoverMs = Date.now() - killed;
    await receive(sqs, url, got, () => has(got, 'added:l1'), b.log);
    const firstEventMs = Date.now() - killed;
    // Not before the lease ran out: 4 s after the last renewal the standby saw (the leader renews every 0.5 s,
    // each renewal a read and a write, slower on a busy machine, so the last one may be a second or more old).
    expect(failoverMs).toBeGreaterThanOrEqual(1_500);

    // A rollout: a new standby, then the leader stops cleanly and hands the Lease over within a retry period.
    const c = started(startForwarder({ ...env, OUTRIGGER_POD_NAME: 'pod-c' }));
    await c.logged('leader election: standing by');
    const stopped = Date.now();
    expect(await stop(b)).toBe(0);
    const releasedMs = Date.now() - stopped;
    // It handed the Lease back (no holder) before it exited, unless the standby took it already.
    const released = await adminClient().get<Lease>(Resources.leases, {
      name: env.OUTRIGGER_LEADER_ELECTION_LEASE!,
      namespace: FORWARDER_NAMESPACE,
    });
    expect(['', 'pod-c']).toContain(released.spec?.holderIdentity);
    // Deleted during the handover: the new leader sends it, from its watch or from the checkpoint the old one
    // wrote before it let go.
    await kube.delete(Resources.controllerRevisions, { name: 'l1', namespace: ns });
    await c.logged('leader election: leading', 30_000);
    const handoverMs = Date.now() - stopped;
    await kube.create(Resources.controllerRevisions, revision(ns, 'l2'));
    await receive(sqs, url, got, () => has(got, 'added:l2') && has(got, 'deleted:l1'), c.log);
    // From the Lease b handed back, not by waiting out b's (which would count a transition, and name b as the
    // holder it took over from); how long the handover takes is bench/'s to measure, not a test's.
    expect(c.log()).toMatch(/"message":"leader election: acquired","lease":"[^"]+"[,}]/);
    expect(c.log()).not.toMatch(/"message":"leader election: acquired"[^\n]*"previous"/);
    const lease = await adminClient().get<Lease>(Resources.leases, {
      name: env.OUTRIGGER_LEADER_ELECTION_LEASE!,
      namespace: FORWARDER_NAMESPACE,
    });
    expect(lease.spec).toMatchObject({ holderIdentity: 'pod-c', leaseTransitions: 1 });
    process.stdout.write(
      `[forwarder-install] failover after SIGKILL (4 s lease): leading after ${failoverMs} ms, first event after ${firstEventMs} ms; clean handover: leader stopped in ${releasedMs} ms, standby leading ${handoverMs} ms after SIGTERM\n`,
    );
    expect(await stop(c)).toBe(0);
  }, 120_000);

  test("a checkpoint too large for one ConfigMap is kept in parts, a later small one leaves no part behind, and another writer's write is overwritten", async () => {
    const kubeconfig = await forwarderKubeconfig();
    const kube = connect({ kind: 'kubeconfig', path: kubeconfig });
    const name = uniqueName('fwd-parts');
    const store = new ConfigMapCheckpoint({ kube, namespace: FORWARDER_NAMESPACE, name, maxPartBytes: 64 * 1024 });
    // Random bytes in base64 compress to about three quarters: some 150 KB of gzip, three parts.
    const big = JSON.stringify({ cluster: 'it', noise: (await import('node:crypto')).randomBytes(150_000).toString('base64') });
    await store.save(big);
    const parts = () =>
      adminClient().list(gvr('', 'v1', 'configmaps'), {
        namespace: FORWARDER_NAMESPACE,
        labelSelector: `outrigger.dev/checkpoint-of=${name}`,
      });
    expect((await parts()).items.length).toBe(3);
    // A new process reads it back whole.
    expect(await new ConfigMapCheckpoint({ kube, namespace: FORWARDER_NAMESPACE, name }).load()).toBe(big);
    await store.save(big.slice(0, 100));
    expect(await new ConfigMapCheckpoint({ kube, namespace: FORWARDER_NAMESPACE, name }).load()).toBe(big.slice(0, 100));
    expect((await parts()).items).toEqual([]);
    // Another writer in between (a previous leader's last write): the conditional write conflicts, and this
    // writer, the leader, writes again over it.
    const other = new ConfigMapCheckpoint({ kube, namespace: FORWARDER_NAMESPACE, name });
    await other.load();
    await other.save('{"cluster":"it","from":"other"}');
    await store.save('{"cluster":"it","from":"leader"}');
    expect(await new ConfigMapCheckpoint({ kube, namespace: FORWARDER_NAMESPACE, name }).load()).toBe('{"cluster":"it","from":"leader"}');
  });
});
