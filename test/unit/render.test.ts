// `outrigger render` (cli/render.ts; docs/reference/cli.md#outrigger-render): one CompositeController or
// DecoratorController pass from files, offline, with the hook a real webhook server on loopback or an answer file.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { compositeHookRequestSchema } from '../../shared/composite/request.ts';
import { renderCommand } from '../../cli/render.ts';

const dir = mkdtempSync(join(tmpdir(), 'outrigger-render-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const composite = (syncUrl: string) => `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: podset-controller }
spec:
  serviceAccount: { namespace: outrigger-system, name: podset }
  parentResource: { apiVersion: example.com/v1, resource: podsets }
  childResources:
  - { apiVersion: v1, resource: pods }
  - { apiVersion: v1, resource: configmaps, updateStrategy: { method: InPlace } }
  hooks:
    sync: { webhook: { url: "${syncUrl}" } }
    finalize: { webhook: { url: "${syncUrl}" } }
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: podsets.example.com }
spec:
  group: example.com
  scope: Namespaced
  names: { plural: podsets, kind: PodSet }
  versions: [{ name: v1, served: true, storage: true }]
`;
const parent = file(
  'parent.yaml',
  `apiVersion: example.com/v1
kind: PodSet
metadata: { name: web, namespace: team-a, uid: 6d1c0c52-parent }
spec: { replicas: 2, selector: { matchLabels: { app: web } } }
status: { replicas: 1 }
`,
);
// JSON, several documents: a YAML stream of JSON objects.
const children = file(
  'children.json',
  [
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web-0', labels: { app: 'web' } }, spec: { image: 'old' } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web', labels: { app: 'web' } }, data: { a: '1' } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web-9', labels: { app: 'web' } } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'other', labels: { app: 'other' } } },
    // An orphan (ownerReferences given, empty) the controller marked: adopted, as its labels match the parent's selector.
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'stray',
        labels: { app: 'web' },
        annotations: { 'composite.outrigger.dev/made-by': 'compositecontroller/podset-controller/podsets.example.com' },
        ownerReferences: [],
      },
    },
    // One it did not mark: never adopted, whatever the selector (docs/controllers/compositecontroller.md#adoption).
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'unmarked', labels: { app: 'web' }, ownerReferences: [] } },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'foreign',
        labels: { app: 'web' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'rs-uid', controller: true }],
      },
    },
  ]
    .map((o) => JSON.stringify(o))
    .join('\n---\n'),
);
const pod = (name: string, image: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels: { app: 'web' } },
  spec: { image },
});
const goodAnswer = {
  children: [
    pod('web-0', 'new'),
    pod('web-1', 'new'),
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web', labels: { app: 'web' } }, data: { a: '2' } },
  ],
  status: { replicas: 2 },
  resyncAfterSeconds: 30,
};

let server: Server;
let url: string;
const received: unknown[] = [];
let answer: unknown = goodAnswer;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sync`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

interface Rendered {
  hook: string;
  children: Record<string, unknown[]>;
  status?: unknown;
  metadata?: unknown;
  resyncAfterSeconds?: number;
  finalized?: boolean;
  finalizer?: unknown;
}

test('a CompositeController render calls its webhook on loopback and prints what the pass would write', async () => {
  const controller = file('composite.yaml', composite(url));
  answer = goodAnswer;
  received.length = 0;
  const out = load(await renderCommand(['--controller', controller, '--parent', parent, '--children', children])) as Rendered;

  // The hook got the request the pass builds: the claimed children, keyed by kind and name.
  expect(received).toHaveLength(1);
  const request = compositeHookRequestSchema(false).parse(received[0]);
  expect(Object.keys(request.children['Pod.v1']!).sort()).toEqual(['stray', 'web-0', 'web-9']);
  expect(Object.keys(request.children['ConfigMap.v1']!)).toEqual(['web']);

  expect(out.hook).toBe('sync');
  // A child written without ownerReferences is the parent's; one that no longer matches its selector is released.
  expect(out.children).toMatchObject({
    adopted: ['Pod team-a/stray'],
    released: ['Pod team-a/other'],
    ignored: ['Pod team-a/unmarked', 'Pod team-a/foreign'],
  });
  const created = out.children.create as Array<{
    metadata: { name: string; namespace: string; ownerReferences: unknown[]; annotations: Record<string, string> };
  }>;
  expect(created.map((c) => c.metadata.name)).toEqual(['web-1']);
  expect(created[0]!.metadata.namespace).toBe('team-a');
  expect(created[0]!.metadata.ownerReferences).toEqual([
    expect.objectContaining({ kind: 'PodSet', uid: '6d1c0c52-parent', controller: true }),
  ]);
  expect(created[0]!.metadata.annotations['composite.outrigger.dev/made-by']).toBe(
    'compositecontroller/podset-controller/podsets.example.com',
  );
  // By update strategy: the ConfigMap (InPlace) is updated; the changed Pod (OnDelete) is kept; web-9 is deleted.
  expect((out.children.update as Array<{ data: unknown }>).map((c) => c.data)).toEqual([{ a: '2' }]);
  expect(out.children.onDelete).toEqual(['Pod team-a/web-0']);
  // The adopted orphan is not answered: held, never deleted by the pass that adopts it.
  expect(out.children.delete).toEqual(['Pod team-a/web-9']);
  expect(out.children.held).toEqual(['Pod team-a/stray']);
  expect(out.status).toEqual({ replicas: 2 });
  expect(out.resyncAfterSeconds).toBe(30);
  // Its finalize hook: the pass puts the controller's finalizer on the parent.
  expect(out.finalizer).toEqual({ add: 'composite.outrigger.dev/podset-controller' });
});

test('--print-request prints the request without calling the hook; --finalizing sends the finalize hook its own', async () => {
  const controller = file('composite.yaml', composite(url));
  received.length = 0;
  const printed = load(await renderCommand(['--controller', controller, '--parent', parent, '--print-request', '-o', 'json'])) as {
    request: unknown;
  };
  expect(received).toHaveLength(0);
  expect(compositeHookRequestSchema(false).safeParse(printed.request).success).toBe(true);

  answer = { children: [], finalized: true };
  const out = load(
    await renderCommand(['--controller', controller, '--parent', parent, '--children', children, '--finalizing']),
  ) as Rendered;
  expect(compositeHookRequestSchema(true).safeParse(received[0]).success).toBe(true);
  expect(out).toMatchObject({ hook: 'finalize', finalized: true, finalizer: { remove: 'composite.outrigger.dev/podset-controller' } });
  // Being deleted, the parent adopts nothing: its own three children are sent, and the answer deletes them.
  expect(out.children.delete).toEqual(['Pod team-a/web-0', 'ConfigMap team-a/web', 'Pod team-a/web-9']);
});

test('a DecoratorController render takes the answer from --response: attachments, labels and annotations', async () => {
  const controller = file(
    'decorator.yaml',
    `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: { name: expose }
spec:
  serviceAccount: { namespace: outrigger-system, name: expose }
  resources: [{ apiVersion: apps/v1, resource: statefulsets, labelSelector: { matchLabels: { expose: "yes" } } }]
  attachments: [{ apiVersion: v1, resource: services, updateStrategy: { method: Recreate } }]
  hooks: { sync: { lambda: { functionName: expose-sync } } }
`,
  );
  const object = file(
    'sts.yaml',
    'apiVersion: apps/v1\nkind: StatefulSet\nmetadata: { name: db, namespace: data, labels: { expose: "yes", old: x } }\n',
  );
  const attachments = file('svc.yaml', 'apiVersion: v1\nkind: Service\nmetadata: { name: db-0 }\nspec: { ports: [{ port: 80 }] }\n');
  const response = file(
    'answer.json',
    JSON.stringify({
      attachments: [{ apiVersion: 'v1', kind: 'Service', metadata: { name: 'db-0' }, spec: { ports: [{ port: 8080 }] } }],
      labels: { exposed: 'true', old: null },
      annotations: { note: 'hi' },
    }),
  );
  const out = load(
    await renderCommand(['--controller', controller, '--parent', object, '--children', attachments, '--response', response]),
  ) as Rendered;
  expect(out.hook).toBe('sync');
  // Recreate: the changed Service is deleted and created from the answer.
  expect((out.children.recreate as Array<{ spec: unknown }>).map((c) => c.spec)).toEqual([{ ports: [{ port: 8080 }] }]);
  expect(out.metadata).toEqual({ labels: { exposed: 'true', old: null }, annotations: { note: 'hi' } });
  expect(out.status).toBeUndefined();

  // Its hook is a Lambda function: without --url or --response there is nothing to call.
  await expect(renderCommand(['--controller', controller, '--parent', object])).rejects.toThrow(
    /names no webhook URL .*give --url .* or --response FILE/,
  );
});

test('--command runs a local process as the hook: the request on stdin, the answer on stdout', async () => {
  const controller = file('composite.yaml', composite(url));
  const hook = file(
    'hook.mjs',
    `let body = '';
process.stdin.on('data', (c) => (body += c));
process.stdin.on('end', () => {
  const { parent, finalizing } = JSON.parse(body);
  if (parent.spec.replicas !== 2 || finalizing) process.exit(3);
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: parent.metadata.name + '-0', labels: { app: 'web' } } };
  process.stdout.write(JSON.stringify({ children: [pod], status: { seen: parent.metadata.uid } }));
});
`,
  );
  const run = (command: string) => renderCommand(['--controller', controller, '--parent', parent, '--command', command]);
  const out = load(await run(`'${process.execPath}' ${hook}`)) as Rendered;
  expect((out.children.create as Array<{ metadata: { name: string } }>).map((c) => c.metadata.name)).toEqual(['web-0']);
  expect(out.status).toEqual({ seen: '6d1c0c52-parent' });
  await expect(run('echo broken >&2; exit 3')).rejects.toThrow(/HookFunctionError.*exited 3: broken/);
  await expect(run('echo not json')).rejects.toThrow(/HookMalformedAnswer.*printed no JSON/);
});

test('a hook answer that fails validation is refused with the pass reason and the field at fault', async () => {
  const controller = file('composite.yaml', composite(url));
  const args = ['--controller', controller, '--parent', parent];
  answer = { children: [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'Bad Name!' } }] };
  await expect(renderCommand(args)).rejects.toThrow(/HookMalformedAnswer.*children\.0\.metadata\.name must be an object name/);
  answer = { children: [{ apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' } }] };
  await expect(renderCommand(args)).rejects.toThrow(
    /InvalidChild.*child Secret s: v1 Secret is not one of the controller's child resources/,
  );
  answer = { children: [pod('x', 'a'), pod('x', 'b')] };
  await expect(renderCommand(args)).rejects.toThrow(/child Pod x: answered twice/);
  answer = { status: 'ready' };
  await expect(renderCommand(args)).rejects.toThrow(/HookMalformedAnswer.*status/);
});

test('bad input is named: a malformed file, a child of an unlisted kind, an unknown resource, a parent of another kind', async () => {
  const controller = file('composite.yaml', composite(url));
  const malformed = file('malformed.yaml', 'apiVersion: v1\nkind: [Pod\n');
  await expect(renderCommand(['--controller', controller, '--parent', malformed])).rejects.toThrow(/malformed\.yaml: is not YAML or JSON/);
  const notObject = file('not-object.yaml', 'apiVersion: v1\nkind: Pod\n');
  await expect(renderCommand(['--controller', controller, '--parent', notObject])).rejects.toThrow(
    /not-object\.yaml: is not a Kubernetes object: it has no metadata\.name/,
  );
  const secret = file(
    'secret.yaml',
    'apiVersion: v1\nkind: Pod\nmetadata: { name: p }\n---\napiVersion: v1\nkind: Secret\nmetadata: { name: s }\n',
  );
  await expect(renderCommand(['--controller', controller, '--parent', parent, '--children', secret])).rejects.toThrow(
    /secret\.yaml document 2: Secret s is of kind v1 Secret, not one of the controller's child resources \(v1 Pod, v1 ConfigMap\)/,
  );
  const widgets = file('widgets.yaml', composite(url).replace('resource: pods }', 'resource: widgets }'));
  await expect(renderCommand(['--controller', widgets, '--parent', parent])).rejects.toThrow(
    /spec\.childResources\[0\]: v1 widgets is neither a built-in resource .* pass its CRD with --crd/,
  );
  const stranger = file('stranger.yaml', 'apiVersion: example.com/v1\nkind: Widget\nmetadata: { name: w, namespace: a }\n');
  await expect(renderCommand(['--controller', controller, '--parent', stranger])).rejects.toThrow(
    /stranger\.yaml: example\.com\/v1 Widget is not the controller's parent resource \(example\.com\/v1 podsets\)/,
  );
  await expect(renderCommand(['--controller', controller, '--parent', parent, '--url', 'https://hooks.example.com/sync'])).rejects.toThrow(
    /render calls webhooks on this machine only/,
  );
});
