// Trust boundary: definitions of different teams on one parent kind (docs/operations/security.md#one-definitions-hook-and-anothers-pass).
// One request for a parent served by three definitions, on the real apiserver and DynamoDB Local: team A's
// DecoratorController, whose hook never answers while the test holds it, and team B's MapController and
// DecoratorController, whose hooks answer at once. B's passes write their outputs and attachments while A's hook
// is still held: A's hook takes neither their time nor their turn.
import { createServer, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { listMapControllers, mapControllerFor, type MapControllerSet } from '../../functions/map/controllers.ts';
import { serveRequest } from '../../functions/metacontroller/handler.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import {
  adminClient,
  createNamespace,
  deleteMapControllersCalling,
  eventually,
  outriggerClient,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, impersonatedAccount, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';

const GROUP = 'isolation.outrigger.test';
const NS = 'outrigger-isolation';
const shareds = gvr(GROUP, 'v1', 'shareds');
const configMaps = gvr('', 'v1', 'configmaps');
const decoratorControllers = gvr('metacontroller.k8s.io', 'v1alpha1', 'decoratorcontrollers');

let server: Server;
let url: string;
/** Team A's hook calls, held until the test answers them. */
const held: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.url === '/hang') return void held.push(res);
      const r = JSON.parse(body) as { parent?: KubeObject; object?: KubeObject; input?: KubeObject };
      const answer =
        req.url === '/map'
          ? { outputs: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${r.input?.metadata.name ?? ''}-out` }, data: {} }] }
          : { attachments: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${r.object?.metadata.name ?? ''}-b` }, data: {} }] };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(adminClient(), MAP_TEST_IDENTITY);
  const decorator = (name: string, path: string) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: ${name} }
spec:
  serviceAccount: { namespace: ${NS}, name: decorating }
  resources: [{ apiVersion: ${GROUP}/v1, resource: shareds }]
  attachments: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { webhook: { url: "${url}${path}", timeout: 60s }, retries: 0 } }
`;
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'Shared', 'shareds')}---
${controllersGrant('outrigger-isolation-test', [
  `{ apiGroups: ["${GROUP}"], resources: ["shareds"], verbs: ["get", "list", "watch", "patch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["shareds/status"], verbs: ["patch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'decorating',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["shareds"], verbs: ["get", "list", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["shareds/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "create", "patch", "delete"] }`,
  ],
  'decoratorcontroller/isolation-a-hangs, decoratorcontroller/isolation-b-answers',
)}
---${decorator('isolation-a-hangs', '/hang')}---${decorator('isolation-b-answers', '/attach')}---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: isolation-b }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: ${GROUP}/v1, resource: shareds }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { map: { webhook: { url: "${url}/map" }, retries: 0 } }
`,
  );
  const kube = outriggerClient();
  for (let i = 0; ; i += 1) {
    forgetDiscovery(kube);
    const decorators = (await listCompositeSet(kube, 'it', clusterCache<CompositeSet>(0))).decorators;
    const map = mapControllerFor(await listMapControllers(kube, 'it', clusterCache<MapControllerSet>(0)), GROUP, 'Shared');
    if (map && decorators.length >= 2) break;
    if (i > 100) throw new Error('the definitions are not served');
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  for (const res of held) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  await deleteMapControllersCalling(url);
  for (const name of ['isolation-a-hangs', 'isolation-b-answers'])
    await adminClient()
      .delete(decoratorControllers, { name })
      .catch(() => undefined);
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

test("trust boundary: one definition's hanging hook neither delays nor fails another definition's pass on the same parent", async () => {
  const ns = await createNamespace('isolation');
  const admin = adminClient();
  await admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'in', namespace: ns, labels: { app: 'in' } } });
  const parent = await admin.create(shareds, {
    apiVersion: `${GROUP}/v1`,
    kind: 'Shared',
    metadata: { name: uniqueName('s'), namespace: ns },
    spec: { selector: { matchLabels: { app: 'in' } } },
  } as KubeObject);
  const name = parent.metadata.name ?? '';
  const budgetMs = 60_000;
  const serving = serveRequest(
    makeSyncRequest({ cluster: 'it', group: GROUP, kind: 'Shared', namespace: ns, name, uid: parent.metadata.uid ?? '' }, ['event']),
    Date.now(),
    {
      kube: outriggerClient(),
      state: testState(),
      syncSink: { send: () => Promise.resolve() },
      hooks: new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
      log: () => undefined,
      budget: { deadline: Date.now() + budgetMs, budgetMs },
      caches: { map: clusterCache<MapControllerSet>(0), composite: clusterCache<CompositeSet>(0) },
    },
  );
  // Team B's MapController output and DecoratorController attachment, written while team A's hook is held.
  const written = await eventually(async () => {
    const names = (await admin.listAll(configMaps, { namespace: ns })).map((c) => c.metadata.name);
    return names.includes('in-out') && names.includes(`${name}-b`) ? names : undefined;
  });
  expect(written).toEqual(expect.arrayContaining(['in-out', `${name}-b`]));
  expect(held).toHaveLength(1);
  // A's hook answers at last: the request ends without a problem of B's.
  held.shift()!.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  await serving;
}, 60_000);
