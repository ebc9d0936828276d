// The local runtime end to end: its run command (docs/getting-started/local.md) on its own, and the event path (watch, envelope,
// queue, the same Lambda handler shape) against the test bed's real apiserver.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../../local/paths.ts';
import { startRuntime, type Runtime, type RuntimeFunction } from '../../runtime/local.ts';
import type { Envelope } from '../../shared/envelope/index.ts';
import { Resources, type KubeObject } from '../../shared/kube/index.ts';
import { envelopeBatchHandler } from '../../shared/lambda/batch.ts';
import { environment } from '../../shared/lambda/environment.ts';
import { createNamespace, eventually, outriggerClient, testbed } from '../testbed/index.ts';
import { loadHandler } from '../../runtime/load-handler.ts';

const run = promisify(execFile);

function revision(namespace: string, name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'apps/v1', kind: 'ControllerRevision', metadata: { name, namespace, labels }, data: {}, revision: 1 };
}

describe('npm start (no KUBECONFIG)', () => {
  test('reaches ready, serves kubectl with the printed kubeconfig, and stops cleanly on SIGINT', async () => {
    const stateDir = await mkdtemp(join(tmpdir(), 'outrigger-run-'));
    const env = { ...process.env };
    delete env.KUBECONFIG;
    const child = spawn(process.execPath, ['bin/outrigger.ts', 'run', '--state-dir', stateDir], {
      cwd: projectRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const ready = await eventually(() => {
        const line = stdout.split('\n').find((l) => l.includes('"ready":true'));
        return line ? (JSON.parse(line) as { kubeconfig: string; kubectl: string }) : undefined;
      }, 120_000);
      const { stdout: ns } = await run(ready.kubectl, ['--kubeconfig', ready.kubeconfig, 'get', 'ns', '-o', 'name']);
      expect(ns.split('\n')).toEqual(expect.arrayContaining(['namespace/default', 'namespace/kube-system']));
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    expect(stderr).toContain('SIGINT: stopping');
  }, 180_000);
});

describe('the local runtime event path', () => {
  let runtime: Runtime;
  const received: Envelope[] = [];
  let failUntil = new Map<string, number>();
  let stateDir: string;

  const recorder: RuntimeFunction = {
    name: 'recorder',
    description: 'test function: records envelopes; fails on demand',
    entry: 'test/integration/runtime.test.ts',
    timeoutSeconds: 10,
    events: { resources: async () => [Resources.controllerRevisions] },
    clusterAccess: 'controllers',
    handler: envelopeBatchHandler({
      source: 'recorder',
      deadLetter: () => environment().deadLetter,
      process: async (envelope) => {
        const name = envelope.data.object.metadata.name ?? '';
        const failures = failUntil.get(name) ?? 0;
        if (failures > 0) {
          failUntil.set(name, failures - 1);
          throw new Error(`asked to fail ${name}`);
        }
        received.push(envelope);
      },
    }),
  };

  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'outrigger-runtime-'));
    runtime = await startRuntime({ kubeconfig: testbed().kubeconfigs.outrigger, clusterId: 'it', stateDir, functions: [recorder] });
  }, 120_000);
  afterAll(async () => {
    await runtime?.stop();
  });
  beforeEach(() => {
    failUntil = new Map();
  });

  test('a change in the cluster reaches the handler as a valid envelope, with the old object on modification', async () => {
    const ns = await createNamespace('rt');
    const kube = outriggerClient();
    await kube.create(Resources.controllerRevisions, revision(ns, 'r1'));
    await kube.patch(Resources.controllerRevisions, { name: 'r1', namespace: ns }, { metadata: { labels: { step: 'two' } } }, 'merge');
    await kube.delete(Resources.controllerRevisions, { name: 'r1', namespace: ns });
    const mine = () => received.filter((e) => e.data.object.metadata.namespace === ns);
    await eventually(() => mine().length >= 3);
    expect(mine().map((e) => e.type)).toEqual(['dev.outrigger.watch.added', 'dev.outrigger.watch.modified', 'dev.outrigger.watch.deleted']);
    expect(mine()[0]).toMatchObject({ cluster: 'it', data: { object: { apiVersion: 'apps/v1', kind: 'ControllerRevision' } } });
    // The apiserver drops an empty label map, so the old object has none.
    expect(mine()[1]!.data.oldObject?.metadata.labels).toBeUndefined();
    expect(mine()[1]!.data.object.metadata.labels).toEqual({ step: 'two' });
  });

  test('a failing event is retried; one that keeps failing lands in the dead-letter file with a reason', async () => {
    const ns = await createNamespace('rt');
    const kube = outriggerClient();
    failUntil.set('flaky', 2);
    failUntil.set('broken', 1000);
    await kube.create(Resources.controllerRevisions, revision(ns, 'flaky'));
    await kube.create(Resources.controllerRevisions, revision(ns, 'broken'));
    await eventually(() => received.some((e) => e.data.object.metadata.name === 'flaky' && e.data.object.metadata.namespace === ns));
    const letter = await eventually(async () => {
      const text = await readFile(runtime.deadLetterFile, 'utf8').catch(() => '');
      return text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { body: string; reason: string })
        .find((l) => l.body.includes(`"namespace":"${ns}"`) && l.body.includes('"name":"broken"'));
    }, 30_000);
    expect(letter.reason).toMatch(/received 5 times without success/);
  }, 40_000);

  test('a malformed message goes to the dead-letter file naming the bad field, and its batch-mates are processed', async () => {
    const queue = runtime.queues.get('recorder')!;
    const good = JSON.stringify({
      specversion: '1.0',
      id: 'good-1',
      source: 'test',
      type: 'dev.outrigger.watch.added',
      cluster: 'it',
      data: {
        object: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'good', namespace: 'x', uid: '6c3a4f0e-2b1d-4e8a-9f7c-0d5e1a2b3c4d', resourceVersion: '1' },
        },
      },
    });
    // Envelopes carry uids as the apiserver assigns them (RFC 4122); this one has none.
    const bad = good.replace('"uid":"6c3a4f0e-2b1d-4e8a-9f7c-0d5e1a2b3c4d",', '').replace('good-1', 'bad-1');
    await queue.enqueue(bad, 'g-bad', 'bad-1');
    await queue.enqueue(good, 'g-good', 'good-1');
    await eventually(() => received.some((e) => e.id === 'good-1'));
    const text = await eventually(async () => {
      const t = await readFile(runtime.deadLetterFile, 'utf8').catch(() => '');
      return t.includes('bad-1') ? t : undefined;
    });
    const letter = text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { body: string; reason: string })
      .find((l) => l.body.includes('bad-1'))!;
    expect(letter.reason).toBe('invalid event envelope: data.object.metadata.uid: Invalid input: expected string, received undefined');
  });

  test('a duplicated delivery is deduplicated by the queue', async () => {
    const queue = runtime.queues.get('recorder')!;
    const before = queue.stats.deduplicated;
    const body = JSON.stringify({
      specversion: '1.0',
      id: 'dup-1',
      source: 't',
      type: 'dev.outrigger.watch.added',
      cluster: 'it',
      data: {
        object: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'd', uid: '0b8e7d6c-5a4f-4e3d-8c2b-1a0f9e8d7c6b', resourceVersion: '1' },
        },
      },
    });
    await queue.enqueue(body, 'g', 'dup-1');
    await queue.enqueue(body, 'g', 'dup-1');
    await queue.idle();
    expect(queue.stats.deduplicated - before).toBe(1);
    expect(received.filter((e) => e.id === 'dup-1')).toHaveLength(1);
  });

  test('the scheduled heartbeat function records that the cluster answered', async () => {
    const { functions } = await import('../../functions/index.ts');
    const spec = functions.find((f) => f.name === 'heartbeat')!;
    const handler = await loadHandler(spec);
    const result = await handler({}, { functionName: 'heartbeat', awsRequestId: 'test', getRemainingTimeInMillis: () => 10_000 } as never);
    expect(result).toEqual({ clusters: 1, unreachable: 0 });
    const record = await environment().state.records.get<{ gitVersion: string }>({ cluster: 'it', kind: 'heartbeat', name: 'apiserver' });
    expect(record?.value.gitVersion).toMatch(/^v1\.35\.\d+$/);
  });
});
