// The customize hook (docs/controllers/compositecontroller.md#related-objects) on the real apiserver: a parent's
// customize answer asks for ConfigMaps by label and its sync hook is sent them as `related`; a change to one of
// them syncs that parent again, and routes to it alone; a rule naming a namespace the controller's ServiceAccount
// may not read is that parent's Forbidden problem, never read with Outrigger's own grants.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { controllerSources } from '../../functions/controllers.ts';
import { actingAs, listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { syncDefinition } from '../../functions/composite/sync.ts';
import { routeBatch } from '../../functions/router/route.ts';
import { Clusters } from '../../shared/clusters.ts';
import { recordedKinds } from '../../shared/composite/related.ts';
import { makeEnvelope, messageGroupId } from '../../shared/envelope/index.ts';
import type { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { adminClient, createNamespace, eventually, outriggerClient, startTestRuntime, testCluster } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, impersonatedAccount } from '../testbed/rbac.ts';
import { asRecord } from './sqs-records.ts';

const GROUP = 'composite-related.outrigger.test';
const consumers = gvr(GROUP, 'v1', 'consumers');
const auditors = gvr(GROUP, 'v1', 'auditors');
const configMaps = gvr('', 'v1', 'configmaps');
const compositeControllers = gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers');
const decoratorControllers = gvr('metacontroller.k8s.io', 'v1alpha1', 'decoratorcontrollers');
const NS = 'outrigger-composite-related';
const admin = adminClient();
let server: Server;
let url: string;
/** Hook calls by `<path> <parent name>`. */
const calls = new Map<string, number>();
const logs: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        parent: KubeObject;
        related?: Record<string, Record<string, KubeObject>>;
      };
      const id = `${req.url ?? ''} ${body.parent.metadata.name ?? ''}`;
      calls.set(id, (calls.get(id) ?? 0) + 1);
      // customize: the ConfigMaps labelled with the parent's feed; sync: the status lists what it was sent.
      const answer =
        req.url === '/customize'
          ? {
              relatedResources: [
                {
                  apiVersion: 'v1',
                  resource: 'configmaps',
                  labelSelector: { matchLabels: { feed: (body.parent.spec as { feed: string }).feed } },
                },
              ],
            }
          : {
              status: {
                related: Object.entries(body.related?.['ConfigMap.v1'] ?? {})
                  .map(([key, cm]) => `${key}=${(cm as { data?: { v?: string } }).data?.v ?? ''}`)
                  .sort(),
              },
            };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const name of ['consumer-controller', 'auditor-controller'])
    await admin.delete(compositeControllers, { name }).catch(() => undefined);
  await admin.delete(decoratorControllers, { name: 'related-decorator' }).catch(() => undefined);
  await new Promise<void>((r) => server.close(() => r()));
});

class MemorySyncSink implements SyncSink {
  readonly sent: Array<{ target: string; request: SyncRequest }> = [];
  send(target: string, requests: SyncRequest[]): Promise<void> {
    for (const request of requests) this.sent.push({ target, request });
    return Promise.resolve();
  }
}

const relatedOf = async (name: string, ns: string) =>
  ((await admin.get(consumers, { name, namespace: ns })).status as { related?: string[] } | undefined)?.related?.join();

test('a parent whose customize hook asks for ConfigMaps by label is sent them as related; a change to one syncs that parent, and routes to it alone', async () => {
  const ns = await createNamespace('cc-related');
  const elsewhere = await createNamespace('cc-related-other');
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'Consumer', 'consumers')}---
${controllersGrant('outrigger-composite-related-test', [
  // What the forwarder watches and the router lists, as Outrigger.
  `{ apiGroups: ["${GROUP}"], resources: ["consumers", "auditors"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'relater',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["consumers"], verbs: ["get", "list", "watch", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["consumers/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch"] }`,
  ],
  'compositecontroller/consumer-controller',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: consumer-controller
  labels: { outrigger.test/runtime: composite-related }
spec:
  serviceAccount: { namespace: ${NS}, name: relater }
  generateSelector: true
  parentResource:
    apiVersion: ${GROUP}/v1
    resource: consumers
  hooks:
    customize:
      webhook:
        url: ${url}/customize
    sync:
      webhook:
        url: ${url}/sync
`,
  );
  const cm = (namespace: string, name: string, feed: string, v: string) =>
    admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace, labels: { feed } },
      data: { v },
    } as KubeObject);
  await cm(ns, 'cm-a', 'a', '1');
  await cm(ns, 'cm-b', 'b', '1');
  // Of feed a, but in another namespace: a namespaced parent relates objects of its own namespace only.
  await cm(elsewhere, 'cm-a', 'a', '1');
  // Its runtime serves its own definition only (controllerSelector): another file's MapController or
  // CompositeController, whose hook counts its calls, is that file's to serve.
  const runtime = await startTestRuntime('composite-related', ['router', 'map'], {
    namespace: ns,
    controllerSelector: 'outrigger.test/runtime=composite-related',
    log: (m) => logs.push(m),
  });
  try {
    const parent = (name: string, feed: string) =>
      admin.create(consumers, {
        apiVersion: `${GROUP}/v1`,
        kind: 'Consumer',
        metadata: { name, namespace: ns },
        spec: { feed },
      } as KubeObject);
    await parent('reader-a', 'a');
    await parent('reader-b', 'b');
    await eventually(async () => ((await relatedOf('reader-a', ns)) === 'cm-a=1' ? true : undefined), 30_000);
    await eventually(async () => ((await relatedOf('reader-b', ns)) === 'cm-b=1' ? true : undefined), 30_000);
    // The definition records the kind its parents relate, for the forwarder to watch.
    await eventually(async () =>
      recordedKinds(await admin.get(compositeControllers, { name: 'consumer-controller' })).some((k) => k.resource === 'configmaps')
        ? true
        : undefined,
    );
    // A related object's change syncs the parent that asked for it.
    const changed = await admin.patch(configMaps, { name: 'cm-a', namespace: ns }, { data: { v: '2' } }, 'merge');
    await eventually(async () => ((await relatedOf('reader-a', ns)) === 'cm-a=2' ? true : undefined), 30_000);
    // Its customize answer was asked once: the passes since found it recorded for the parent as it is.
    expect(calls.get('/customize reader-a')).toBe(1);
    expect(calls.get('/sync reader-a')).toBeGreaterThanOrEqual(2);

    // And the router sends that change to that parent alone.
    const sink = new MemorySyncSink();
    const deadLetter = new MemoryDeadLetterSink();
    const envelope = makeEnvelope({
      cluster: 'it',
      type: 'modified',
      object: { ...changed, apiVersion: 'v1', kind: 'ConfigMap' } as KubeObject,
      source: 'test',
    });
    const out = await routeBatch(
      {
        Records: [
          asRecord(
            {
              MessageId: 'm0',
              ReceiptHandle: 'm0',
              Body: JSON.stringify(envelope),
              Attributes: { MessageGroupId: messageGroupId(envelope), MessageDeduplicationId: 'm0' },
            },
            'arn:aws:sqs:local:000000000000:it-events.fifo',
          ),
        ],
      },
      {
        clusters: new Clusters([testCluster('it')]),
        sources: controllerSources,
        sink,
        deadLetter: () => deadLetter,
        queueCluster: () => 'it',
      },
    );
    expect(out.batchItemFailures).toEqual([]);
    expect(sink.sent.map((s) => `${s.request.key.kind}/${s.request.key.namespace ?? ''}/${s.request.key.name}`)).toEqual([
      `Consumer/${ns}/reader-a`,
    ]);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${logs.slice(-40).join('\n')}`);
  } finally {
    await runtime.stop();
  }
}, 120_000);

describe('the ServiceAccount boundary of related objects', () => {
  const cache = clusterCache<CompositeSet>(0);
  async function served(name: string) {
    const kube = outriggerClient();
    return eventually(async () => {
      forgetDiscovery(kube);
      return (await listCompositeSet(kube, 'it', cache)).composites.find((c) => c.name === name);
    });
  }

  test("a related rule naming a namespace the controller's ServiceAccount may not read is the parent's Forbidden problem, not read with Outrigger's grants", async () => {
    const allowed = await createNamespace('cc-related-allowed');
    const walled = await createNamespace('cc-related-walled');
    await applyManifests(
      admin,
      `${openCrd(GROUP, 'Auditor', 'auditors', { scope: 'Cluster' })}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'auditor',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["auditors"], verbs: ["get", "list", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["auditors/status"], verbs: ["patch"] }`,
  ],
  'compositecontroller/auditor-controller',
)}
---
# The account reads ConfigMaps in one namespace only.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: auditor-reads, namespace: ${allowed} }
rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: auditor-reads, namespace: ${allowed} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: auditor-reads }
subjects: [{ kind: ServiceAccount, name: auditor, namespace: ${NS} }]
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: auditor-controller }
spec:
  serviceAccount: { namespace: ${NS}, name: auditor }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: auditors }
  hooks:
    customize: { webhook: { url: "https://127.0.0.1:1/customize" } }
    sync: { webhook: { url: "https://127.0.0.1:1/sync" } }
`,
    );
    for (const namespace of [allowed, walled])
      await admin.create(configMaps, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'secret-ish', namespace },
        data: {},
      } as KubeObject);
    // Outrigger itself could read the walled namespace: what stops the pass is the account's grants alone.
    expect((await outriggerClient().listAll(configMaps, { namespace: walled })).map((c) => c.metadata.name)).toContain('secret-ish');
    const cc = await served('auditor-controller');
    const run = async (name: string, namespace: string) => {
      const parent = await admin.create(auditors, {
        apiVersion: `${GROUP}/v1`,
        kind: 'Auditor',
        metadata: { name },
        spec: {},
      } as KubeObject);
      const sent: unknown[] = [];
      const hooks = {
        call: (_hook: unknown, request: { related?: unknown; finalizing?: boolean }) => {
          if (request.finalizing === undefined)
            return Promise.resolve({ relatedResources: [{ apiVersion: 'v1', resource: 'configmaps', namespace }] });
          sent.push(request.related);
          return Promise.resolve({ status: { ok: true } });
        },
      };
      const result = await syncDefinition({ kube: actingAs(outriggerClient(), cc!), hooks: hooks as unknown as Hooks }, cc!, {
        cluster: 'it',
        group: GROUP,
        kind: 'Auditor',
        name,
        uid: parent.metadata.uid ?? '',
      });
      return { result, sent };
    };
    // The namespace it may read: the ConfigMap is related, keyed namespace/name (a cluster-scoped parent).
    const ok = await run(`audit-${allowed}`, allowed);
    expect(ok.result.problems).toEqual([]);
    expect(Object.keys((ok.sent[0] as Record<string, object>)['ConfigMap.v1']!)).toEqual([`${allowed}/secret-ish`]);
    // The walled one: Forbidden, naming the rule; the sync hook is not called, the condition says why.
    const walledRun = await run(`audit-${walled}`, walled);
    expect(walledRun.result.problems).toEqual([
      expect.objectContaining({ reason: 'Forbidden', message: expect.stringContaining(`may not list configmaps in namespace ${walled}`) }),
    ]);
    expect(walledRun.sent).toEqual([]);
    const status = (await admin.get(auditors, { name: `audit-${walled}` })).status as { conditions?: Array<{ reason: string }> };
    expect(status.conditions?.[0]?.reason).toBe('Forbidden');
  });
});

test("a DecoratorController's customize hook is asked with the object as parent, and its sync hook is sent the related objects by name", async () => {
  const ns = await createNamespace('dc-related');
  await applyManifests(
    admin,
    `apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'decorator',
  [`{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "patch"] }`],
  'decoratorcontroller/related-decorator',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: related-decorator }
spec:
  serviceAccount: { namespace: ${NS}, name: decorator }
  resources: [{ apiVersion: v1, resource: configmaps, labelSelector: { matchLabels: { decorate: "yes" } } }]
  hooks:
    customize: { webhook: { url: "https://127.0.0.1:1/customize" } }
    sync: { webhook: { url: "https://127.0.0.1:1/sync" } }
`,
  );
  const cache = clusterCache<CompositeSet>(0);
  const kube = outriggerClient();
  const dc = await eventually(async () => {
    forgetDiscovery(kube);
    return (await listCompositeSet(kube, 'it', cache)).decorators.find((d) => d.name === 'related-decorator');
  });
  const make = (name: string, labels: Record<string, string>) =>
    admin.create(configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: ns, labels },
      data: { v: name },
    } as KubeObject);
  await make('source', {});
  const target = await make('target', { decorate: 'yes' });
  const requests: Array<Record<string, unknown>> = [];
  const hooks = {
    call: (_hook: unknown, request: Record<string, unknown>) => {
      requests.push(request);
      return Promise.resolve(
        request.finalizing === undefined
          ? { relatedResources: [{ apiVersion: 'v1', resource: 'configmaps', names: ['source', 'missing'] }] }
          : { labels: { decorated: 'yes' } },
      );
    },
  };
  const result = await syncDefinition({ kube: actingAs(outriggerClient(), dc), hooks: hooks as unknown as Hooks }, dc, {
    cluster: 'it',
    group: '',
    kind: 'ConfigMap',
    namespace: ns,
    name: 'target',
    uid: target.metadata.uid ?? '',
  });
  expect(result.problems).toEqual([]);
  expect((requests[0]!.parent as KubeObject).metadata.name).toBe('target');
  const related = requests[1]!.related as Record<string, Record<string, KubeObject>>;
  expect(Object.keys(related['ConfigMap.v1']!)).toEqual(['source']);
  expect((await admin.get(configMaps, { name: 'target', namespace: ns })).metadata.labels?.decorated).toBe('yes');
});
