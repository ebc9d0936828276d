// The forwarder's Helm chart (deploy/forwarder/chart), rendered by the project's helm (test/helm) with the values
// `npm run forwarder-overlay -- --helm-values` generates: the same objects as the kustomize base with the overlay
// generated for the same cluster, every difference named; applied with server-side dry-run on the bed; and
// values the forwarder cannot run with refused by the chart's schema, naming the field.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dump, load, loadAll } from 'js-yaml';
import { kubectlBinary } from '../../local/apiserver.ts';
import { ensureHelmBinary } from '../../local/helm.ts';
import { projectRoot } from '../../local/paths.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { FORWARDER_NAMESPACE, renderKustomize } from '../testbed/forwarder.ts';
import { adminClient, testbed } from '../testbed/index.ts';

const run = promisify(execFile);
const chart = join(projectRoot, 'deploy', 'forwarder', 'chart');

let helm = '';
let dir = '';
beforeAll(async () => {
  // The global setup has built it (docs/contributing/test-beds.md#tests); this finds it in .cache/bin.
  helm = await ensureHelmBinary((m) => process.stderr.write(`[helm] ${m}\n`));
  dir = await mkdtemp(join(tmpdir(), 'outrigger-chart-'));
}, 900_000);

/** helm's own directories kept out of $HOME. */
const helmEnv = () => ({ ...process.env, HELM_CACHE_HOME: dir, HELM_CONFIG_HOME: dir, HELM_DATA_HOME: dir });

/** `helm template` of the chart with these values files. */
async function helmTemplate(...valuesFiles: string[]): Promise<KubeObject[]> {
  const { stdout } = await run(helm, ['template', 'outrigger-forwarder', chart, ...valuesFiles.flatMap((f) => ['-f', f])], {
    env: helmEnv(),
    maxBuffer: 16 * 1024 * 1024,
  });
  return (loadAll(stdout) as Array<KubeObject | null>).filter((o): o is KubeObject => o !== null);
}

/** helm's refusal of these values: its message (it must refuse). */
async function helmRefusal(values: Record<string, unknown>): Promise<string> {
  const file = join(dir, `bad-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, dump(values));
  const outcome = await helmTemplate(file).then(
    () => 'rendered',
    (err: unknown) => (err as { stderr: string }).stderr,
  );
  if (outcome === 'rendered') throw new Error(`helm rendered values it should refuse: ${JSON.stringify(values)}`);
  return outcome;
}

interface Case {
  name: string;
  clusters: unknown[];
  flags: string[];
}

/** The overlay and the Helm values the same command generates for one cluster, rendered. */
async function renderBoth(c: Case): Promise<{ kustomize: KubeObject[]; helm: KubeObject[]; valuesFile: string }> {
  const clustersFile = join(dir, `${c.name}-clusters.json`);
  await writeFile(clustersFile, JSON.stringify(c.clusters));
  const common = ['scripts/forwarder-overlay.ts', '--cluster', 'prod', '--clusters', clustersFile, ...c.flags];
  const overlay = join(dir, `${c.name}-overlay`);
  const valuesFile = join(dir, `${c.name}-values.yaml`);
  await run(process.execPath, [...common, '--out', overlay], { cwd: projectRoot });
  await run(process.execPath, [...common, '--helm-values', valuesFile], { cwd: projectRoot });
  return { kustomize: await renderKustomize(overlay), helm: await helmTemplate(valuesFile), valuesFile };
}

type Json = unknown;

/** Where two JSON values differ, as `path: kustomize's value, helm's value`. */
function differences(a: Json, b: Json, path: string): string[] {
  if (Array.isArray(a) && Array.isArray(b)) {
    const n = Math.max(a.length, b.length);
    return Array.from({ length: n }, (_, i) => differences(a[i], b[i], `${path}[${i}]`)).flat();
  }
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => differences((a as Record<string, Json>)[k], (b as Record<string, Json>)[k], `${path}.${k}`));
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [`${path}: kustomize ${JSON.stringify(a)}, helm ${JSON.stringify(b)}`];
}

// What differs by design, made equal before the comparison (each checked first):
// - kustomize names the generated ConfigMap with a hash of its content (and the Deployment refers to that name);
//   the chart keeps the name and puts the content's checksum on the pod template instead. Both roll the pods
//   when the settings change.
// - OUTRIGGER_CLUSTERS is the same JSON with its keys in another order (Helm's toJson sorts them).
const KUSTOMIZE_HASHED = /^outrigger-forwarder-[a-z0-9]{10}$/;

function normalizedKustomize(objects: KubeObject[]): KubeObject[] {
  const text = JSON.stringify(objects);
  const hashed = objects.find((o) => o.kind === 'ConfigMap')?.metadata.name ?? '';
  expect(hashed).toMatch(KUSTOMIZE_HASHED);
  return normalizedEnv(JSON.parse(text.replaceAll(`"${hashed}"`, '"outrigger-forwarder"')) as KubeObject[]);
}

function normalizedHelm(objects: KubeObject[]): KubeObject[] {
  const copy = JSON.parse(JSON.stringify(objects)) as KubeObject[];
  const deployment = copy.find((o) => o.kind === 'Deployment') as KubeObject & {
    spec: { template: { metadata: { annotations?: Record<string, string> } } };
  };
  expect(deployment.spec.template.metadata.annotations).toEqual({ 'checksum/config': expect.stringMatching(/^[0-9a-f]{64}$/) });
  delete deployment.spec.template.metadata.annotations;
  return normalizedEnv(copy);
}

function normalizedEnv(objects: KubeObject[]): KubeObject[] {
  for (const o of objects as Array<KubeObject & { data?: Record<string, string> }>)
    if (o.kind === 'ConfigMap' && o.data?.OUTRIGGER_CLUSTERS) o.data.OUTRIGGER_CLUSTERS = JSON.parse(o.data.OUTRIGGER_CLUSTERS) as string;
  return objects;
}

const byId = (objects: KubeObject[]) =>
  new Map(objects.map((o) => [`${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`, o]));

/** Every difference between the two renderings, named by object and field. */
function compare(kustomize: KubeObject[], helm: KubeObject[]): string[] {
  const k = byId(normalizedKustomize(kustomize));
  const h = byId(normalizedHelm(helm));
  const ids = [...new Set([...k.keys(), ...h.keys()])].sort();
  return ids.flatMap((id) => {
    if (!h.has(id)) return [`${id}: only in kustomize's output`];
    if (!k.has(id)) return [`${id}: only in helm's output`];
    return differences(k.get(id), h.get(id), id);
  });
}

const eks = {
  kind: 'eks',
  server: 'https://0123456789ABCDEF0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com',
  caData: 'Q0E=',
  clusterName: 'prod',
  region: 'eu-west-1',
};
const sqs = (name: string) => `https://sqs.eu-west-1.amazonaws.com/123456789012/Outrigger-${name}.fifo`;
const outputsFile = async () => {
  const file = join(dir, 'cdk-outputs.json');
  await writeFile(
    file,
    JSON.stringify({
      Outrigger: {
        ProdEventsQueueUrl: sqs('prod-events'),
        ProdEventsDeadLetterQueueUrl: sqs('prod-events-dlq'),
        ForwarderImageUri: '123456789012.dkr.ecr.eu-west-1.amazonaws.com/cdk-assets@sha256:0123abcd',
      },
    }),
  );
  return file;
};

test('the chart renders the objects the kustomize overlay does, for the same cluster: by tag, in another namespace, by digest, without storage', async () => {
  const cases: Case[] = [
    {
      name: 'tagged',
      clusters: [{ id: 'prod', access: eks, storage: { migrations: 'in-tree', reporters: [{ id: 'a' }, { id: 'b' }] } }],
      flags: [
        '--events-queue-url',
        sqs('prod-events'),
        '--dead-letter-queue-url',
        sqs('prod-events-dlq'),
        '--image',
        'registry:5000/fwd:1.2',
      ],
    },
    {
      name: 'moved',
      clusters: [
        {
          id: 'prod',
          access: eks,
          storage: { enabled: false },
          metacontroller: { enabled: false },
          controllerSelector: 'example.com/engine=outrigger',
        },
      ],
      flags: ['--outputs', await outputsFile(), '--namespace', 'ops'],
    },
    {
      name: 'local',
      clusters: [{ id: 'prod', access: { kind: 'kubeconfig' } }],
      flags: [
        '--events-queue-url',
        'http://127.0.0.1:9324/q.fifo',
        '--dead-letter-queue-url',
        'http://127.0.0.1:9324/d.fifo',
        '--image',
        'fwd',
      ],
    },
  ];
  for (const c of cases) {
    const rendered = await renderBoth(c);
    expect({ case: c.name, differences: compare(rendered.kustomize, rendered.helm) }).toEqual({ case: c.name, differences: [] });
  }
  // The comparison sees what matters: a Deployment whose image or a Role whose rules differ is named.
  const { kustomize, helm } = await renderBoth(cases[0]!);
  const changed = JSON.parse(JSON.stringify(helm)) as Array<KubeObject & Record<string, never>>;
  const deployment = changed.find((o) => o.kind === 'Deployment') as unknown as {
    spec: { template: { spec: { containers: Array<{ image: string }> } } };
  };
  deployment.spec.template.spec.containers[0]!.image = 'other';
  const role = changed.find((o) => o.kind === 'Role') as unknown as { rules: Array<{ verbs: string[] }> };
  role.rules[0]!.verbs.push('delete');
  expect(compare(kustomize, changed)).toEqual([
    'Deployment outrigger-system/outrigger-forwarder.spec.template.spec.containers[0].image: kustomize "registry:5000/fwd:1.2", helm "other"',
    'Role outrigger-system/outrigger-forwarder.rules[0].verbs[3]: kustomize undefined, helm "delete"',
  ]);
});

test('a change of settings changes the pod template (the pods roll), as the overlay does', async () => {
  const c = (url: string): Case => ({
    name: `roll-${url.length}`,
    clusters: [{ id: 'prod', access: eks }],
    flags: ['--events-queue-url', url, '--dead-letter-queue-url', sqs('prod-events-dlq'), '--image', 'fwd:1'],
  });
  const template = (objects: KubeObject[]) =>
    JSON.stringify((objects.find((o) => o.kind === 'Deployment') as { spec?: { template?: unknown } }).spec?.template);
  const [a, b] = await Promise.all([renderBoth(c(sqs('prod-events'))), renderBoth(c(sqs('prod-events-2')))]);
  expect(template(a.helm)).not.toBe(template(b.helm));
  expect(template(a.kustomize)).not.toBe(template(b.kustomize));
});

test('the rendered chart applies with server-side dry-run, without a Pod Security warning', async () => {
  const { helm: objects, kustomize } = await renderBoth({
    name: 'dry-run',
    clusters: [{ id: 'prod', access: eks, storage: { migrations: 'in-tree' } }],
    flags: ['--outputs', await outputsFile()],
  });
  // Everything the overlay installs (the first test compares them field by field).
  const kinds = (list: KubeObject[]) => list.map((o) => o.kind).sort();
  expect(kinds(objects)).toEqual(kinds(kustomize));
  expect(kinds(objects)).toContain('Deployment');
  // Its namespace first, as `helm install` creates a Namespace before what goes in it; the namespace enforces the
  // restricted Pod Security Standard, so a warning would mean the pod template breaks it.
  await applyManifests(adminClient(), dump(objects.find((o) => o.kind === 'Namespace')));
  const rendered = join(dir, 'chart-rendered.yaml');
  await writeFile(rendered, objects.map((o) => dump(o)).join('---\n'));
  const dry = await run(kubectlBinary, ['apply', '--server-side', '--dry-run=server', '-f', rendered], {
    env: { ...process.env, KUBECONFIG: testbed().kubeconfigs.admin },
  });
  expect(dry.stdout).toMatch(new RegExp(`deployment\\.apps/outrigger-forwarder serverside-applied \\(server dry run\\)`));
  expect(dry.stdout).toMatch(/configmap\/outrigger-forwarder serverside-applied \(server dry run\)/);
  expect(dry.stdout).toMatch(/poddisruptionbudget\.policy\/outrigger-forwarder serverside-applied \(server dry run\)/);
  expect(dry.stdout.trim().split('\n')).toHaveLength(objects.length);
  expect(dry.stderr).not.toMatch(/[Ww]arning/);
  expect(objects.find((o) => o.kind === 'ConfigMap')?.metadata.namespace).toBe(FORWARDER_NAMESPACE);
});

test('values the forwarder cannot run with are refused by the schema, naming the field', async () => {
  const { valuesFile } = await renderBoth({
    name: 'schema',
    clusters: [{ id: 'prod', access: eks }],
    flags: ['--outputs', await outputsFile()],
  });
  // What the command generates passes helm's own checks, warnings included.
  await run(helm, ['lint', '--strict', chart, '-f', valuesFile], { env: helmEnv() });
  const good = load(await readFile(valuesFile, 'utf8')) as Record<string, unknown>;
  const without = (key: string) => Object.fromEntries(Object.entries(good).filter(([k]) => k !== key));
  expect(await helmRefusal(without('clusterId'))).toMatch(/at '': missing property 'clusterId'/);
  expect(await helmRefusal(without('eventsQueueUrl'))).toMatch(/at '': missing property 'eventsQueueUrl'/);
  expect(await helmRefusal({ ...good, clusterId: 42 })).toMatch(/at '\/clusterId': got number, want string/);
  expect(await helmRefusal({ ...good, clusterId: 'Prod_EU' })).toMatch(/at '\/clusterId': '.*' does not match pattern/);
  expect(await helmRefusal({ ...good, storage: { enabled: 'no' } })).toMatch(/at '\/storage\/enabled': got string, want boolean/);
  expect(await helmRefusal({ ...good, image: { tag: '1' } })).toMatch(/at '\/image': missing property 'repository'/);
  // A misspelt key is refused rather than ignored.
  expect(await helmRefusal({ ...good, clusterID: 'prod' })).toMatch(/additional propert(y|ies) 'clusterID' not allowed/);
});
