// While Outrigger and Metacontroller share a cluster (docs/reference/configuration.md#sharing-a-cluster-with-metacontroller),
// the engine label decides whose identity a definition runs under: cluster/side-by-side-admission.yaml keeps the
// choice of Metacontroller's, cluster-wide, to whoever may `choose-engine`. On the real apiserver, as a user who may
// write definitions. The bed does not install the policy: this file applies it under names of its own, bound only
// to definitions carrying this run's label, so test files beside it are not held to it.
import { readFile } from 'node:fs/promises';
import { loadAll } from 'js-yaml';
import { compositeControllers, decoratorControllers } from '../../functions/composite/controllers.ts';
import { mapControllers } from '../../functions/map/controllers.ts';
import { gvr, type GVR, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { adminClient, eventually, grantsInEffect, uniqueName } from '../testbed/index.ts';

const ENGINE = 'example.com/engine';
const RUN = 'side-by-side.outrigger.test/run';
const policies = gvr('admissionregistration.k8s.io', 'v1', 'validatingadmissionpolicies');
const bindings = gvr('admissionregistration.k8s.io', 'v1', 'validatingadmissionpolicybindings');
// A parent kind no one serves: a runtime of another file that serves every definition finds nothing to do.
const PARENT = { apiVersion: 'side-by-side.outrigger.test/v1', resource: 'nothings' };
const HOOK = { webhook: { url: 'https://hook.example/sync' } };

const specs: Array<{ resource: GVR; kind: string; spec: Record<string, unknown> }> = [
  {
    resource: mapControllers,
    kind: 'MapController',
    spec: { parentResource: PARENT, inputResources: [PARENT], outputResources: [PARENT], hooks: { map: HOOK } },
  },
  {
    resource: compositeControllers,
    kind: 'CompositeController',
    spec: { generateSelector: true, parentResource: PARENT, hooks: { sync: HOOK } },
  },
  { resource: decoratorControllers, kind: 'DecoratorController', spec: { resources: [PARENT], hooks: { sync: HOOK } } },
];

test('trust boundary: side by side with Metacontroller, a user who may write definitions cannot create one Metacontroller serves, move one between engines, or change one Metacontroller serves', async () => {
  const admin = adminClient();
  const user = uniqueName('tenant');
  const run = uniqueName('sbs');
  const definition = (d: (typeof specs)[number], name: string, engine?: string): KubeObject => ({
    apiVersion: 'metacontroller.k8s.io/v1alpha1',
    kind: d.kind,
    metadata: { name, labels: { [RUN]: run, ...(engine === undefined ? {} : { [ENGINE]: engine }) } },
    spec: d.spec,
  });
  const [policy, binding] = loadAll(await readFile(new URL('../../cluster/side-by-side-admission.yaml', import.meta.url), 'utf8')) as [
    KubeObject,
    KubeObject & { spec: Record<string, unknown> },
  ];
  policy.metadata.name = run;
  binding.metadata.name = run;
  binding.spec.policyName = run;
  binding.spec.matchResources = { objectSelector: { matchLabels: { [RUN]: run } } };
  const role = (verbs: string[]) => `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: ${user} }
rules:
  - apiGroups: ["metacontroller.k8s.io"]
    resources: ["mapcontrollers", "compositecontrollers", "decoratorcontrollers"]
    verbs: ${JSON.stringify(verbs)}
`;
  await applyManifests(
    admin,
    `${role(['create', 'get', 'patch'])}---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: ${user} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${user} }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: ${user} }]
`,
  );
  const tenant = admin.as({ user });
  const made: Array<[GVR, string]> = [];
  const names = specs.map((d) => uniqueName(`sbs-${d.kind.toLowerCase()}`));
  try {
    await admin.create(policies, policy);
    await admin.create(bindings, binding);
    // Refused below by admission, not by RBAC: the grants must be in effect first.
    for (const d of specs) await grantsInEffect(tenant, [{ verb: 'patch', group: 'metacontroller.k8s.io', resource: d.resource.resource }]);
    // A policy just bound takes a moment to be in effect: until the first unlabelled create is refused.
    const probe = uniqueName('sbs-probe');
    let last: unknown;
    await eventually(async () => {
      try {
        await tenant.create(mapControllers, definition(specs[0]!, probe));
      } catch (err) {
        last = err;
        return (err as { kind?: string }).kind === 'Forbidden';
      }
      await admin.delete(mapControllers, { name: probe });
      return false;
    }).catch(async (err: unknown) => {
      const status = JSON.stringify((await admin.get(policies, { name: run })).status);
      throw new Error(`${String(err)}: the policy is not in effect (its status ${status}; the last answer ${String(last)})`);
    });

    for (const [i, d] of specs.entries()) {
      const name = names[i]!;
      made.push([d.resource, name]);
      // Unlabelled, or labelled for the other engine: Metacontroller would serve it as itself.
      for (const engine of [undefined, 'metacontroller'])
        await expect(tenant.create(d.resource, definition(d, name, engine))).rejects.toMatchObject({
          kind: 'Forbidden',
          message: expect.stringContaining(`metadata.labels: without ${ENGINE}=outrigger Metacontroller serves this definition`),
        });
      expect(await admin.find(d.resource, { name })).toBeUndefined();

      // Labelled for Outrigger: let through, and held there.
      await tenant.create(d.resource, definition(d, name, 'outrigger'));
      for (const engine of [null, 'metacontroller'])
        await expect(tenant.patch(d.resource, { name }, { metadata: { labels: { [ENGINE]: engine } } }, 'merge')).rejects.toMatchObject({
          kind: 'Forbidden',
          message: expect.stringContaining(`metadata.labels: ${ENGINE} chooses the engine`),
        });
      await tenant.patch(d.resource, { name }, { metadata: { labels: { team: 'a' } } }, 'merge');
      expect((await admin.get(d.resource, { name })).metadata.labels).toMatchObject({ [ENGINE]: 'outrigger', team: 'a' });
    }

    // One an admin made for Metacontroller: the tenant may neither move it to Outrigger nor change its spec.
    const legacy = uniqueName('sbs-legacy');
    made.push([compositeControllers, legacy]);
    await admin.create(compositeControllers, definition(specs[1]!, legacy));
    await expect(
      tenant.patch(compositeControllers, { name: legacy }, { metadata: { labels: { [ENGINE]: 'outrigger' } } }, 'merge'),
    ).rejects.toMatchObject({
      kind: 'Forbidden',
    });
    await expect(
      tenant.patch(
        compositeControllers,
        { name: legacy },
        { spec: { hooks: { sync: { webhook: { url: 'https://attacker.example/' } } } } },
        'merge',
      ),
    ).rejects.toMatchObject({ kind: 'Forbidden', message: expect.stringContaining('spec: Metacontroller serves this definition') });
    // A change that leaves the label and the spec as they were is let through.
    await tenant.patch(compositeControllers, { name: legacy }, { metadata: { labels: { team: 'a' } } }, 'merge');

    // Granted choose-engine, the same user may.
    await applyManifests(admin, role(['create', 'get', 'patch', 'choose-engine']));
    await grantsInEffect(tenant, [{ verb: 'choose-engine', group: 'metacontroller.k8s.io', resource: 'compositecontrollers' }]);
    await tenant.patch(compositeControllers, { name: legacy }, { metadata: { labels: { [ENGINE]: 'outrigger' } } }, 'merge');
  } finally {
    for (const [resource, name] of made) await admin.delete(resource, { name }).catch(() => undefined);
    await admin.delete(bindings, { name: run }).catch(() => undefined);
    await admin.delete(policies, { name: run }).catch(() => undefined);
    await admin.delete(gvr('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings'), { name: user }).catch(() => undefined);
    await admin.delete(gvr('rbac.authorization.k8s.io', 'v1', 'clusterroles'), { name: user }).catch(() => undefined);
  }
}, 90_000);
