// The forwarder against the real apiserver and a real SQS-compatible server (ElasticMQ), acting as the
// `outrigger` identity: envelopes, groups and dedup ids; a kill -9 and restart mid-stream loses no change
// (deletions included, through the checkpoint); a burst of 10,000 changes is delivered with a bounded buffer.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import pLimit from 'p-limit';
import { Forwarder, SqsEnvelopeSink } from '../../forwarder/forwarder.ts';
import { metricsText } from '../../forwarder/metrics.ts';
import { projectRoot } from '../../local/paths.ts';
import { parseEnvelope, type Envelope } from '../../shared/envelope/index.ts';
import { forwarderKey, verifyEnvelope } from '../../shared/envelope/signature.ts';
import { connect, gvr, Resources, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { forwarderKubeconfig } from '../testbed/forwarder.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testbed, testQueue } from '../testbed/index.ts';

const revision = (namespace: string, name: string, owner?: string): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'ControllerRevision',
  metadata: {
    name,
    namespace,
    // An owned one carries Outrigger's kind label: without it, it is another controller's history, and every
    // file's StatefulSet policy on the shared bed would report ForeignHistory while it exists.
    ...(owner
      ? {
          labels: { 'outrigger.dev/parent-kind': 'statefulset.apps' },
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: owner, controller: true }],
        }
      : {}),
  },
  data: {},
  revision: 1,
});

/** Receives (and deletes) whatever the queue has, until `done` holds or the time runs out. */
async function drain(
  sqs: SQSClient,
  url: string,
  into: Array<{ envelope: Envelope; group: string; dedup: string }>,
  done: () => boolean,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`queue not drained in time (${into.length} messages received)`);
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['MessageGroupId', 'MessageDeduplicationId'],
      }),
    );
    const messages = out.Messages ?? [];
    for (const m of messages)
      into.push({
        envelope: parseEnvelope(m.Body ?? ''),
        group: m.Attributes?.MessageGroupId ?? '',
        dedup: m.Attributes?.MessageDeduplicationId ?? '',
      });
    if (messages.length)
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
  }
}

/** A client acting as the forwarder's ServiceAccount, with the RBAC of its kustomize base (deploy/forwarder/base). */
async function forwarderIdentity(): Promise<KubeClient> {
  return connect({ kind: 'kubeconfig', path: await forwarderKubeconfig() });
}

describe('the forwarder', () => {
  test("runs under its own manifest's RBAC (read-only): it watches what the router needs and may not write", async () => {
    const kube = await forwarderIdentity();
    const ns = await createNamespace('fwd-rbac');
    const { sqs, url } = await testQueue('fwd-rbac');
    const fwd = new Forwarder({
      cluster: 'it',
      kube,
      sink: new SqsEnvelopeSink(sqs, url),
      namespace: ns,
      resources: async () => [Resources.controllerRevisions, Resources.pods],
    });
    await fwd.start();
    try {
      await outriggerClient().create(Resources.controllerRevisions, revision(ns, 'seen'));
      const got: Array<{ envelope: Envelope; group: string; dedup: string }> = [];
      await drain(sqs, url, got, () => got.some((g) => g.envelope.data.object.metadata.name === 'seen'));
      expect(fwd.healthy()).toBe(true);
      await expect(kube.create(Resources.controllerRevisions, revision(ns, 'forbidden'))).rejects.toMatchObject({ kind: 'Forbidden' });
    } finally {
      await fwd.stop();
    }
  });

  test("the forwarder signature boundary: with its cluster's key every envelope it sends verifies for that cluster alone; without, none is signed", async () => {
    const ns = await createNamespace('fwd-sign');
    const key = forwarderKey('forwarder test secret', 'it');
    for (const withKey of [true, false]) {
      const { sqs, url } = await testQueue(`fwd-sign-${withKey}`);
      const fwd = new Forwarder({
        cluster: 'it',
        kube: outriggerClient(),
        sink: new SqsEnvelopeSink(sqs, url),
        namespace: ns,
        resources: async () => [Resources.controllerRevisions],
        ...(withKey ? { key } : {}),
      });
      await fwd.start();
      try {
        const name = `signed-${withKey}`;
        await outriggerClient().create(Resources.controllerRevisions, revision(ns, name));
        const got: Array<{ envelope: Envelope; group: string; dedup: string }> = [];
        await drain(sqs, url, got, () => got.some((g) => g.envelope.data.object.metadata.name === name));
        for (const { envelope } of got) {
          expect(verifyEnvelope([key], 'it', envelope)).toBe(withKey);
          expect(verifyEnvelope([forwarderKey('forwarder test secret', 'other')], 'other', { ...envelope, cluster: 'other' })).toBe(false);
          if (!withKey) expect(envelope.outriggersignature).toBeUndefined();
        }
      } finally {
        await fwd.stop();
      }
    }
  });

  test('sends each change as a valid envelope, grouped by owning controller, deduplicated by uid, version and type', async () => {
    const ns = await createNamespace('fwd');
    const { sqs, url } = await testQueue('fwd');
    const fwd = new Forwarder({
      cluster: 'it',
      kube: outriggerClient(),
      sink: new SqsEnvelopeSink(sqs, url),
      namespace: ns,
      resources: async () => [Resources.controllerRevisions],
    });
    await fwd.start();
    // start() begins the watches; a change made before the first list that is gone by then (the deletion below)
    // is rightly never sent, so the changes wait for it.
    await fwd.synced();
    try {
      const kube = outriggerClient();
      const owned = await kube.create(Resources.controllerRevisions, revision(ns, 'owned', '00000000-0000-0000-0000-0000000000aa'));
      const loose = await kube.create(Resources.controllerRevisions, revision(ns, 'loose'));
      await kube.patch(Resources.controllerRevisions, { name: 'loose', namespace: ns }, { metadata: { labels: { a: 'b' } } }, 'merge');
      await kube.delete(Resources.controllerRevisions, { name: 'owned', namespace: ns });
      const got: Array<{ envelope: Envelope; group: string; dedup: string }> = [];
      await drain(sqs, url, got, () => got.length >= 4, 30_000);
      expect(got.map((g) => `${g.envelope.type.split('.').pop()}:${g.envelope.data.object.metadata.name}`)).toEqual(
        expect.arrayContaining(['added:owned', 'added:loose', 'modified:loose', 'deleted:owned']),
      );
      expect(got.find((g) => g.envelope.data.object.metadata.name === 'owned')!.group).toBe('it/00000000-0000-0000-0000-0000000000aa');
      expect(got.find((g) => g.envelope.data.object.metadata.name === 'loose')!.group).toBe(`it/${loose.metadata.uid}`);
      expect(got.find((g) => g.envelope.type.endsWith('modified'))!.envelope.data.oldObject?.metadata.name).toBe('loose');
      expect(new Set(got.map((g) => g.dedup)).size).toBe(got.length);
      expect(owned.metadata.uid).toBeTruthy();
      expect(fwd.healthy()).toBe(true);
      expect(metricsText(fwd.stats)).toMatch(/outrigger_forwarder_sent_total 4\n/);
    } finally {
      await fwd.stop();
    }
  });

  test('an object Kubernetes allows but the envelope does not (an RBAC name with a space) is dead-lettered with its reason, and the watch goes on; a name with a colon is sent', async () => {
    const ns = await createNamespace('fwd');
    const { sqs, url } = await testQueue('fwd');
    const dead = await testQueue('fwd-dead');
    const roles = gvr('rbac.authorization.k8s.io', 'v1', 'roles');
    const fwd = new Forwarder({
      cluster: 'it',
      kube: adminClient(),
      sink: new SqsEnvelopeSink(sqs, url, dead.url),
      namespace: ns,
      resources: async () => [roles],
    });
    await fwd.start();
    try {
      const role = (name: string) => ({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name, namespace: ns },
        rules: [],
      });
      await adminClient().create(roles, role('system:odd name'));
      await adminClient().create(roles, role('system:plain'));
      await adminClient().create(roles, role('plain'));
      const got: Array<{ envelope: Envelope; group: string; dedup: string }> = [];
      await drain(sqs, url, got, () => got.some((g) => g.envelope.data.object.metadata.name === 'plain'));
      expect(got.map((g) => g.envelope.data.object.metadata.name).sort()).toEqual(['plain', 'system:plain']);
      const letters = await dead.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: dead.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 2, MessageAttributeNames: ['All'] }),
      );
      const letter = letters.Messages?.find((m) => m.Body?.includes('system:odd name'));
      expect(letter?.MessageAttributes?.reason?.StringValue).toMatch(/^cannot be sent as an event: .*metadata\.name/);
      expect(fwd.healthy()).toBe(true);
    } finally {
      await fwd.stop();
    }
  });

  test('a dead letter that cannot be written (its queue unreachable) is tried again after the relist: the event is not dropped', async () => {
    const ns = await createNamespace('fwd');
    const roles = gvr('rbac.authorization.k8s.io', 'v1', 'roles');
    const letters: string[] = [];
    let refusals = 1;
    const fwd = new Forwarder({
      cluster: 'it',
      kube: adminClient(),
      sink: {
        sendBatch: async () => [],
        deadLetter: async (body) => {
          if (refusals-- > 0) throw new Error('the dead-letter queue is unreachable');
          letters.push(body);
        },
      },
      namespace: ns,
      resources: async () => [roles],
    });
    await fwd.start();
    try {
      await fwd.synced();
      await adminClient().create(roles, {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name: 'system:odd name', namespace: ns },
        rules: [],
      });
      // The watch breaks on the failure and relists (backoff 250 ms); the object is not taken as sent.
      await eventually(() => letters.some((l) => l.includes('system:odd name')), 15_000);
      expect(refusals).toBe(-1);
    } finally {
      await fwd.stop();
    }
  });

  test('killed (SIGKILL) and restarted mid-stream, it loses no change: creations, updates and deletions made while it was down arrive', async () => {
    const ns = await createNamespace('fwd-kill');
    const { sqs, url } = await testQueue('fwd-kill');
    const state = join(await mkdtemp(join(tmpdir(), 'outrigger-fwd-')), 'checkpoint.json');
    const start = (): ChildProcess => {
      const child = spawn(process.execPath, ['forwarder/main.ts'], {
        cwd: projectRoot,
        env: {
          ...process.env,
          KUBECONFIG: testbed().kubeconfigs.outrigger,
          OUTRIGGER_CLUSTER_ID: 'it',
          OUTRIGGER_EVENT_QUEUE_URL: url,
          OUTRIGGER_SQS_ENDPOINT: testbed().sqsEndpoint,
          OUTRIGGER_NAMESPACE: ns,
          OUTRIGGER_FORWARDER_STATE: state,
          PORT: '0',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr?.on('data', (b: Buffer) => (childLog = (childLog + b.toString()).slice(-20_000)));
      return child;
    };
    const kube = outriggerClient();
    const got: Array<{ envelope: Envelope; group: string; dedup: string }> = [];
    let childLog = '';
    let child = start();
    try {
      for (let i = 0; i < 60; i += 1) await kube.create(Resources.controllerRevisions, revision(ns, `r${i}`));
      // Sent and checkpointed (every second) — at least the objects changed or deleted below — then more,
      // perhaps only buffered: kill -9.
      const checkpointed = async () => {
        const text = await readFile(state, 'utf8').catch(() => '{}');
        const names = new Set(
          Object.values((JSON.parse(text) as { resources?: Record<string, KubeObject[]> }).resources ?? {})
            .flat()
            .map((o) => o.metadata.name),
        );
        return Array.from({ length: 20 }, (_, i) => `r${i}`).every((n) => names.has(n));
      };
      for (const deadline = Date.now() + 60_000; !(await checkpointed());) {
        if (Date.now() > deadline) throw new Error(`the first forwarder did not checkpoint r0..r19 within 60 s:\n${childLog}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      for (let i = 60; i < 65; i += 1) await kube.create(Resources.controllerRevisions, revision(ns, `r${i}`));
      if (child.exitCode !== null) throw new Error(`the forwarder exited by itself (${child.exitCode}):\n${childLog}`);
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      // While it is down: more objects, changes to earlier ones, and deletions.
      for (let i = 65; i < 90; i += 1) await kube.create(Resources.controllerRevisions, revision(ns, `r${i}`));
      for (let i = 0; i < 10; i += 1)
        await kube.patch(
          Resources.controllerRevisions,
          { name: `r${i}`, namespace: ns },
          { metadata: { labels: { changed: 'yes' } } },
          'merge',
        );
      for (let i = 10; i < 20; i += 1) await kube.delete(Resources.controllerRevisions, { name: `r${i}`, namespace: ns });
      child = start();
      for (let i = 90; i < 100; i += 1) await kube.create(Resources.controllerRevisions, revision(ns, `r${i}`));

      const final = new Map(
        (await kube.listAll(Resources.controllerRevisions, { namespace: ns })).map((o) => [o.metadata.uid!, o.metadata.resourceVersion!]),
      );
      const latest = new Map<string, { rv: bigint; type: string }>();
      const deletedNames = () =>
        new Set(got.filter((g) => g.envelope.type.endsWith('deleted')).map((g) => g.envelope.data.object.metadata.name));
      await drain(
        sqs,
        url,
        got,
        () => {
          for (const g of got) {
            const uid = g.envelope.data.object.metadata.uid ?? '';
            const rv = BigInt(g.envelope.data.object.metadata.resourceVersion ?? '0');
            const seen = latest.get(uid);
            if (!seen || seen.rv <= rv) latest.set(uid, { rv, type: g.envelope.type });
          }
          const current = [...final].every(([uid, rv]) => latest.get(uid)?.rv === BigInt(rv));
          const gone = Array.from({ length: 10 }, (_, i) => `r${i + 10}`).every((n) => deletedNames().has(n));
          return current && gone;
        },
        60_000,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}; forwarder log:\n${childLog}`);
      });
      expect(final.size).toBe(90);
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);

  test('a burst of 10,000 changes is delivered, every one, while the buffer never holds more than its bound', async () => {
    const ns = await createNamespace('fwd-burst');
    const { sqs, url } = await testQueue('fwd-burst');
    const fwd = new Forwarder({
      cluster: 'it',
      kube: outriggerClient(),
      sink: new SqsEnvelopeSink(sqs, url),
      namespace: ns,
      resources: async () => [Resources.controllerRevisions],
      maxBuffered: 200,
    });
    await fwd.start();
    const got: Array<{ envelope: Envelope; group: string; dedup: string }> = [];
    const uids = new Set<string>();
    try {
      const admin = adminClient();
      const limit = pLimit(32);
      const receiving = Promise.all(
        Array.from({ length: 4 }, () =>
          drain(
            sqs,
            url,
            got,
            () => {
              for (const g of got.splice(0)) uids.add(g.envelope.data.object.metadata.uid ?? '');
              return uids.size >= 10_000;
            },
            240_000,
          ),
        ),
      );
      await Promise.all(
        Array.from({ length: 10_000 }, (_, i) => limit(() => admin.create(Resources.controllerRevisions, revision(ns, `b${i}`)))),
      );
      await receiving;
      expect(uids.size).toBe(10_000);
      expect(fwd.stats.maxBuffered).toBeLessThanOrEqual(200);
      expect(fwd.stats.sent).toBeGreaterThanOrEqual(10_000);
    } finally {
      await fwd.stop();
    }
  }, 300_000);
});
