// The router across teams on the real apiserver (docs/controllers/ownership-and-routing.md#one-definition-cannot-stop-anothers-routing):
// two CompositeControllers own ConfigMaps; Outrigger was granted the documented list and watch on one team's
// kinds and not on the other's. An orphan ConfigMap's event still reaches the first team's parent, and the
// refusal is logged naming the second team's kind, which alone goes without the event.
import { controllerSources } from '../../functions/controllers.ts';
import { listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { routeBatch } from '../../functions/router/route.ts';
import { Clusters } from '../../shared/clusters.ts';
import { makeEnvelope } from '../../shared/envelope/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import type { SyncSink } from '../../shared/lambda/sync-sink.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testCluster } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, impersonatedAccount } from '../testbed/rbac.ts';
import { envelopeRecord } from './sqs-records.ts';

const GROUP = 'router-tenants.outrigger.test';
const widgets = gvr(GROUP, 'v1', 'widgets');
const lockers = gvr(GROUP, 'v1', 'lockers');
const compositeControllers = gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers');
const NS = 'outrigger-router-tenants';
const admin = adminClient();

/** A team's CompositeController owning ConfigMaps, acting as a ServiceAccount of its own that may read its parents. */
const team = (name: string, resource: string) => `${impersonatedAccount(
  NS,
  name,
  [
    `{ apiGroups: ["${GROUP}"], resources: ["${resource}"], verbs: ["get", "list", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["${resource}/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "create", "patch", "delete"] }`,
  ],
  `compositecontroller/${name}-controller`,
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${name}-controller }
spec:
  serviceAccount: { namespace: ${NS}, name: ${name} }
  parentResource: { apiVersion: ${GROUP}/v1, resource: ${resource} }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { webhook: { url: "http://127.0.0.1:9/sync" } } }
`;

beforeAll(async () => {
  await applyManifests(
    admin,
    `${openCrd(GROUP, 'Widget', 'widgets')}---
${openCrd(GROUP, 'Locker', 'lockers')}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
# The documented grant for the widget team's kinds (docs/controllers/compositecontroller.md); none for lockers.
${controllersGrant('outrigger-router-tenants-test', [
  `{ apiGroups: ["${GROUP}"], resources: ["widgets"], verbs: ["get", "list", "watch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"] }`,
])}---
${team('widget', 'widgets')}---
${team('locker', 'lockers')}`,
  );
  // Both definitions are served (their ServiceAccounts may list their parents) before anything is routed.
  const cache = clusterCache<CompositeSet>(0);
  const kube = outriggerClient();
  await eventually(async () => {
    forgetDiscovery(kube);
    const set = await listCompositeSet(kube, 'it', cache);
    return ['widget-controller', 'locker-controller'].every((n) => set.composites.some((c) => c.name === n)) ? true : undefined;
  }, 30_000);
}, 60_000);

afterAll(async () => {
  for (const name of ['widget-controller', 'locker-controller']) await admin.delete(compositeControllers, { name }).catch(() => undefined);
});

class MemorySyncSink implements SyncSink {
  readonly sent: Array<{ target: string; request: SyncRequest }> = [];
  send(target: string, requests: SyncRequest[]): Promise<void> {
    for (const request of requests) this.sent.push({ target, request });
    return Promise.resolve();
  }
}

test('trust boundary: one definition Outrigger may not list does not stop routing for another', async () => {
  const ns = await createNamespace('router-tenants');
  const parent = (r: typeof widgets, kind: string) =>
    admin.create(r, {
      apiVersion: `${GROUP}/v1`,
      kind,
      metadata: { name: 'p', namespace: ns },
      spec: { selector: { matchLabels: { app: 'shared' } } },
    } as KubeObject);
  const widget = await parent(widgets, 'Widget');
  await parent(lockers, 'Locker');
  // An orphan both teams' parents select: each may adopt it.
  const orphan = await admin.create(gvr('', 'v1', 'configmaps'), {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'orphan', namespace: ns, labels: { app: 'shared' } },
  } as KubeObject);
  const envelope = makeEnvelope({
    cluster: 'it',
    type: 'added',
    object: { ...orphan, apiVersion: 'v1', kind: 'ConfigMap' },
    source: 'test',
  });
  const sink = new MemorySyncSink();
  const errors: Array<Record<string, unknown>> = [];
  // The router reads the definitions as they are now.
  for (const s of controllerSources) s.forget?.('it');
  const out = await routeBatch(
    { Records: [envelopeRecord(envelope)] },
    {
      clusters: new Clusters([testCluster('it')]),
      sources: controllerSources,
      sink,
      deadLetter: () => new MemoryDeadLetterSink(),
      queueCluster: () => 'it',
      log: (level, message, fields) => {
        if (level === 'error') errors.push({ message, ...fields });
      },
    },
  );
  expect(out.batchItemFailures).toEqual([]);
  expect(sink.sent.map((s) => `${s.request.key.kind}/${s.request.key.namespace ?? ''}/${s.request.key.name}/${s.request.key.uid}`)).toEqual(
    [`Widget/${ns}/p/${widget.metadata.uid ?? ''}`],
  );
  // The refusal is the locker team's, named in the log and the count of refused routes. Other files' definitions on
  // the shared bed that Outrigger may not list are refused the same way, each named.
  expect(out.stats.refused).toBe(errors.length);
  expect(errors).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        definition: 'CompositeController/locker-controller',
        kind: `Locker.${GROUP}`,
        namespace: ns,
        error: expect.stringContaining('403 Forbidden') as unknown,
      }),
    ]),
  );
  for (const e of errors) expect(e.error).toEqual(expect.stringContaining('403 Forbidden'));
}, 60_000);
