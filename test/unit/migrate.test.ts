// `outrigger migrate` (shared/migrate.ts, cli/migrate.ts; docs/reference/cli.md#outrigger-migrate): what a
// Metacontroller definition needs beside it, derived from the definition alone. The output is read back with a small
// RBAC evaluator: whoever each grant is for may do what a pass, the forwarder and the router need, and nothing on
// kinds the definition does not name.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { loadAll } from 'js-yaml';
import { migrateCommand } from '../../cli/migrate.ts';
import { accountConsents } from '../../shared/identity.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import { CONTROLLERS_GROUP, migration, type Rule } from '../../shared/migrate.ts';

type Subject = { kind: string; name: string; namespace?: string };
const FORWARDER: Subject = { kind: 'ServiceAccount', namespace: 'outrigger-system', name: 'outrigger-forwarder' };
const CONTROLLERS: Subject = { kind: 'Group', name: CONTROLLERS_GROUP };

/** Whether the objects' Roles and ClusterRoles, through their bindings, let `who` do `verb` (in `namespace`, if given). */
function allows(
  objects: readonly KubeObject[],
  who: Subject,
  q: { group: string; resource: string; verb: string; name?: string; namespace?: string },
): boolean {
  const same = (s: Subject) => s.kind === who.kind && s.name === who.name && (s.kind !== 'ServiceAccount' || s.namespace === who.namespace);
  const roles = new Map(
    objects.filter((o) => o.kind?.endsWith('Role')).map((o) => [`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`, o]),
  );
  return objects.some((b) => {
    if (!b.kind?.endsWith('RoleBinding') || !((b as unknown as { subjects: Subject[] }).subjects ?? []).some(same)) return false;
    if (b.kind === 'RoleBinding' && q.namespace !== b.metadata.namespace) return false;
    const ref = (b as unknown as { roleRef: { kind: string; name: string } }).roleRef;
    const role = roles.get(`${ref.kind}/${ref.kind === 'Role' ? (b.metadata.namespace ?? '') : ''}/${ref.name}`);
    const rules = (role as unknown as { rules?: Array<Rule & { resourceNames?: string[] }> } | undefined)?.rules ?? [];
    return rules.some(
      (r) =>
        r.apiGroups.includes(q.group) &&
        r.resources.includes(q.resource) &&
        r.verbs.includes(q.verb) &&
        (!r.resourceNames || (q.name !== undefined && r.resourceNames.includes(q.name))),
    );
  });
}

const label = fc.stringMatching(/^[a-z][a-z0-9]{0,8}$/);
const kind = fc.record({ group: fc.constantFrom('', 'apps', 'example.com', 'ctl.enisoc.com'), resource: label });
const apiVersion = (group: string) => (group ? `${group}/v1` : 'v1');
const strategy = fc.constantFrom(undefined, 'OnDelete', 'InPlace', 'Recreate', 'RollingInPlace', 'RollingRecreate');
const hook = fc.oneof(
  fc.record({ url: fc.constant('https://hooks.example.com/sync') }),
  fc.record({ url: fc.tuple(label, label).map(([s, n]) => `http://${s}.${n}/sync`) }),
  fc.record({ service: fc.record({ name: label, namespace: label }) }),
);
const definition = fc.record({
  kind: fc.constantFrom('CompositeController', 'DecoratorController'),
  name: label,
  served: kind,
  children: fc.array(fc.record({ k: kind, strategy }), { maxLength: 3 }),
  account: fc.option(fc.record({ namespace: label, name: label }), { nil: undefined }),
  sync: hook,
  finalize: fc.option(hook, { nil: undefined }),
});
type Generated = typeof definition extends fc.Arbitrary<infer T> ? T : never;

function manifest(g: Generated): KubeObject {
  const composite = g.kind === 'CompositeController';
  const children = g.children.map((c) => ({
    apiVersion: apiVersion(c.k.group),
    resource: c.k.resource,
    // Rolling and Recreate are a CompositeController's; a DecoratorController's attachments take the others.
    ...(c.strategy && (composite || ['OnDelete', 'InPlace'].includes(c.strategy)) ? { updateStrategy: { method: c.strategy } } : {}),
  }));
  const served = { apiVersion: apiVersion(g.served.group), resource: g.served.resource };
  return {
    apiVersion: 'metacontroller.k8s.io/v1alpha1',
    kind: g.kind,
    metadata: { name: g.name },
    spec: {
      ...(composite ? { parentResource: served, childResources: children } : { resources: [served], attachments: children }),
      hooks: { sync: { webhook: g.sync }, ...(g.finalize ? { finalize: { webhook: g.finalize } } : {}) },
      ...(g.account ? { serviceAccount: g.account } : {}),
    },
  } as KubeObject;
}

describe('outrigger migrate', () => {
  test('for any definition, its account may do what a pass does, the forwarder and router may watch its kinds, and no grant reaches a kind it does not name', () => {
    fc.assert(
      fc.property(definition, (g) => {
        const out = migration([manifest(g)]);
        const account = g.account ?? { namespace: 'outrigger-system', name: g.name };
        const sa: Subject = { kind: 'ServiceAccount', ...account };
        // The account, consenting to this definition.
        const made = out.find((o) => o.kind === 'ServiceAccount');
        expect(made?.metadata).toMatchObject(account);
        expect(accountConsents(made?.metadata.annotations ?? undefined, { kind: g.kind, name: g.name })).toBe(true);
        // A definition without an account is given again, naming it; one with an account is not repeated.
        const again = out.filter((o) => o.kind === g.kind);
        expect(again.map((o) => (o.spec as { serviceAccount?: unknown }).serviceAccount)).toEqual(g.account ? [] : [account]);
        // Outrigger may impersonate it (get, impersonate, that name only).
        for (const verb of ['get', 'impersonate'])
          expect(
            allows(out, CONTROLLERS, { group: '', resource: 'serviceaccounts', verb, name: account.name, namespace: account.namespace }),
          ).toBe(true);
        expect(
          allows(out, CONTROLLERS, {
            group: '',
            resource: 'serviceaccounts',
            verb: 'impersonate',
            name: `${account.name}x`,
            namespace: account.namespace,
          }),
        ).toBe(false);
        // A pass, as the account.
        const on = (k: { group: string; resource: string }, verbs: string[], sub = '') =>
          verbs.every((verb) => allows(out, sa, { group: k.group, resource: `${k.resource}${sub}`, verb }));
        expect(on(g.served, ['get', 'list', 'patch'])).toBe(true);
        expect(on(g.served, ['patch'], '/status')).toBe(true);
        expect(on(g.served, ['update'], '/finalizers')).toBe(true);
        for (const c of g.children) expect(on(c.k, ['get', 'list', 'create', 'patch', 'delete'])).toBe(true);
        const rolling = g.kind === 'CompositeController' && g.children.some((c) => c.strategy?.startsWith('Rolling'));
        expect(on({ group: 'apps', resource: 'controllerrevisions' }, ['get', 'list', 'create', 'patch', 'delete'])).toBe(
          rolling ||
            g.children.some((c) => c.k.group === 'apps' && c.k.resource === 'controllerrevisions') ||
            (g.served.group === 'apps' && g.served.resource === 'controllerrevisions'),
        );
        // A Service hook is called through the proxy as the account, in the Service's namespace.
        for (const h of [g.sync, g.finalize]) {
          const ns = h && ('service' in h ? h.service.namespace : /^http:\/\/[a-z0-9]+\.([a-z0-9]+)\//.exec(h.url)?.[1]);
          if (ns) expect(allows(out, sa, { group: '', resource: 'services/proxy', verb: 'create', namespace: ns })).toBe(true);
        }
        // The forwarder (in the cluster, and the local runtime's as outrigger:controllers) and the router.
        for (const who of [FORWARDER, CONTROLLERS])
          for (const k of [g.served, ...g.children.map((c) => c.k)])
            for (const verb of ['list', 'watch']) expect(allows(out, who, { group: k.group, resource: k.resource, verb })).toBe(true);
        // Nothing on a kind the definition does not name.
        const named = new Set(
          [g.served, ...g.children.map((c) => c.k)].flatMap((k) => [
            `${k.group}/${k.resource}`,
            `${k.group}/${k.resource}/status`,
            `${k.group}/${k.resource}/finalizers`,
          ]),
        );
        for (const extra of ['/serviceaccounts', '/services/proxy', 'apps/controllerrevisions']) named.add(extra);
        for (const o of out.filter((x) => x.kind === 'Role' || x.kind === 'ClusterRole'))
          for (const r of (o as unknown as { rules: Rule[] }).rules)
            for (const group of r.apiGroups) for (const res of r.resources) expect(named).toContain(`${group}/${res}`);
      }),
      { numRuns: 200 },
    );
  });

  test('definitions sharing an account: one ServiceAccount consenting to each; other documents are skipped', () => {
    const account = { namespace: 'team-a', name: 'shared' };
    const out = migration([
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a' } },
      manifest({
        kind: 'CompositeController',
        name: 'one',
        served: { group: 'example.com', resource: 'ones' },
        children: [],
        account,
        sync: { url: 'https://h.example.com/' },
        finalize: undefined,
      }),
      null,
      manifest({
        kind: 'DecoratorController',
        name: 'two',
        served: { group: '', resource: 'pods' },
        children: [],
        account,
        sync: { url: 'https://h.example.com/' },
        finalize: undefined,
      }),
    ]);
    const accounts = out.filter((o) => o.kind === 'ServiceAccount');
    expect(accounts).toHaveLength(1);
    expect(accounts[0]!.metadata.annotations).toEqual({
      'outrigger.dev/allowed-controllers': 'compositecontroller/one, decoratorcontroller/two',
    });
    expect(out.some((o) => o.kind === 'Namespace')).toBe(false);
  });

  test("--related: a customize hook's kinds are read by the account and watched by the forwarder", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'outrigger-migrate-'));
    const file = join(dir, 'controller.yaml');
    writeFileSync(
      file,
      `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: { name: propagate }
spec:
  parentResource: { apiVersion: examples.metacontroller.io/v1alpha1, resource: configmappropagations }
  childResources: [{ apiVersion: v1, resource: configmaps }]
  hooks:
    sync: { webhook: { url: http://propagate.metacontroller/sync } }
    customize: { webhook: { url: http://propagate.metacontroller/customize } }
`,
    );
    const out = loadAll(await migrateCommand(['-f', file, '--related', 'apps/v1/deployments', '--namespace', 'team-b'])) as KubeObject[];
    const sa: Subject = { kind: 'ServiceAccount', namespace: 'team-b', name: 'propagate' };
    expect(allows(out, sa, { group: 'apps', resource: 'deployments', verb: 'list' })).toBe(true);
    expect(allows(out, sa, { group: 'apps', resource: 'deployments', verb: 'create' })).toBe(false);
    expect(allows(out, FORWARDER, { group: 'apps', resource: 'deployments', verb: 'watch' })).toBe(true);
    expect(allows(out, sa, { group: '', resource: 'services/proxy', verb: 'create', namespace: 'metacontroller' })).toBe(true);
    await expect(migrateCommand(['-f', file, '--related', 'deployments'])).rejects.toThrow('--related takes APIVERSION/RESOURCE');
  });

  test('no definition in the input, or one Outrigger refuses, is an error naming it', () => {
    expect(() => migration([{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } }])).toThrow(
      'no CompositeController or DecoratorController',
    );
    expect(() =>
      migration([
        {
          apiVersion: 'metacontroller.k8s.io/v1alpha1',
          kind: 'CompositeController',
          metadata: { name: 'bad' },
          spec: { childResources: [] },
        } as KubeObject,
      ]),
    ).toThrow(/bad.*parentResource|parentResource.*bad/s);
  });
});
