// Hook version v2 (docs/controllers/compositecontroller.md#hook-versions) on the real apiserver: a v2
// CompositeController's hook is sent its children in the uniform map (`namespace/name`, whatever the parent's
// scope) and its answers are read strictly (an unknown or twice-named field is a malformed answer, the parent
// Synced=False); a v2 DecoratorController's hook is sent `object` and `attachments`, as Metacontroller's.
// Beside it, where Outrigger must do as Metacontroller does for either kind (docs/getting-started/from-metacontroller.md).
/* eslint-disable max-lines -- the v2 composite and decorator scenarios share one hook server and its per-path answers, set up once in beforeAll */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterCache } from '../../functions/cluster-cache.ts';
import { compositeControllers, decoratorControllers, type CompositeSet } from '../../functions/composite/controllers.ts';
import { serveCompositeRequest, type CompositeServeContext } from '../../functions/composite/serve.ts';
import { Hooks } from '../../shared/hooks/index.ts';
import { gvr, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { makeSyncRequest } from '../../shared/lambda/sync-request.ts';
import type { Condition } from '../../shared/metacontroller/conditions.ts';
import { adminClient, createNamespace, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { openCrd } from '../testbed/crds.ts';
import { impersonatedAccount } from '../testbed/rbac.ts';

const GROUP = 'hook-v2.outrigger.test';
const sets = gvr(GROUP, 'v1', 'v2sets');
const things = gvr(GROUP, 'v1', 'v2things');
const lists = gvr(GROUP, 'v1', 'v2lists');
const v1Lists = gvr(GROUP, 'v1', 'v1lists');
const configMaps = gvr('', 'v1', 'configmaps');

let server: Server;
let url: string;
const received: Array<{ path: string; body: Record<string, unknown> }> = [];
/** The composite hook's answer's text, given its request. */
let compositeAnswer: (req: { parent: KubeObject; children: Record<string, Record<string, KubeObject>> }) => string;
/** The ConfigMap a decorator attaches to its object. */
const attachment = ({ object }: { object: KubeObject }) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: `${object.metadata.name ?? ''}-attached`, namespace: object.metadata.namespace },
  data: {},
});
/** The customize hook's rule (beside apiVersion and resource): what the parent's spec asks for. */
const customizeRule = ({ parent }: { parent: KubeObject }) => (parent.spec as { rule?: object } | undefined)?.rule ?? {};

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      received.push({ path: req.url ?? '', body });
      const answer =
        req.url === '/composite'
          ? compositeAnswer(body as Parameters<typeof compositeAnswer>[0])
          : req.url?.startsWith('/customize')
            ? JSON.stringify({
                relatedResources: [{ apiVersion: 'v1', resource: 'configmaps', ...customizeRule(body as { parent: KubeObject }) }],
              })
            : req.url === '/listed'
              ? JSON.stringify({ status: { related: Object.keys((body.related as Record<string, object>)['ConfigMap.v1'] ?? {}).sort() } })
              : req.url === '/fail'
                ? undefined
                : req.url === '/attach'
                  ? JSON.stringify({ attachments: [attachment(body as { object: KubeObject })] })
                  : req.url === '/detach'
                    ? JSON.stringify({ attachments: [], finalized: true })
                    : JSON.stringify({ labels: { decorated: 'v2' } });
      if (answer === undefined) res.writeHead(500).end('boom');
      else res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await applyManifests(
    adminClient(),
    [
      openCrd(GROUP, 'V2set', 'v2sets'),
      openCrd(GROUP, 'V2thing', 'v2things'),
      openCrd(GROUP, 'V2list', 'v2lists'),
      openCrd(GROUP, 'V1list', 'v1lists'),
    ].join('---\n'),
  );
}, 120_000);

afterAll(() => new Promise<void>((r) => server.close(() => r())));

const ctx = (): CompositeServeContext => ({
  kube: outriggerClient(),
  state: testState(),
  syncSink: { send: () => Promise.resolve() },
  hooks: new Hooks({ allowLoopbackHttp: true, webhookAllow: ['127.0.0.1'], minRetryDelayMs: 10 }),
  controllers: clusterCache<CompositeSet>(0),
  log: () => undefined,
});

/** One pass of the parent; a failed one (its retry) is the parent's Synced condition's to tell. */
async function pass(o: KubeObject): Promise<void> {
  const key = {
    cluster: 'v2',
    group: GROUP,
    kind: o.kind ?? '',
    namespace: o.metadata.namespace,
    name: o.metadata.name ?? '',
    uid: o.metadata.uid ?? '',
  };
  await serveCompositeRequest(makeSyncRequest(key, []), Date.now(), ctx()).catch(() => undefined);
}

test('a v2 CompositeController gets the uniform map and its answers are read strictly; a v2 DecoratorController gets object and attachments', async () => {
  const admin = adminClient();
  const ns = await createNamespace('hookv2');
  const composite = uniqueName('v2composite');
  const decorator = uniqueName('v2decorator');
  await applyManifests(
    admin,
    `${impersonatedAccount(
      ns,
      'v2',
      [
        `{ apiGroups: ["${GROUP}"], resources: ["v2sets", "v2things"], verbs: ["get", "list", "watch", "patch"] }`,
        `{ apiGroups: ["${GROUP}"], resources: ["v2sets/status", "v2things/status"], verbs: ["patch"] }`,
        `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
      ],
      'compositecontroller/*, decoratorcontroller/*',
    )}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${composite} }
spec:
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: v2sets }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: v2 }
  hooks: { sync: { version: v2, webhook: { url: "${url}/composite" }, retries: 0 } }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: ${decorator} }
spec:
  resources: [{ apiVersion: ${GROUP}/v1, resource: v2things }]
  attachments: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: v2 }
  hooks: { sync: { version: v2, webhook: { url: "${url}/decorator" }, retries: 0 } }
`,
  );
  try {
    compositeAnswer = (req) =>
      JSON.stringify({
        status: { seen: Object.keys(req.children['ConfigMap.v1'] ?? {}) },
        children: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${req.parent.metadata.name ?? ''}-child` }, data: {} }],
      });
    const parent = {
      ...(await admin.create(sets, { apiVersion: `${GROUP}/v1`, kind: 'V2set', metadata: { name: 'set', namespace: ns } } as KubeObject)),
      kind: 'V2set',
    };
    await pass(parent);
    expect(await admin.find(configMaps, { name: 'set-child', namespace: ns })).toBeDefined();
    await pass(parent);
    // v2: the child of a namespaced parent is keyed namespace/name (v1 would key it by name).
    const last = received.filter((r) => r.path === '/composite').at(-1)!.body as { children: Record<string, Record<string, unknown>> };
    expect(Object.keys(last.children)).toEqual(['ConfigMap.v1']);
    expect(Object.keys(last.children['ConfigMap.v1']!)).toEqual([`${ns}/set-child`]);
    expect((await admin.get(sets, { name: 'set', namespace: ns })).status).toMatchObject({ seen: [`${ns}/set-child`] });

    // Strict (v2's default): an unknown field, then a field named twice, is a malformed answer; nothing is written.
    const synced = async () =>
      ((await admin.get(sets, { name: 'set', namespace: ns })).status as { conditions?: Condition[] }).conditions?.find(
        (c) => c.type === 'Synced',
      );
    compositeAnswer = () => JSON.stringify({ children: [], resyncAfterSecond: 5 });
    await pass(parent);
    expect(await synced()).toMatchObject({
      status: 'False',
      reason: 'HookMalformedAnswer',
      message: expect.stringContaining('resyncAfterSecond is not a known field') as string,
    });
    compositeAnswer = () => '{"children": [], "children": []}';
    await pass(parent);
    expect(await synced()).toMatchObject({
      status: 'False',
      reason: 'HookMalformedAnswer',
      message: expect.stringContaining('a field twice') as string,
    });
    expect(await admin.find(configMaps, { name: 'set-child', namespace: ns })).toBeDefined();

    const thing = {
      ...(await admin.create(things, {
        apiVersion: `${GROUP}/v1`,
        kind: 'V2thing',
        metadata: { name: 'thing', namespace: ns },
      } as KubeObject)),
      kind: 'V2thing',
    };
    await pass(thing);
    const decorated = received.filter((r) => r.path === '/decorator').at(-1)!.body;
    expect(Object.keys(decorated)).toEqual(['controller', 'object', 'attachments', 'related', 'finalizing']);
    expect(decorated.attachments).toEqual({ 'ConfigMap.v1': {} });
    expect((await admin.get(things, { name: 'thing', namespace: ns })).metadata.labels).toMatchObject({ decorated: 'v2' });
  } finally {
    await admin.delete(compositeControllers, { name: composite }).catch(() => undefined);
    await admin.delete(decoratorControllers, { name: decorator }).catch(() => undefined);
  }
});

test("a v2 customize hook relates a namespaced parent to objects in other namespaces; a v1 one's refused rule is the parent's Synced=False", async () => {
  const admin = adminClient();
  const ns = await createNamespace('hookv2-rel');
  const source = await createNamespace('hookv2-src');
  const other = await createNamespace('hookv2-other');
  const v2 = uniqueName('v2related');
  const v1 = uniqueName('v1related');
  const cm = (namespace: string, name: string) =>
    admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels: { feed: ns } } } as KubeObject);
  // A name no other file's object has: a v2 rule by names alone looks in every namespace of the shared bed.
  const b = uniqueName('hookv2-b');
  await cm(source, 'a');
  await cm(other, b);
  await applyManifests(
    admin,
    `${impersonatedAccount(
      ns,
      'rel',
      [
        `{ apiGroups: ["${GROUP}"], resources: ["v2lists", "v1lists"], verbs: ["get", "list", "watch", "patch"] }`,
        `{ apiGroups: ["${GROUP}"], resources: ["v2lists/status", "v1lists/status"], verbs: ["patch"] }`,
        `{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch"] }`,
      ],
      'compositecontroller/*',
    )}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${v2} }
spec:
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: v2lists }
  serviceAccount: { namespace: ${ns}, name: rel }
  hooks:
    customize: { version: v2, webhook: { url: "${url}/customize" } }
    sync: { version: v2, webhook: { url: "${url}/listed" }, retries: 0 }
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: ${v1} }
spec:
  generateSelector: true
  parentResource: { apiVersion: ${GROUP}/v1, resource: v1lists }
  serviceAccount: { namespace: ${ns}, name: rel }
  hooks:
    customize: { webhook: { url: "${url}/customize" } }
    sync: { webhook: { url: "${url}/listed" }, retries: 0 }
`,
  );
  const list = async (name: string, version: string, rule: object) => ({
    ...(await admin.create(version === 'v2' ? lists : v1Lists, {
      apiVersion: `${GROUP}/v1`,
      kind: version === 'v2' ? 'V2list' : 'V1list',
      metadata: { name, namespace: ns },
      spec: { rule },
    } as KubeObject)),
    kind: version === 'v2' ? 'V2list' : 'V1list',
  });
  const statusOf = async (name: string) =>
    (await admin.get(name === 'refused' ? v1Lists : lists, { name, namespace: ns })).status as
      { related?: string[]; conditions?: Condition[] } | undefined;
  try {
    const labels = { labelSelector: { matchLabels: { feed: ns } } };
    // v2: every namespace when the rule names none, or the one it names, whatever the parent's namespace.
    await pass(await list('everywhere', 'v2', labels));
    expect((await statusOf('everywhere'))?.related).toEqual([`${other}/${b}`, `${source}/a`]);
    await pass(await list('there', 'v2', { ...labels, namespace: source }));
    expect((await statusOf('there'))?.related).toEqual([`${source}/a`]);
    await pass(await list('named', 'v2', { names: [b] }));
    expect((await statusOf('named'))?.related).toEqual([`${other}/${b}`]);
    // v1 keeps its scope: the refusal is on the parent's status, which the definition owns.
    await pass(await list('refused', 'v1', { ...labels, namespace: source }));
    expect((await statusOf('refused'))?.conditions?.find((c) => c.type === 'Synced')).toMatchObject({
      status: 'False',
      reason: 'HookMalformedAnswer',
      message: expect.stringContaining(`may relate objects in ${ns} only`) as string,
    });
  } finally {
    await admin.delete(compositeControllers, { name: v2 }).catch(() => undefined);
    await admin.delete(compositeControllers, { name: v1 }).catch(() => undefined);
  }
});

test("a failing DecoratorController writes no condition into its object's status, only a Warning Event", async () => {
  const admin = adminClient();
  const ns = await createNamespace('hookv2-fail');
  const decorator = uniqueName('failing');
  await applyManifests(
    admin,
    `${impersonatedAccount(
      ns,
      'fail',
      [
        `{ apiGroups: ["${GROUP}"], resources: ["v2things"], verbs: ["get", "list", "watch", "patch"] }`,
        `{ apiGroups: ["${GROUP}"], resources: ["v2things/status"], verbs: ["patch"] }`,
        `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"] }`,
      ],
      'decoratorcontroller/*',
    )}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: ${decorator} }
spec:
  resources: [{ apiVersion: ${GROUP}/v1, resource: v2things, labelSelector: { matchLabels: { failing: "yes" } } }]
  attachments: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: fail }
  hooks: { sync: { webhook: { url: "${url}/fail" }, retries: 0 } }
`,
  );
  try {
    const thing = {
      ...(await admin.create(things, {
        apiVersion: `${GROUP}/v1`,
        kind: 'V2thing',
        metadata: { name: 'owned-elsewhere', namespace: ns, labels: { failing: 'yes' } },
        status: { mine: 'the owner' },
      } as KubeObject)),
      kind: 'V2thing',
    };
    await pass(thing);
    await pass(thing);
    expect((await admin.get(things, { name: 'owned-elsewhere', namespace: ns })).status).toBeUndefined();
    const events = await admin.listAll(gvr('events.k8s.io', 'v1', 'events'), { namespace: ns });
    expect(events.map((e) => (e as unknown as { reason: string }).reason)).toContain('HookHTTPError');
  } finally {
    await admin.delete(decoratorControllers, { name: decorator }).catch(() => undefined);
  }
});

test('a decorated object that stops matching is finalized: the finalize hook called, its attachments deleted, the finalizer gone', async () => {
  const admin = adminClient();
  const ns = await createNamespace('hookv2-unmatch');
  const decorator = uniqueName('unmatch');
  await applyManifests(
    admin,
    `${impersonatedAccount(
      ns,
      'unmatch',
      [
        `{ apiGroups: ["${GROUP}"], resources: ["v2things"], verbs: ["get", "list", "watch", "patch"] }`,
        `{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch", "create", "patch", "delete"] }`,
      ],
      'decoratorcontroller/*',
    )}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: ${decorator} }
spec:
  resources: [{ apiVersion: ${GROUP}/v1, resource: v2things, labelSelector: { matchLabels: { attach: "yes" } } }]
  attachments: [{ apiVersion: v1, resource: configmaps }]
  serviceAccount: { namespace: ${ns}, name: unmatch }
  hooks:
    sync: { webhook: { url: "${url}/attach" }, retries: 0 }
    finalize: { webhook: { url: "${url}/detach" }, retries: 0 }
`,
  );
  const detaches = () => received.filter((r) => r.path === '/detach').length;
  try {
    const created = await admin.create(things, {
      apiVersion: `${GROUP}/v1`,
      kind: 'V2thing',
      metadata: { name: 'optin', namespace: ns, labels: { attach: 'yes' } },
    } as KubeObject);
    await pass({ ...created, kind: 'V2thing' });
    expect(await admin.find(configMaps, { name: 'optin-attached', namespace: ns })).toBeDefined();
    const finalizer = `decorator.outrigger.dev/${decorator}`;
    expect((await admin.get(things, { name: 'optin', namespace: ns })).metadata.finalizers).toContain(finalizer);
    // The label goes: the next pass calls the finalize hook, whose empty answer deletes the attachment.
    const before = detaches();
    const unlabelled = await admin.patch(things, { name: 'optin', namespace: ns }, { metadata: { labels: { attach: null } } }, 'merge');
    await pass({ ...unlabelled, kind: 'V2thing' });
    expect(detaches()).toBe(before + 1);
    const detach = received.filter((r) => r.path === '/detach').at(-1)!.body;
    expect(detach).toMatchObject({ finalizing: true, attachments: { 'ConfigMap.v1': { 'optin-attached': expect.anything() as unknown } } });
    const cm = await admin.find(configMaps, { name: 'optin-attached', namespace: ns });
    expect(cm === undefined || cm.metadata.deletionTimestamp !== undefined).toBe(true);
    expect((await admin.get(things, { name: 'optin', namespace: ns })).metadata.finalizers ?? []).not.toContain(finalizer);
    // Finalized: a later pass calls no hook.
    await pass({ ...unlabelled, kind: 'V2thing' });
    expect(detaches()).toBe(before + 1);
  } finally {
    await admin.delete(decoratorControllers, { name: decorator }).catch(() => undefined);
  }
});

test("Metacontroller's v1alpha1 fields apply: endpointConfigs is Ready=False naming it, the webhook's key and type fields are served", async () => {
  const admin = adminClient();
  const ns = await createNamespace('hookv2-fields');
  const name = uniqueName('fields');
  const auth = `authorization: { type: Token, secretRef: { name: tok, namespace: ${ns}, key: token } }`;
  const manifest = (withEndpoints: boolean) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: ${name} }
spec:
  resources: [{ apiVersion: ${GROUP}/v1, resource: v2things, ignoreStatusChanges: true, labelSelector: { matchLabels: { fields: "yes" } } }]
  serviceAccount: { namespace: ${ns}, name: fields }
  hooks:
    sync: { webhook: { url: "${url}/decorator", ${auth} } }
    finalize:
      webhook:
        url: "${url}/detach"
        basicAuth: { secretRef: { name: basic, namespace: ${ns} }, usernameKey: user, passwordKey: pass }
${
  withEndpoints
    ? `  endpointConfigs:
    - host: hooks.example.com
      caBundle: { inline: x }
      clientTLS: { secretRef: { name: tls, namespace: ${ns} }, certKey: c, privateKeyKey: k }
      ${auth}`
    : ''
}`;
  const ready = async () => {
    const d = await admin.get(decoratorControllers, { name });
    await serveCompositeRequest(
      makeSyncRequest({ cluster: 'v2', group: 'metacontroller.k8s.io', kind: 'DecoratorController', name, uid: d.metadata.uid ?? '' }, []),
      Date.now(),
      ctx(),
    );
    return ((await admin.get(decoratorControllers, { name })).status as { conditions?: Condition[] } | undefined)?.conditions?.find(
      (c) => c.type === 'Ready',
    );
  };
  try {
    // Applied as they are (the apiserver's strict decoding refused them before).
    await applyManifests(admin, `${impersonatedAccount(ns, 'fields', [], 'decoratorcontroller/*')}\n---${manifest(true)}`);
    expect(await ready()).toMatchObject({
      status: 'False',
      reason: 'UnsupportedField',
      message: expect.stringContaining('spec.endpointConfigs') as string,
    });
    await applyManifests(admin, manifest(false));
    expect((await ready())?.reason).not.toBe('UnsupportedField');
  } finally {
    await admin.delete(decoratorControllers, { name }).catch(() => undefined);
  }
});
