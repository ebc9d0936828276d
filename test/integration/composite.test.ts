// CompositeController and DecoratorController on the real apiserver (docs/controllers/compositecontroller.md,
// docs/controllers/decoratorcontroller.md): definitions written as Metacontroller's docs write them (plain YAML, a
// webhook hook) plus Outrigger's serviceAccount, their hooks a real HTTP server in this process, each pass run as
// the definition's ServiceAccount. A CompositeController that runs a set of Pods, one that owns a Job, a
// DecoratorController adding a Service per labelled object, and a CompositeController beside a MapController on
// the same parent kind.
/* eslint-disable max-lines -- the composite, decorator and mix-and-match scenarios share one hook server and the CRDs and ServiceAccount applied once in beforeAll */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { actingAs, definitionsFor, listCompositeSet, writeReadiness, type CompositeSet } from '../../functions/composite/controllers.ts';
import type { PassContext } from '../../functions/composite/pass.ts';
import { syncDefinition } from '../../functions/composite/sync.ts';
import { MADE_BY_ANNOTATION } from '../../shared/composite/api.ts';
import { forgetMapControllers, listMapControllers, mapControllerFor, actingAs as mapActingAs } from '../../functions/map/controllers.ts';
import { syncMap } from '../../functions/map/sync.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { controllerOf, type SyncKey } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace, outriggerClient } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'composite.outrigger.test';
const pods = gvr('', 'v1', 'pods');
const services = gvr('', 'v1', 'services');
const configMaps = gvr('', 'v1', 'configmaps');
const jobs = gvr('batch', 'v1', 'jobs');
const podSets = gvr(GROUP, 'v1', 'podsets');
const jobRuns = gvr(GROUP, 'v1', 'jobruns');
const shared = gvr(GROUP, 'v1', 'mixes');

type Answer = { status?: number; body: unknown };
/** Per parent (or decorated object) name, how the hook answers. */
const answers = new Map<string, (req: Record<string, unknown>) => Answer | Promise<Answer>>();
const requests: Array<Record<string, unknown>> = [];

function serve(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    requests.push(body);
    const subject = (body.parent ?? body.object) as KubeObject | undefined;
    const how = answers.get(subject?.metadata.name ?? '');
    void Promise.resolve(how ? how(body) : { body: body.input ? { outputs: [] } : {} }).then((answer) => {
      res.writeHead(answer.status ?? 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
  });
}

let server: Server;
let url: string;
let set: CompositeSet;

const SA = { namespace: 'outrigger-composite-tests', name: 'composer' };
const definitions = () => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: podset-controller }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  parentResource: { apiVersion: ${GROUP}/v1, resource: podsets }
  childResources:
  - apiVersion: v1
    resource: pods
  - apiVersion: v1
    resource: configmaps
    updateStrategy: { method: InPlace }
  hooks:
    sync:
      webhook: { url: "${url}/sync", timeout: 5s }
    finalize:
      webhook: { url: "${url}/finalize", timeout: 5s }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: jobrun-controller }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: jobruns }
  childResources:
  - apiVersion: batch/v1
    resource: jobs
  hooks:
    sync:
      webhook: { url: "${url}/sync" }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: service-per-configmap }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  resources:
  - apiVersion: v1
    resource: configmaps
    labelSelector: { matchLabels: { expose: "yes" } }
  attachments:
  - apiVersion: v1
    resource: services
  hooks:
    sync:
      webhook: { url: "${url}/decorate" }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: mix-composite }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: mixes }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { webhook: { url: "${url}/sync" } } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: mix-map }
spec:
  serviceAccount: { namespace: ${SA.namespace}, name: ${SA.name} }
  parentResource: { apiVersion: ${GROUP}/v1, resource: mixes }
  inputResources: [{ apiVersion: v1, resource: secrets }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { map: { webhook: { url: "${url}/map" }, timeoutSeconds: 5, retries: 0 } }
`;

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const admin = adminClient();
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'PodSet', 'podsets')}---${openCrd(GROUP, 'JobRun', 'jobruns')}---${openCrd(GROUP, 'Mix', 'mixes')}---
apiVersion: v1
kind: Namespace
metadata: { name: ${SA.namespace} }
---
${impersonatedAccount(
  SA.namespace,
  SA.name,
  [
    `{ apiGroups: ["${GROUP}"], resources: ["podsets", "jobruns", "mixes"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["podsets/status", "jobruns/status", "mixes/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["pods", "configmaps", "services"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
    `{ apiGroups: [""], resources: ["secrets"], verbs: ["list", "watch"] }`,
    `{ apiGroups: ["batch"], resources: ["jobs"], verbs: ["get", "list", "watch", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/*, decoratorcontroller/*, mapcontroller/*',
)}
---
${definitions()}`,
  );
  const kube = outriggerClient();
  const cache = clusterCache<CompositeSet>(0);
  for (let i = 0; ; i += 1) {
    forgetDiscovery(kube);
    set = await listCompositeSet(kube, 'it', cache);
    // Its own four: other files' definitions may be in the cluster too.
    const names = new Set([...set.composites, ...set.decorators].map((d) => d.name));
    if ([...OWN].every((n) => names.has(n))) break;
    if (i > 100) throw new Error(`definitions not ready: ${JSON.stringify(set.invalid)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  const admin = adminClient();
  for (const name of ['podset-controller', 'jobrun-controller', 'mix-composite'])
    await admin.delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name }).catch(() => undefined);
  await admin
    .delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'decoratorcontrollers'), { name: 'service-per-configmap' })
    .catch(() => undefined);
  await admin.delete(gvr('metacontroller.k8s.io', 'v1alpha1', 'mapcontrollers'), { name: 'mix-map' }).catch(() => undefined);
  await new Promise<void>((r) => server.close(() => r()));
});

const hooks = new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] });
const keyOf = (o: KubeObject, group: string, kind: string): SyncKey => ({
  cluster: 'it',
  group,
  kind,
  namespace: o.metadata.namespace,
  name: o.metadata.name ?? '',
  uid: o.metadata.uid ?? '',
});
/** Every definition serving the object's kind, each as its ServiceAccount. */
/** This file's own definitions: another file's decorator of ConfigMaps on the shared bed is not its to run. */
const OWN = new Set(['podset-controller', 'jobrun-controller', 'mix-composite', 'service-per-configmap']);

async function sync(o: KubeObject, group: string, kind: string) {
  const kube: KubeClient = outriggerClient();
  const out = [];
  for (const d of definitionsFor(set, group, kind).filter((x) => OWN.has(x.name)))
    out.push(await syncDefinition({ kube: actingAs(kube, d), hooks } satisfies PassContext, d, keyOf(o, group, kind)));
  return out;
}
const pod = (name: string, labels: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.9' }] },
});

describe('a CompositeController running a set of Pods', () => {
  test('creates the answered Pods with its ControllerRef, replaces the status, adopts a matching orphan it marked, deletes what it stops answering', async () => {
    const ns = await podNamespace();
    const admin = adminClient();
    // An orphan the controller made (its mark: a predecessor parent deleted with --cascade=orphan), and one it did not.
    const orphan = await admin.create(pods, {
      ...pod('stray', { app: 'ps' }),
      metadata: {
        name: 'stray',
        namespace: ns,
        labels: { app: 'ps' },
        annotations: { [MADE_BY_ANNOTATION]: `compositecontroller/podset-controller/podsets.${GROUP}` },
      },
    } as KubeObject);
    const unmarked = await admin.create(pods, {
      ...pod('unmarked', { app: 'ps' }),
      metadata: { name: 'unmarked', namespace: ns, labels: { app: 'ps' } },
    } as KubeObject);
    const parent = await admin.create(podSets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'PodSet',
      metadata: { name: 'ps', namespace: ns },
      spec: { replicas: 2, selector: { matchLabels: { app: 'ps' } } },
    } as KubeObject);
    let replicas = 2;
    answers.set('ps', (req) => {
      const seen = Object.keys((req.children as Record<string, Record<string, unknown>>)['Pod.v1'] ?? {});
      return {
        body: {
          status: { replicas: seen.length, observed: seen.sort() },
          children: Array.from({ length: replicas }, (_, i) => pod(`ps-${i}`, { app: 'ps' })),
        },
      };
    });
    const [first] = await sync(parent, GROUP, 'PodSet');
    // The adopted orphan is not answered: held, it is deleted by the next pass, never by the one that adopted it.
    expect(first).toMatchObject({ problems: [], adopted: 1, created: 2, deleted: 0, held: 1 });
    const req = requests.at(-1)!;
    // The v1 request: every child rule keyed, the adopted orphan among the children, finalizing false.
    expect(Object.keys(req.children as object).sort()).toEqual(['ConfigMap.v1', 'Pod.v1']);
    expect(Object.keys((req.children as Record<string, object>)['Pod.v1']!)).toEqual(['stray']);
    expect(req.finalizing).toBe(false);
    const names = async () =>
      (await admin.listAll(pods, { namespace: ns }))
        .filter((p) => !p.metadata.deletionTimestamp && p.metadata.uid !== unmarked.metadata.uid)
        .map((p) => p.metadata.name)
        .sort();
    expect(await names()).toEqual(['ps-0', 'ps-1', 'stray']);
    for (const p of await admin.listAll(pods, { namespace: ns }))
      expect(controllerOf(p)?.uid).toBe(p.metadata.uid === unmarked.metadata.uid ? undefined : parent.metadata.uid);
    expect((await admin.get(podSets, { name: 'ps', namespace: ns })).status).toEqual({ replicas: 1, observed: ['stray'] });
    // The finalize hook makes the controller put its finalizer on the parent.
    expect((await admin.get(podSets, { name: 'ps', namespace: ns })).metadata.finalizers).toEqual([
      'composite.outrigger.dev/podset-controller',
    ]);
    // The next pass deletes the orphan (precondition, Background propagation) and the Pod no longer answered.
    expect(orphan.metadata.uid).toBeDefined();
    replicas = 1;
    const [second] = await sync(parent, GROUP, 'PodSet');
    expect(second).toMatchObject({ problems: [], adopted: 0, created: 0, deleted: 2 });
    expect(await names()).toEqual(['ps-0']);
    expect(controllerOf(await admin.get(pods, { name: 'unmarked', namespace: ns }))).toBeUndefined();
    // The status reports what the last pass observed (three Pods), the next what this one left (one); after that,
    // with nothing changed, a pass writes nothing.
    expect((await sync(parent, GROUP, 'PodSet'))[0]).toMatchObject({ problems: [], statusWritten: true });
    expect((await admin.get(podSets, { name: 'ps', namespace: ns })).status).toEqual({ replicas: 1, observed: ['ps-0'] });
    const [third] = await sync(parent, GROUP, 'PodSet');
    expect(third).toMatchObject({ problems: [], created: 0, updated: 0, deleted: 0, statusWritten: false });
  });

  test('a parent changed while its pass ran: the status write is refused as a conflict, not a problem; the next pass writes it', async () => {
    const ns = await podNamespace();
    const admin = adminClient();
    const parent = await admin.create(podSets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'PodSet',
      metadata: { name: 'racer', namespace: ns },
      spec: { replicas: 0, selector: { matchLabels: { app: 'racer' } } },
    } as KubeObject);
    let calls = 0;
    // The first call changes the parent (as a user's edit during the pass would) before answering.
    answers.set('racer', async () => {
      calls += 1;
      if (calls === 1)
        await admin.patch(podSets, { name: 'racer', namespace: ns }, { metadata: { labels: { edited: 'during-pass' } } }, 'merge');
      return { body: { status: { calls }, children: [] } };
    });
    const [first] = await sync(parent, GROUP, 'PodSet');
    expect(first).toMatchObject({ problems: [], statusWritten: false, superseded: true });
    expect((await admin.get(podSets, { name: 'racer', namespace: ns })).status).toBeUndefined();
    const [second] = await sync(parent, GROUP, 'PodSet');
    expect(second).toMatchObject({ problems: [], statusWritten: true });
    expect((await admin.get(podSets, { name: 'racer', namespace: ns })).status).toEqual({ calls: 2 });
  });

  test("OnDelete leaves a changed Pod; InPlace applies a changed ConfigMap as the controller's own field manager", async () => {
    const ns = await podNamespace();
    const admin = adminClient();
    const parent = await admin.create(podSets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'PodSet',
      metadata: { name: 'upd', namespace: ns },
      spec: { selector: { matchLabels: { app: 'upd' } } },
    } as KubeObject);
    let image = 'registry.k8s.io/pause:3.9';
    let value = 'one';
    answers.set('upd', () => ({
      body: {
        children: [
          { ...pod('upd-0', { app: 'upd' }), spec: { containers: [{ name: 'main', image }] } },
          { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'upd-cfg', labels: { app: 'upd' } }, data: { v: value } },
        ],
      },
    }));
    expect((await sync(parent, GROUP, 'PodSet'))[0]).toMatchObject({ problems: [], created: 2 });
    image = 'registry.k8s.io/pause:3.10';
    value = 'two';
    expect((await sync(parent, GROUP, 'PodSet'))[0]).toMatchObject({ problems: [], updated: 1, unchanged: 1 });
    const p = await admin.get(pods, { name: 'upd-0', namespace: ns });
    expect((p.spec as { containers: Array<{ image: string }> }).containers[0]!.image).toBe('registry.k8s.io/pause:3.9');
    const cm = await admin.get(configMaps, { name: 'upd-cfg', namespace: ns });
    expect((cm as unknown as { data: Record<string, string> }).data).toEqual({ v: 'two' });
    expect(
      (cm.metadata.managedFields as Array<{ manager: string; operation: string }> | undefined)?.some(
        (f) => f.manager === 'outrigger-composite/podset-controller' && f.operation === 'Apply',
      ),
    ).toBe(true);
  });

  test('a hook failure keeps the status, adds Synced=False, writes no child; the finalize hook lets the parent go', async () => {
    const ns = await podNamespace();
    const admin = adminClient();
    const parent = await admin.create(podSets, {
      apiVersion: `${GROUP}/v1`,
      kind: 'PodSet',
      metadata: { name: 'fail', namespace: ns },
      spec: { selector: { matchLabels: { app: 'fail' } } },
    } as KubeObject);
    answers.set('fail', () => ({ body: { status: { phase: 'ok' }, children: [pod('fail-0', { app: 'fail' })] } }));
    expect((await sync(parent, GROUP, 'PodSet'))[0]).toMatchObject({ problems: [], created: 1 });
    answers.set('fail', () => ({ status: 500, body: { oops: true } }));
    const [failed] = await sync(parent, GROUP, 'PodSet');
    expect(failed!.problems).toEqual([expect.objectContaining({ reason: 'HookHTTPError' })]);
    const status = (await admin.get(podSets, { name: 'fail', namespace: ns })).status as Record<string, unknown>;
    expect(status.phase).toBe('ok');
    expect(status.conditions).toEqual([expect.objectContaining({ type: 'Synced', status: 'False', reason: 'HookHTTPError' })]);
    expect((await admin.listAll(pods, { namespace: ns })).map((p) => p.metadata.name)).toEqual(['fail-0']);
    // Deleted: the finalize hook is called with finalizing true; once it answers finalized, the finalizer goes.
    answers.set('fail', (req) => ({
      body: { children: [], finalized: Object.keys((req.children as Record<string, object>)['Pod.v1']!).length === 0 },
    }));
    await admin.delete(podSets, { name: 'fail', namespace: ns });
    const deleting = await admin.get(podSets, { name: 'fail', namespace: ns });
    expect((await sync(deleting, GROUP, 'PodSet'))[0]).toMatchObject({ problems: [], deleted: 1, finalized: false });
    expect(requests.at(-1)!.finalizing).toBe(true);
    await eventuallyGone(admin, pods, 'fail-0', ns);
    expect((await sync(deleting, GROUP, 'PodSet'))[0]).toMatchObject({ problems: [], finalized: true });
    await eventuallyGone(admin, podSets, 'fail', ns);
  });
});

/** A namespace for Pods: the default bed runs no ServiceAccount controller, whose default account Pods need. */
async function podNamespace(): Promise<string> {
  const ns = await createNamespace('podset');
  await adminClient().create(gvr('', 'v1', 'serviceaccounts'), {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'default', namespace: ns },
  } as KubeObject);
  return ns;
}

/** Unscheduled Pods (no kubelet here) go at once; a parent goes once its finalizers are gone. */
async function eventuallyGone(admin: KubeClient, r: typeof pods, name: string, namespace: string): Promise<void> {
  for (let i = 0; i < 100; i += 1) {
    if (!(await admin.find(r, { name, namespace }))) return;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${name} still there`);
}

describe('a CompositeController owning a Job (generateSelector)', () => {
  test("the Job carries the parent's uid label and ControllerRef; no spec.selector needed; not answered, it is deleted", async () => {
    const ns = await createNamespace('jobrun');
    const admin = adminClient();
    const parent = await admin.create(jobRuns, {
      apiVersion: `${GROUP}/v1`,
      kind: 'JobRun',
      metadata: { name: 'jr', namespace: ns },
      spec: {},
    } as KubeObject);
    let want = true;
    answers.set('jr', () => ({
      body: {
        status: { jobs: want ? 1 : 0 },
        children: want
          ? [
              {
                apiVersion: 'batch/v1',
                kind: 'Job',
                metadata: { name: 'jr-once' },
                spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'm', image: 'registry.k8s.io/pause:3.9' }] } } },
              },
            ]
          : [],
      },
    }));
    expect((await sync(parent, GROUP, 'JobRun'))[0]).toMatchObject({ problems: [], created: 1 });
    const job = await admin.get(jobs, { name: 'jr-once', namespace: ns });
    expect(job.metadata.labels?.['controller-uid']).toBe(parent.metadata.uid);
    expect(controllerOf(job)?.uid).toBe(parent.metadata.uid);
    want = false;
    expect((await sync(parent, GROUP, 'JobRun'))[0]).toMatchObject({ problems: [], deleted: 1 });
    const left = await admin.find(jobs, { name: 'jr-once', namespace: ns });
    expect(!left || Boolean(left.metadata.deletionTimestamp)).toBe(true);
  });
});

describe('a DecoratorController adding a Service per labelled ConfigMap', () => {
  test('attaches the Service, sets labels and annotations, leaves a null status; an unlabelled ConfigMap is not decorated', async () => {
    const ns = await createNamespace('decor');
    const admin = adminClient();
    const cm = await admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'web', namespace: ns, labels: { expose: 'yes' } },
      data: { port: '80' },
    } as KubeObject);
    const plain = await admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'quiet', namespace: ns },
      data: {},
    } as KubeObject);
    answers.set('web', (req) => ({
      body: {
        labels: { decorated: 'yes' },
        annotations: { 'example.com/service': 'web-svc' },
        status: null,
        attachments: [
          {
            apiVersion: 'v1',
            kind: 'Service',
            metadata: { name: 'web-svc' },
            spec: { selector: { app: 'web' }, ports: [{ port: Number((req.object as { data: Record<string, string> }).data.port) }] },
          },
        ],
      },
    }));
    expect((await sync(cm, '', 'ConfigMap'))[0]).toMatchObject({ problems: [], created: 1 });
    expect(requests.at(-1)!.attachments).toEqual({ 'Service.v1': {} });
    const svc = await admin.get(services, { name: 'web-svc', namespace: ns });
    expect(controllerOf(svc)?.uid).toBe(cm.metadata.uid);
    const after = await admin.get(configMaps, { name: 'web', namespace: ns });
    expect(after.metadata.labels).toEqual({ expose: 'yes', decorated: 'yes' });
    expect(after.metadata.annotations?.['example.com/service']).toBe('web-svc');
    expect((await sync(plain, '', 'ConfigMap'))[0]).toMatchObject({ skipped: 'not selected' });
    // The second pass sees its attachment and writes nothing.
    expect((await sync(after, '', 'ConfigMap'))[0]).toMatchObject({ problems: [], created: 0, unchanged: 1, statusWritten: false });
    expect(Object.keys((requests.at(-1)!.attachments as Record<string, object>)['Service.v1']!)).toEqual(['web-svc']);
  });
});

describe('mix and match: a CompositeController and a MapController on the same parent kind', () => {
  test("each keeps its own ConfigMaps; neither pass touches the other's", async () => {
    const ns = await createNamespace('mix');
    const admin = adminClient();
    await admin.create(gvr('', 'v1', 'secrets'), {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'in', namespace: ns, labels: { mix: 'm' } },
    } as KubeObject);
    const parent = await admin.create(shared, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Mix',
      metadata: { name: 'mx', namespace: ns },
      spec: { selector: { matchLabels: { mix: 'm' } } },
    } as KubeObject);
    answers.set('mx', (req) =>
      req.input
        ? { body: { outputs: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'from-map' }, data: { by: 'map' } }] } }
        : {
            body: { children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'from-composite' }, data: { by: 'composite' } }] },
          },
    );
    const kube = outriggerClient();
    forgetMapControllers();
    let mc;
    for (let i = 0; !(mc = mapControllerFor(await listMapControllers(kube, 'it'), GROUP, 'Mix')) && i < 100; i += 1) {
      forgetMapControllers();
      await new Promise((r) => setTimeout(r, 200));
    }
    const mapPass = () => syncMap({ kube: mapActingAs(kube, mc!), hooks }, mc!, keyOf(parent, GROUP, 'Mix'));
    expect(await mapPass()).toMatchObject({ created: 1, problems: [] });
    expect((await sync(parent, GROUP, 'Mix'))[0]).toMatchObject({ problems: [], created: 1, deleted: 0 });
    // The composite's request showed only its own child kinds' objects that are not the map's outputs.
    expect(Object.keys((requests.filter((r) => r.children).at(-1)!.children as Record<string, object>)['ConfigMap.v1']!)).toEqual([]);
    expect(await mapPass()).toMatchObject({ created: 0, deleted: 0, problems: [] });
    expect((await sync(parent, GROUP, 'Mix'))[0]).toMatchObject({ problems: [], created: 0, deleted: 0, unchanged: 1 });
    const left = (await admin.listAll(configMaps, { namespace: ns }))
      .map((c) => c.metadata.name)
      .filter((n) => n !== 'kube-root-ca.crt')
      .sort();
    expect(left).toEqual(['from-composite', 'from-map']);
  });
});

test('definitions get their Ready condition', async () => {
  await writeReadiness(outriggerClient(), set);
  const cc = await adminClient().get(gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers'), { name: 'podset-controller' });
  expect((cc.status as { conditions: Array<{ type: string; status: string }> }).conditions).toEqual([
    expect.objectContaining({ type: 'Ready', status: 'True' }),
  ]);
});
