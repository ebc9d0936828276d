// Trust boundary: no Secret byte leaves the cluster (docs/operations/security.md#secrets-stay-in-the-cluster). A
// Secret applied with `kubectl apply`, so that its last-applied-configuration annotation holds its data, carries a
// value found nowhere else; a RevisionPolicy on Secrets is attempted, with Outrigger allowed to read Secrets (an
// admin's grant, the worst case), and a policy in force generates Secrets, so they are watched either way. The whole
// pipeline runs as in AWS (forwarder, router and history, each a process of its own, over ElasticMQ); then
// every message that crossed a queue, every message left on a queue and its dead-letter queue, every log line, every
// Event and every ControllerRevision is searched for the value.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { kubectlBinary } from '../../local/apiserver.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { gvr, Resources } from '../../shared/kube/index.ts';
import { PARENT_LABEL } from '../../shared/history/revisions.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant } from '../testbed/rbac.ts';
import { adminClient, createNamespace, eventually, testbed, uniqueName } from '../testbed/index.ts';
import { separatePipeline } from '../testbed/separate-pipeline.ts';

const run = promisify(execFile);
const admin = adminClient();
const revisionPolicies = gvr('outrigger.dev', 'v1alpha1', 'revisionpolicies');
const secrets = gvr('', 'v1', 'secrets');
const GROUP = 'canary.outrigger.test';
// Both APIs of Events: Outrigger writes events.k8s.io, and each is served from the other's objects too.
const eventApis = [gvr('events.k8s.io', 'v1', 'events'), gvr('', 'v1', 'events')];

async function kubectlApply(dir: string, manifest: object): Promise<void> {
  const file = join(dir, `${randomUUID()}.json`);
  await writeFile(file, JSON.stringify(manifest));
  await run(kubectlBinary, ['apply', '-f', file], { env: { ...process.env, KUBECONFIG: testbed().kubeconfigs.admin } });
}

test('a Secret applied with kubectl and a RevisionPolicy on Secrets: its value is in no SQS message, dead letter, log line, Event or ControllerRevision', async () => {
  const ns = await createNamespace('canary');
  const dir = await mkdtemp(join(tmpdir(), 'outrigger-canary-'));
  const canary = `canary-${randomUUID()}`;
  const encoded = Buffer.from(canary).toString('base64');
  const policy = uniqueName('secrets');
  await applyManifests(
    admin,
    controllersGrant('outrigger-secrets-canary-test', ['{ apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch"] }']),
  );
  // A policy in force whose generated objects are Secrets, so that the forwarder watches Secrets (as metadata
  // only) whatever becomes of the policy on Secrets; its parent's revision shows the pipeline at work.
  const marker = uniqueName('widgets');
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'Widget', 'widgets')}---\n${controllersGrant('outrigger-widgets-canary-test', [`{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["get", "list", "watch"] }`])}`,
  );
  const tap = join(dir, 'messages.jsonl');
  const pipeline = await separatePipeline(ns, 'it', { tap });
  try {
    const secret = (label: string) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'db', namespace: ns, labels: { app: label } },
      stringData: { password: canary },
    });
    await kubectlApply(dir, secret('a'));
    expect(JSON.stringify(await admin.get(secrets, { name: 'db', namespace: ns }))).toContain(
      'kubectl.kubernetes.io/last-applied-configuration',
    );
    await kubectlApply(dir, {
      apiVersion: 'outrigger.dev/v1alpha1',
      kind: 'RevisionPolicy',
      metadata: { name: policy },
      spec: { target: { apiVersion: 'v1', kind: 'Secret' }, targetState: ['data'] },
    });
    // Refused, with a condition that says why.
    const ready = await eventually(async () => {
      const status = (await admin.get(revisionPolicies, { name: policy })).status as
        { conditions?: Array<Record<string, unknown>> } | undefined;
      return status?.conditions?.find((c) => c.type === 'Ready');
    }, 90_000);
    expect(ready).toMatchObject({ status: 'False', reason: 'SecretTarget' });
    // A change with the policy checked, then a parent of the policy in force.
    await kubectlApply(dir, secret('b'));
    await kubectlApply(dir, {
      apiVersion: 'outrigger.dev/v1alpha1',
      kind: 'RevisionPolicy',
      metadata: { name: marker },
      spec: {
        target: { apiVersion: `${GROUP}/v1`, kind: 'Widget' },
        targetState: ['spec.template'],
        generated: { apiVersion: 'v1', kind: 'Secret' },
      },
    });
    await eventually(async () => {
      await kubectlApply(dir, {
        apiVersion: `${GROUP}/v1`,
        kind: 'Widget',
        metadata: { name: 'w', namespace: ns },
        spec: { template: { image: 'app:1' } },
      }).catch(() => undefined);
      return (await admin.list(Resources.controllerRevisions, { namespace: ns, labelSelector: `${PARENT_LABEL}=w` })).items.length > 0;
    }, 90_000);
    // The Secret changed again with its kind watched: its event crossed the queues.
    await kubectlApply(dir, secret('c'));
    await eventually(async () => (await readFile(tap, 'utf8')).includes('"labels":{"app":"c"}'), 60_000);
    await eventually(() => pipeline.drained(), 60_000);

    const hits: string[] = [];
    const search = (where: string, texts: readonly string[]) => {
      // As given (stringData, and so last-applied-configuration) and as the Secret's data holds it.
      for (const t of texts) if (t.includes(canary) || t.includes(encoded)) hits.push(`${where}: ${t.slice(0, 200)}`);
    };
    const messages = await pipeline.messages();
    search('SQS message', messages);
    search('log line', pipeline.logs().split('\n'));
    for (const api of eventApis)
      search(
        'Event',
        (await admin.listAll(api)).map((e) => JSON.stringify(e)),
      );
    search(
      'ControllerRevision',
      (await admin.listAll(Resources.controllerRevisions)).map((r) => JSON.stringify(r)),
    );
    // The search had something to search: the Widget's and the Secret's events crossed the queues.
    expect(messages.length).toBeGreaterThan(0);
    expect(hits).toEqual([]);
  } catch (err) {
    process.stderr.write(`[canary] process logs:\n${pipeline.logs().slice(-20_000)}\n`);
    throw err;
  } finally {
    await pipeline.stop();
    for (const name of [policy, marker]) await admin.delete(revisionPolicies, { name }).catch(() => undefined);
  }
}, 300_000);
