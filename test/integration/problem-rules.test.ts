// One table of problem rules for every Metacontroller-style definition (shared/metacontroller/problems.ts): a
// MapController and a CompositeController, served by their request handlers on the real apiserver and DynamoDB
// Local, each answered by one hook server in the ways that make each reason; for every row, the request is retried
// exactly when the table says a retry may cure it, and a Warning Event names the reason exactly when it says so.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { listCompositeSet, type CompositeSet } from '../../functions/composite/controllers.ts';
import { serveCompositeRequest } from '../../functions/composite/serve.ts';
import { listMapControllers, mapControllerFor, type MapControllerSet } from '../../functions/map/controllers.ts';
import { serveMapRequest } from '../../functions/map/handler.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { forgetDiscovery, gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { RetryLater } from '../../shared/lambda/retry.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import { PROBLEM_RULES, type ProblemReason } from '../../shared/metacontroller/problems.ts';
import { adminClient, createNamespace, deleteMapControllersCalling, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { controllersGrant, impersonatedAccount, MAP_TEST_IDENTITY } from '../testbed/rbac.ts';

const GROUP = 'problem-rules.outrigger.test';
const NS = 'outrigger-problem-rules';
const configMaps = gvr('', 'v1', 'configmaps');
const events = gvr('events.k8s.io', 'v1', 'events');
const kinds = { Mapped: gvr(GROUP, 'v1', 'mappeds'), Composed: gvr(GROUP, 'v1', 'composeds') };
const compositeControllers = gvr('metacontroller.k8s.io', 'v1alpha1', 'compositecontrollers');

/** What the hook answers: a status and a body. */
let reply: { status: number; headers?: Record<string, string>; body: string } = { status: 200, body: '{}' };
let server: Server;
let url: string;

const json = (value: unknown) => ({ status: 200, body: JSON.stringify(value) });
const aSecret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'not-listed' }, stringData: { a: 'b' } };
/** Each reason the hook server can make, as each kind's hook is answered into it. */
const rows: Array<{ reason: ProblemReason; map?: typeof reply; composite?: typeof reply }> = [
  { reason: 'HookHTTPError', map: { status: 500, body: 'boom' }, composite: { status: 500, body: 'boom' } },
  {
    reason: 'HookRefused',
    map: { status: 302, headers: { location: 'http://127.0.0.1:1/elsewhere' }, body: '' },
    composite: { status: 302, headers: { location: 'http://127.0.0.1:1/elsewhere' }, body: '' },
  },
  { reason: 'HookMalformedAnswer', map: { status: 200, body: '{not json' }, composite: { status: 200, body: '{not json' } },
  { reason: 'InvalidOutput', map: json({ outputs: [aSecret] }) },
  { reason: 'InvalidChild', composite: json({ children: [aSecret] }) },
];

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(reply.body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(adminClient(), MAP_TEST_IDENTITY);
  await applyManifests(
    adminClient(),
    `${openCrd(GROUP, 'Mapped', 'mappeds')}---
${openCrd(GROUP, 'Composed', 'composeds')}---
${controllersGrant('outrigger-problem-rules-test', [
  `{ apiGroups: ["${GROUP}"], resources: ["mappeds", "composeds"], verbs: ["get", "list", "watch", "patch"] }`,
  `{ apiGroups: ["${GROUP}"], resources: ["mappeds/status", "composeds/status"], verbs: ["patch"] }`,
  `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
])}---
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
${impersonatedAccount(
  NS,
  'composer',
  [
    `{ apiGroups: ["${GROUP}"], resources: ["composeds"], verbs: ["get", "list", "patch"] }`,
    `{ apiGroups: ["${GROUP}"], resources: ["composeds/status"], verbs: ["patch"] }`,
    `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "create", "patch", "delete"] }`,
  ],
  'compositecontroller/problem-rules',
)}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: { name: problem-rules }
spec:
  serviceAccount: { namespace: outrigger-map-tests, name: mapper }
  parentResource: { apiVersion: ${GROUP}/v1, resource: mappeds }
  inputResources: [{ apiVersion: v1, resource: configmaps }]
  outputResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { map: { webhook: { url: "${url}/map" }, retries: 0 } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: problem-rules }
spec:
  serviceAccount: { namespace: ${NS}, name: composer }
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: composeds }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks: { sync: { webhook: { url: "${url}/sync" }, retries: 0 } }
`,
  );
  const kube = outriggerClient();
  for (let i = 0; ; i += 1) {
    forgetDiscovery(kube);
    const composites = (await listCompositeSet(kube, 'it', clusterCache<CompositeSet>(0))).composites;
    const map = mapControllerFor(await listMapControllers(kube, 'it', clusterCache<MapControllerSet>(0)), GROUP, 'Mapped');
    if (map && composites.some((c) => c.name === 'problem-rules')) break;
    if (i > 100) throw new Error('the definitions are not served');
    await new Promise((r) => setTimeout(r, 200));
  }
}, 60_000);

afterAll(async () => {
  await deleteMapControllersCalling(url);
  await adminClient()
    .delete(compositeControllers, { name: 'problem-rules' })
    .catch(() => undefined);
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const context = () => ({
  kube: outriggerClient(),
  state: testState(),
  syncSink: { send: () => Promise.resolve() },
  hooks: new Hooks({ minRetryDelayMs: 10, allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'] }),
  log: () => undefined,
});

/** Serves one request for a new parent of the kind; answers whether it was retried and the Warning Events' reasons. */
async function serve(kind: keyof typeof kinds): Promise<{ synced: string | undefined; retried: boolean; warnings: string[] }> {
  const ns = await createNamespace('rules');
  const admin = adminClient();
  // A MapController's input: one ConfigMap its parent selects.
  await admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'in', namespace: ns, labels: { app: 'in' } } });
  const parent = await admin.create(kinds[kind], {
    apiVersion: `${GROUP}/v1`,
    kind,
    metadata: { name: uniqueName('p'), namespace: ns },
    spec: { selector: { matchLabels: { app: 'in' } } },
  } as KubeObject);
  const request = makeSyncRequest(
    { cluster: 'it', group: GROUP, kind, namespace: ns, name: parent.metadata.name ?? '', uid: parent.metadata.uid ?? '' },
    ['event'],
  );
  let retried = false;
  try {
    if (kind === 'Mapped') await serveMapRequest(request, Date.now(), { ...context(), controllers: clusterCache<MapControllerSet>(0) });
    else await serveCompositeRequest(request, Date.now(), { ...context(), controllers: clusterCache<CompositeSet>(0) });
  } catch (err) {
    if (!(err instanceof RetryLater)) throw err;
    retried = true;
  }
  const warnings = (await admin.listAll(events, { namespace: ns }))
    .map((e) => e as unknown as { type: string; reason: string })
    .filter((e) => e.type === 'Warning')
    .map((e) => e.reason);
  const after = await admin.get(kinds[kind], { name: parent.metadata.name ?? '', namespace: ns });
  const conditions = (after.status as { conditions?: Array<{ type: string; reason: string }> } | undefined)?.conditions;
  return { synced: conditions?.find((c) => c.type === 'Synced')?.reason, retried, warnings };
}

describe.each([
  ['a MapController', 'Mapped', 'map'],
  ['a CompositeController', 'Composed', 'composite'],
] as const)('%s follows the one table of problem rules', (_name, kind, column) => {
  test.each(rows.filter((r) => r[column]).map((r) => [r.reason, r] as const))('%s', async (reason, row) => {
    reply = row[column]!;
    const seen = await serve(kind);
    const rule = PROBLEM_RULES[reason];
    expect({ synced: seen.synced, retried: seen.retried, warned: seen.warnings.includes(reason) }).toEqual({
      synced: reason,
      retried: rule.retried,
      warned: rule.warned,
    });
  });
});
