// The forwarder's image as shipped (docs/operations/forwarder.md#run-the-image-locally): forwarder/Dockerfile built in
// the bed's container engine and run as its Deployment runs it (test/testbed/forwarder-container.ts: the image's
// non-root user, read-only root, the chart's limits, the ServiceAccount's token and CA where a pod has them),
// against the bed's apiserver and ElasticMQ, feeding the router and history in processes of their own
// (test/testbed/separate-pipeline.ts). A change made with kubectl arrives as an envelope signed with the cluster's
// forwarder key and becomes a revision; of two containers one leads; the leader killed mid-stream, the other
// resumes from the checkpoint and no change is lost.
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { kubectlBinary } from '../../local/apiserver.ts';
import { docker } from '../../local/container-engine.ts';
import { statefulSet } from '../../local/fixtures.ts';
import { buildForwarderImage, FORWARDER_IMAGE } from '../../local/forwarder-image.ts';
import { projectRoot } from '../../local/paths.ts';
import { ConfigMapCheckpoint } from '../../forwarder/checkpoint.ts';
import { parseEnvelope, type Envelope } from '../../shared/envelope/index.ts';
import { forwarderKey, verifyEnvelope } from '../../shared/envelope/signature.ts';
import { PARENT_LABEL } from '../../shared/history/revisions.ts';
import { gvr, Resources, type KubeObject } from '../../shared/kube/index.ts';
import { FORWARDER_NAMESPACE, deploymentEnv, forwarderKubeconfig, renderKustomize } from '../testbed/forwarder.ts';
import { serviceAccountVolume, startForwarderContainer, type ForwarderContainer } from '../testbed/forwarder-container.ts';
import { adminClient, containerEngineHost, createNamespace, eventually, testbed, uniqueName } from '../testbed/index.ts';
import { statefulSetPolicy } from '../testbed/policies.ts';
import { separatePipeline, type SeparatePipeline } from '../testbed/separate-pipeline.ts';

const run = promisify(execFile);
const log = (m: string) => process.stderr.write(`[forwarder-container] ${m}\n`);
const SECRET = 'forwarder container test secret';

let objects: KubeObject[];
let sa: string;
let dir: string;
const containers: ForwarderContainer[] = [];

beforeAll(async () => {
  containerEngineHost();
  // A cold run builds the base images and the image (minutes: npm ci of the project in the build), unless
  // test/testbed/prebuild.ts already has.
  await buildForwarderImage(log);
  objects = await renderKustomize(join(projectRoot, 'deploy', 'forwarder', 'base'));
  await forwarderKubeconfig(objects); // its namespace, ServiceAccount and RBAC, as the manifests have them
  await statefulSetPolicy(adminClient());
  sa = await serviceAccountVolume();
  dir = await mkdtemp(join(tmpdir(), 'outrigger-fwd-container-'));
  await chmod(dir, 0o755);
}, 1_800_000);

afterAll(async () => {
  await Promise.all(containers.map((c) => c.remove()));
  await rm(dir, { recursive: true, force: true });
  if (sa) await rm(sa, { recursive: true, force: true });
});

/** The Deployment's environment for cluster `cluster`, sending to the pipeline's queue, with a Lease and checkpoint of the test's own. */
function containerEnv(cluster: string, pipeline: SeparatePipeline, ns: string, names: { lease: string; checkpoint: string }) {
  return {
    ...deploymentEnv(objects, { name: uniqueName('outrigger-forwarder'), namespace: FORWARDER_NAMESPACE }),
    OUTRIGGER_CLUSTER_ID: cluster,
    OUTRIGGER_EVENT_QUEUE_URL: pipeline.eventsQueueUrl,
    OUTRIGGER_DEAD_LETTER_QUEUE_URL: pipeline.deadLetterQueueUrl,
    OUTRIGGER_SQS_ENDPOINT: testbed().sqsEndpoint,
    // Other files' objects on the shared bed are not this test's.
    OUTRIGGER_NAMESPACE: ns,
    OUTRIGGER_LEADER_ELECTION_LEASE: names.lease,
    OUTRIGGER_CHECKPOINT_CONFIGMAP: names.checkpoint,
  };
}

/** The signing secret for the router, and the cluster's forwarder key as the Deployment's Secret holds it. */
async function keys(cluster: string): Promise<{ secretFile: string; keyDir: string }> {
  const secretFile = join(dir, `${cluster}.secret`);
  await writeFile(secretFile, SECRET);
  const keyDir = join(dir, `${cluster}-key`);
  await run('mkdir', ['-p', keyDir]);
  await writeFile(join(keyDir, 'key'), forwarderKey(SECRET, cluster));
  await chmod(keyDir, 0o755);
  await chmod(join(keyDir, 'key'), 0o644);
  return { secretFile, keyDir };
}

async function kubectlApply(manifest: KubeObject): Promise<void> {
  const file = join(dir, `${uniqueName('m')}.json`);
  await writeFile(file, JSON.stringify(manifest));
  await run(kubectlBinary, ['apply', '-f', file], { env: { ...process.env, KUBECONFIG: testbed().kubeconfigs.admin } });
}

/** The envelopes the router received (the tap holds every body the pipeline's consumers received). */
async function tapped(tap: string): Promise<Envelope[]> {
  const lines = (await readFile(tap, 'utf8').catch(() => '')).split('\n').filter(Boolean);
  const out: Envelope[] = [];
  for (const line of lines) {
    try {
      out.push(parseEnvelope(line));
    } catch {
      // a sync request to history, not an envelope
    }
  }
  return out;
}

/** The images of `name`'s revisions, oldest first. */
async function revisionImages(ns: string, name: string): Promise<string[]> {
  const revisions = (await adminClient().list(Resources.controllerRevisions, { namespace: ns, labelSelector: `${PARENT_LABEL}=${name}` }))
    .items as Array<KubeObject & { revision: number; data: { spec: { template: { spec: { containers: Array<{ image: string }> } } } } }>;
  return revisions.sort((a, b) => a.revision - b.revision).map((r) => r.data.spec.template.spec.containers[0]!.image);
}

test('the image runs as its non-root user, and a StatefulSet applied with kubectl arrives as a signed envelope and becomes a revision', async () => {
  const config = JSON.parse(await docker('image', 'inspect', '--format', '{{json .Config}}', FORWARDER_IMAGE)) as {
    User: string;
    Entrypoint: string[];
  };
  expect(config.User).toBe('node');
  expect(config.Entrypoint).toEqual(['node', '/app/forwarder.mjs']);
  const ns = await createNamespace('fwd-ctr');
  const cluster = uniqueName('ctr');
  const { secretFile, keyDir } = await keys(cluster);
  const tap = join(dir, `${cluster}.tap`);
  const pipeline = await separatePipeline(ns, cluster, { forwarder: false, tap, secretFile });
  try {
    const fwd = await startForwarderContainer({
      env: containerEnv(cluster, pipeline, ns, { lease: uniqueName('lease'), checkpoint: uniqueName('checkpoint') }),
      sa,
      keyDir,
    });
    containers.push(fwd);
    await fwd.logged('forwarder started', 90_000);
    expect(await docker('exec', fwd.name, 'node', '-e', 'process.stdout.write(String(process.getuid()))')).toBe('1000');
    await kubectlApply(statefulSet('web', ns, 'app:1'));
    expect(
      await eventually(async () => ((await revisionImages(ns, 'web')).length ? revisionImages(ns, 'web') : undefined), 90_000),
    ).toEqual(['app:1']);
    const envelopes = (await tapped(tap)).filter((e) => e.data.object.kind === 'StatefulSet');
    expect(envelopes.length).toBeGreaterThan(0);
    for (const e of envelopes) expect(verifyEnvelope([forwarderKey(SECRET, cluster)], cluster, e)).toBe(true);
    expect(await pipeline.deadLetters()).toEqual([]);
    // Nothing went wrong but for other files' kinds on the shared bed, which the chart's forwarder may not list.
    const troubles = (await fwd.log()).split('\n').filter((l) => /"level":"(error|warn)"/.test(l));
    expect(
      troubles.filter(
        (l) => !/"message":"watch failed; retrying with backoff".*403 Forbidden/.test(l) || /statefulsets|controllerrevisions/.test(l),
      ),
    ).toEqual([]);
  } catch (err) {
    process.stderr.write(`${pipeline.logs()}\n${(await Promise.all(containers.map((c) => c.log()))).join('\n')}\n`);
    throw err;
  } finally {
    await pipeline.stop();
  }
}, 240_000);

test('of two containers one leads; the leader killed mid-stream, the other resumes from the checkpoint and no change is lost', async () => {
  const ns = await createNamespace('fwd-ctr-ha');
  const cluster = uniqueName('ctr');
  const { secretFile, keyDir } = await keys(cluster);
  const tap = join(dir, `${cluster}.tap`);
  const pipeline = await separatePipeline(ns, cluster, { forwarder: false, tap, secretFile });
  const names = { lease: uniqueName('lease'), checkpoint: uniqueName('checkpoint') };
  try {
    const [a, b] = await Promise.all(
      [0, 1].map(() => startForwarderContainer({ env: containerEnv(cluster, pipeline, ns, names), sa, keyDir })),
    );
    containers.push(a!, b!);
    const leads = async (c: ForwarderContainer) => (await c.log()).includes('"message":"forwarder started"');
    const leader = await eventually(async () => ((await leads(a!)) ? a : (await leads(b!)) ? b : undefined), 90_000);
    const standby = leader === a ? b! : a!;
    expect(await leads(standby)).toBe(false);
    await standby.logged('leader election: standing by');

    // Three StatefulSets, sent and in the checkpoint the leader keeps in its ConfigMap.
    for (const n of [1, 2, 3]) await kubectlApply(statefulSet(`s${n}`, ns, 'app:1'));
    const checkpoint = new ConfigMapCheckpoint({ kube: adminClient(), namespace: FORWARDER_NAMESPACE, name: names.checkpoint });
    const checkpointed = async () => {
      const text = await checkpoint.load();
      const kept = Object.values((JSON.parse(text ?? '{}') as { resources?: Record<string, KubeObject[]> }).resources ?? {}).flat();
      return ['s1', 's2', 's3'].every((n) => kept.some((o) => o.metadata.name === n && o.metadata.namespace === ns)) || undefined;
    };
    await eventually(checkpointed, 90_000);
    // Mid-stream: one more change, perhaps only buffered, then `docker kill` (SIGKILL, no Lease handed back).
    const admin = adminClient();
    const statefulSets = gvr('apps', 'v1', 'statefulsets');
    const image = (tag: string) => ({ spec: { template: { spec: { containers: [{ name: 'c', image: tag }] } } } });
    await admin.patch(statefulSets, { name: 's3', namespace: ns }, image('app:2'), 'merge');
    await leader!.kill();
    // While no replica leads: a creation, an update and a deletion.
    await kubectlApply(statefulSet('s4', ns, 'app:1'));
    await admin.patch(statefulSets, { name: 's1', namespace: ns }, image('app:3'), 'merge');
    await admin.delete(statefulSets, { name: 's2', namespace: ns });
    // The Lease expires (15 s) and the standby leads, from the checkpoint the killed leader left.
    await standby.logged('forwarder started', 90_000);
    const latest = async () => {
      const byName = new Map<string, { type: string; image: string }>();
      for (const e of await tapped(tap)) {
        if (e.data.object.kind !== 'StatefulSet') continue;
        expect(verifyEnvelope([forwarderKey(SECRET, cluster)], cluster, e)).toBe(true);
        // A deletion's envelope may carry the object's metadata only.
        const o = e.data.object as KubeObject & { spec?: { template?: { spec?: { containers?: Array<{ image: string }> } } } };
        byName.set(o.metadata.name ?? '', { type: e.type.split('.').pop()!, image: o.spec?.template?.spec?.containers?.[0]?.image ?? '' });
      }
      return byName;
    };
    // Every change arrived as the state it left, the deletion made while none led included.
    const want = { s1: 'app:3', s3: 'app:2', s4: 'app:1' };
    await eventually(async () => {
      const got = await latest();
      return (Object.entries(want).every(([n, img]) => got.get(n)?.image === img) && got.get('s2')?.type === 'deleted') || undefined;
    }, 120_000);
    // History's revisions end at each StatefulSet's last state.
    await eventually(async () => {
      for (const [n, img] of Object.entries(want)) if ((await revisionImages(ns, n)).at(-1) !== img) return undefined;
      return true;
    }, 60_000);
    expect(await pipeline.deadLetters()).toEqual([]);
  } catch (err) {
    process.stderr.write(`${pipeline.logs()}\n${(await Promise.all(containers.map((c) => c.log()))).join('\n')}\n`);
    throw err;
  } finally {
    await pipeline.stop();
  }
}, 300_000);
