// Defaulted fields against the real apiserver (kubernetes #78633): a revision written before the apiserver
// (or a CRD) defaulted a field lacks it, the live object has it, and that is no change: no new revision, and
// no write at all.
import { forgetTargetDefaults } from '../../functions/history/defaults.ts';
import { forgetPolicies, listPolicies, policyFor } from '../../functions/history/policies.ts';
import type { SyncOutcome } from '../../functions/history/outcome.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { parentLabels, revisionHash, revisionName, targetState, type JsonObject } from '../../shared/history/data.ts';
import { semanticallyEqual } from '../../shared/json.ts';
import type { RevisionPolicy } from '../../shared/history/policy.ts';
import { HASH_LABEL, PARENT_LABEL, sortRevisions, type ControllerRevision } from '../../shared/history/revisions.ts';
import { Resources, forgetDiscovery, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { newControllerRef, type SyncKey } from '../../shared/ownership/index.ts';
import { statefulSetPolicy } from '../testbed/policies.ts';
import { adminClient, createNamespace, eventually, outriggerClient, testState, uniqueName } from '../testbed/index.ts';
import { controllersGrant } from '../testbed/rbac.ts';

const statefulSets = gvr('apps', 'v1', 'statefulsets');
const kube = outriggerClient();
const state = testState();
const childCause = ['ControllerRevision/it/some-revision/1/added'];
const parentCause = (obj: KubeObject) => [`${obj.kind ?? 'StatefulSet'}/it/${obj.metadata.uid}/${obj.metadata.resourceVersion}/modified`];

const keyOf = (obj: KubeObject, group: string, kind: string): SyncKey => ({
  cluster: 'it',
  group,
  kind,
  namespace: obj.metadata.namespace,
  name: obj.metadata.name!,
  uid: obj.metadata.uid!,
});

/** What a sync sent besides reads: nothing, when the target state did not change. */
const writes = (client: KubeClient) => Object.keys(client.stats.byVerb).filter((v) => !['get', 'list', 'discovery'].includes(v));

async function history(ns: string, name: string): Promise<ControllerRevision[]> {
  const list = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
    namespace: ns,
    labelSelector: `${PARENT_LABEL}=${name}`,
  });
  return sortRevisions(list.items);
}

/**
 * Replaces the parent's only revision with one holding `data`, as a controller before the upgrade would have
 * written it: same owner, labels and number, named by the hash of its own data.
 */
async function replaceRevision(parent: KubeObject, data: JsonObject, extraLabels: Record<string, string> = {}): Promise<string> {
  const ns = parent.metadata.namespace!;
  const [made, ...rest] = await history(ns, parent.metadata.name!);
  expect(rest).toEqual([]);
  await adminClient().delete(Resources.controllerRevisions, { name: made!.metadata.name!, namespace: ns });
  const hash = revisionHash(data, 0);
  const name = revisionName(parent.metadata.name!, hash);
  await adminClient().create(Resources.controllerRevisions, {
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: {
      name,
      namespace: ns,
      labels: { ...extraLabels, ...parentLabels(parent), [HASH_LABEL]: hash },
      ownerReferences: [newControllerRef(parent)],
    },
    data,
    revision: made!.revision,
  });
  return name;
}

describe('a StatefulSet whose revision predates defaulted fields', () => {
  let policy: RevisionPolicy;
  beforeAll(async () => {
    policy = await statefulSetPolicy(kube);
  });
  const sync = (obj: KubeObject, causes = childCause, client: KubeClient = kube): Promise<SyncOutcome> =>
    syncHistory({ kube: client, state, holder: uniqueName('h') }, policy, keyOf(obj, 'apps', 'StatefulSet'), causes);

  test('the older revision equals the live template: no new revision, no write; real changes still make one', async () => {
    const ns = await createNamespace('hdef');
    const admin = adminClient();
    let sts = await admin.create(statefulSets, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'web', namespace: ns },
      spec: {
        serviceName: 'web',
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            containers: [
              {
                name: 'c',
                image: 'registry.example/app:1',
                ports: [{ containerPort: 8080 }],
                env: [{ name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
                readinessProbe: { httpGet: { port: 8080 } },
                // As a 1.14 apiserver wrote it into every container securityContext (kubernetes #78633).
                securityContext: { runAsNonRoot: true, procMount: 'Default' },
              },
            ],
            volumes: [{ name: 'cfg', configMap: { name: 'cfg' } }],
          },
        },
      },
    });
    expect(await sync(sts)).toMatchObject({ outcome: 'created', number: 1 });

    // The revision a controller made before those fields were defaulted: the template without any of them.
    const live = (sts.spec as { template: JsonObject }).template as {
      spec: JsonObject & { containers: JsonObject[]; volumes: Array<{ configMap: JsonObject }> };
    };
    const c = live.spec.containers[0] as { [k: string]: JsonObject & { [k: string]: JsonObject } };
    expect(c).toMatchObject({
      imagePullPolicy: 'IfNotPresent',
      terminationMessagePath: '/dev/termination-log',
      ports: [{ protocol: 'TCP' }],
      readinessProbe: { periodSeconds: 10, httpGet: { scheme: 'HTTP' } },
    });
    const older = structuredClone(live);
    const oc = older.spec.containers[0] as { [k: string]: unknown } & {
      securityContext: JsonObject;
      readinessProbe: JsonObject & { httpGet: JsonObject };
      ports: JsonObject[];
      env: Array<{ valueFrom: { fieldRef: JsonObject } }>;
    };
    for (const k of ['dnsPolicy', 'restartPolicy', 'schedulerName', 'securityContext', 'terminationGracePeriodSeconds'])
      delete older.spec[k];
    for (const k of ['imagePullPolicy', 'terminationMessagePath', 'terminationMessagePolicy', 'resources']) delete oc[k];
    delete oc.securityContext.procMount;
    for (const k of ['timeoutSeconds', 'periodSeconds', 'successThreshold', 'failureThreshold']) delete oc.readinessProbe[k];
    delete oc.readinessProbe.httpGet.scheme;
    delete oc.readinessProbe.httpGet.path;
    delete oc.ports[0]!.protocol;
    delete oc.env[0]!.valueFrom.fieldRef.apiVersion;
    delete older.spec.volumes[0]!.configMap.defaultMode;
    const olderData = { spec: { template: { ...older, $patch: 'replace' } } } as JsonObject;
    // Without the defaults this is a different state: the spurious rollout the test is about.
    expect(semanticallyEqual(olderData, targetState(sts as unknown as JsonObject, ['spec.template']))).toBe(false);
    const name = await replaceRevision(sts, olderData, { app: 'web' });

    const counted = outriggerClient();
    expect(await sync(sts, childCause, counted)).toMatchObject({ outcome: 'unchanged', revision: name, number: 1 });
    expect(writes(counted)).toEqual([]);
    expect((await history(ns, 'web')).map((r) => r.metadata.name)).toEqual([name]);
    // The stored data is untouched, and the fast path recorded the state it found: a parent-only event is cached.
    expect((await kube.get<ControllerRevision>(Resources.controllerRevisions, { name, namespace: ns })).data).toEqual(olderData);
    sts = await admin.patch(statefulSets, { name: 'web', namespace: ns }, { spec: { replicas: 2 } }, 'merge');
    expect(await sync(sts, parentCause(sts))).toMatchObject({ outcome: 'cached', revision: name, number: 1 });

    // A field set to a value other than its default is a change, and so is a new image.
    sts = await admin.patch(
      statefulSets,
      { name: 'web', namespace: ns },
      { spec: { template: { spec: { terminationGracePeriodSeconds: 60 } } } },
      'merge',
    );
    expect(await sync(sts, parentCause(sts))).toMatchObject({ outcome: 'created', number: 2 });
    sts = await admin.patch(
      statefulSets,
      { name: 'web', namespace: ns },
      { spec: { template: { spec: { containers: [{ ...c, image: 'registry.example/app:2' }] } } } },
      'merge',
    );
    expect(await sync(sts, parentCause(sts))).toMatchObject({ outcome: 'created', number: 3 });
  });
});

describe('a custom resource whose CRD gains a schema default after revisions were made', () => {
  const group = 'defaults.test.outrigger.dev';
  const gadgets = gvr(group, 'v1', 'gadgets');
  const crd = (modeDefault?: string) => `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: gadgets.${group} }
spec:
  group: ${group}
  scope: Namespaced
  names: { kind: Gadget, plural: gadgets, singular: gadget }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                replicas: { type: integer }
                template:
                  type: object
                  properties:
                    image: { type: string }
                    mode: { type: string${modeDefault ? `, default: ${modeDefault}` : ''} }
`;
  const SETUP = `
${crd()}---
${controllersGrant('outrigger-gadgets', [`{ apiGroups: [${group}], resources: [gadgets], verbs: [get, list, watch] }`])}---
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: gadgets }
spec:
  target: { apiVersion: ${group}/v1, kind: Gadget }
  targetState: [spec.template]
`;

  test('the live object, defaulted on read, equals the older revision: no new revision, no write', async () => {
    const admin = adminClient();
    await applyManifests(admin, SETUP);
    forgetDiscovery(kube);
    forgetPolicies();
    forgetTargetDefaults();
    const policy = policyFor(await listPolicies(kube, 'it'), group, 'Gadget')!;
    const sync = (obj: KubeObject, client: KubeClient = kube) =>
      syncHistory({ kube: client, state, holder: uniqueName('g') }, policy, keyOf(obj, group, 'Gadget'), childCause);
    const ns = await createNamespace('hdef');
    let g: KubeObject = await admin.create(gadgets, {
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      metadata: { name: 'g', namespace: ns },
      spec: { replicas: 1, template: { image: 'app:1' } },
    });
    expect(await sync(g)).toMatchObject({ outcome: 'created', number: 1 });
    const [first] = await history(ns, 'g');

    // The CRD now defaults `mode`; objects read from etcd show it once the apiserver serves the new schema.
    await applyManifests(admin, crd('Fast'));
    g = await eventually(async () => {
      const o = await admin.get(gadgets, { name: 'g', namespace: ns });
      return (o.spec as { template: { mode?: string } }).template.mode === 'Fast' ? o : undefined;
    });
    expect(semanticallyEqual(first!.data, targetState(g as unknown as JsonObject, ['spec.template']))).toBe(false);
    forgetTargetDefaults();
    const counted = outriggerClient();
    expect(await sync(g, counted)).toMatchObject({ outcome: 'unchanged', revision: first!.metadata.name, number: 1 });
    expect(writes(counted)).toEqual([]);
    expect(counted.stats.byVerb.get).toBeGreaterThan(0);
    expect((await history(ns, 'g')).map((r) => r.metadata.name)).toEqual([first!.metadata.name]);

    // A value other than the default is a change.
    g = await admin.patch(gadgets, { name: 'g', namespace: ns }, { spec: { template: { mode: 'Slow' } } }, 'merge');
    expect(await sync(g)).toMatchObject({ outcome: 'created', number: 2 });
    // The role reads one CRD by name, and nothing more.
    await expect(kube.list(Resources.customResourceDefinitions)).rejects.toMatchObject({ kind: 'Forbidden' });
  });
});
