// `outrigger doctor`'s judgement (cli/doctor/findings.ts, its comparisons in shipped.ts) on facts written here, and
// the EKS reads' branches (cli/doctor/eks.ts) against an in-memory EksApi: what each answer becomes, and the command
// that fixes it. The EKS calls themselves are not exercised against EKS here.
/* eslint-disable max-lines -- the findings, EKS and command sections share the healthy facts and the crd, role and binding builders below */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { loadAll } from 'js-yaml';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import fc from 'fast-check';
import { doctor } from '../../cli/doctor/command.ts';
import type { EksApi } from '../../cli/doctor/eks.ts';
import { gatherEks } from '../../cli/doctor/eks.ts';
import {
  exitCode,
  findings,
  renderText,
  type ClusterFacts,
  type DeadLetterQueue,
  type EksFacts,
  type Finding,
} from '../../cli/doctor/findings.ts';
import { allows, crdDifference, firstDifference, missingPermissions, type PolicyRule } from '../../cli/doctor/shipped.ts';
import { projectRoot } from '../../local/paths.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import { MIGRATOR_ROLE, migratorRole } from '../../shared/storage/index.ts';

const now = new Date('2026-11-25T02:00:00Z');
const ago = (s: number) => new Date(now.getTime() - s * 1000).toISOString();

const crd = (props: Record<string, unknown>, extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'storageversionmigrations.migration.k8s.io' },
  spec: {
    group: 'migration.k8s.io',
    names: { kind: 'StorageVersionMigration', plural: 'storageversionmigrations', ...extra },
    versions: [{ name: 'v1alpha1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: props } } }],
  },
});
const role = (rules: PolicyRule[]): KubeObject => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'outrigger' },
  rules,
});
const binding = (roleName: string, group: string): KubeObject => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRoleBinding',
  metadata: { name: 'outrigger' },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
  subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group }],
});

const progress = { status: { type: 'object', properties: { progress: { type: 'object' } } } };
const shippedCrd = crd(progress);
const healthy = (over: Partial<ClusterFacts> = {}): ClusterFacts => ({
  cluster: 'prod',
  now,
  kubectl: 'kubectl --context prod',
  overlayArgs: '--clusters clusters.json --outputs cdk-outputs.json',
  storage: true,
  apiserver: { version: 'v1.35.4' },
  crds: [
    {
      file: 'cluster/crds/storageversionmigrations.yaml',
      object: shippedCrd,
      installed: crd(progress, { listKind: 'StorageVersionMigrationList' }),
    },
  ],
  rbac: [
    {
      file: 'cluster/rbac.yaml',
      object: binding('outrigger', 'outrigger:controllers'),
      installed: binding('outrigger', 'outrigger:controllers'),
    },
  ],
  forwarder: {
    namespace: 'outrigger-system',
    objects: [],
    leaseName: 'outrigger-forwarder-leader',
    checkpointName: 'outrigger-forwarder-checkpoint',
    deployment: { replicas: 2, readyReplicas: 2 },
    lease: { holderIdentity: 'pod-a', renewTime: ago(3) },
    checkpointWrittenAt: ago(30),
    key: 'present',
  },
  deadLetters: [
    {
      name: 'S-prod-history-dlq.fifo',
      url: 'https://sqs.eu-west-1.amazonaws.com/1/S-prod-history-dlq.fifo',
      arn: 'arn:aws:sqs:eu-west-1:1:S-prod-history-dlq.fifo',
      sourceArn: 'arn:aws:sqs:eu-west-1:1:S-prod-history.fifo',
      messages: 0,
    },
  ],
  eks: { skipped: "not an EKS cluster: its configuration's access is secret" },
  ...over,
});
const of = (all: Finding[], check: string) => {
  const f = all.find((x) => x.check === check);
  if (!f) throw new Error(`no ${check}: ${renderText(all)}`);
  return f;
};

describe('doctor findings', () => {
  test('a healthy cluster: every check ok, EKS skipped with its reason, exit code 0', () => {
    const all = findings(healthy());
    expect(all.filter((f) => f.status !== 'ok' && f.status !== 'skipped')).toEqual([]);
    expect(of(all, 'eks access entries')).toEqual({
      check: 'eks access entries',
      cluster: 'prod',
      status: 'skipped',
      message: "not an EKS cluster: its configuration's access is secret",
    });
    expect(exitCode(all)).toBe(0);
    expect(renderText(all)).toMatch(/^cluster prod\n {2}ok {4}apiserver .*answers, v1\.35\.4\n/);
  });

  test('storage reporters: an unsafe configuration, or fewer reporters than apiservers, fails naming it; sampled is ok', () => {
    const fix =
      "remove storage.reporters from cluster prod in clusters.json (discovery is then sampled), or give each reporter its own apiserver's https server";
    const unsafe = 'apiserver reaches the EKS endpoint https://x.eks.amazonaws.com, which balances over several apiservers';
    expect(
      of(findings(healthy({ storageReporters: { unsafe, reporters: 1, samples: undefined, apiservers: 2 } })), 'storage reporters'),
    ).toEqual({
      check: 'storage reporters',
      cluster: 'prod',
      status: 'fail',
      message: `unsafe: storage.reporters: ${unsafe}`,
      fix,
    });
    expect(
      of(
        findings(healthy({ storageReporters: { unsafe: undefined, reporters: 1, samples: undefined, apiservers: 3 } })),
        'storage reporters',
      ),
    ).toMatchObject({
      status: 'fail',
      message: expect.stringMatching(/^unsafe: 3 apiservers hold identity leases, but storage\.reporters names 1/),
      fix,
    });
    expect(
      of(findings(healthy({ storageReporters: { unsafe: undefined, reporters: 1, samples: 4, apiservers: 3 } })), 'storage reporters'),
    ).toMatchObject({ status: 'ok', message: 'one endpoint, discovery sampled over 4 connections per poll' });
    expect(
      of(
        findings(healthy({ storageReporters: { unsafe: undefined, reporters: 3, samples: undefined, apiservers: 3 } })),
        'storage reporters',
      ),
    ).toMatchObject({ status: 'ok' });
    expect(
      of(
        findings(
          healthy({ storageReporters: { unsafe: undefined, reporters: 2, samples: undefined, apiservers: { error: 'forbidden' } } }),
        ),
        'storage reporters',
      ),
    ).toMatchObject({ status: 'warn' });
  });

  test('an apiserver that does not answer: one failure, the cluster checks left out', () => {
    const all = findings(healthy({ apiserver: { error: 'connect ECONNREFUSED' }, crds: undefined, rbac: undefined, forwarder: undefined }));
    expect(of(all, 'apiserver')).toMatchObject({
      status: 'fail',
      fix: 'kubectl --context prod version (for EKS: aws eks update-kubeconfig --name <cluster> --alias prod)',
    });
    expect(all.some((f) => f.check.startsWith('crd') || f.check.startsWith('forwarder'))).toBe(false);
    expect(exitCode(all)).toBe(1);
  });

  test('CRDs: absent or stale fail with the apply that mends them; without storage migration its CRDs only warn', () => {
    const stale = crd({ status: { type: 'object' } });
    const fix = 'kubectl --context prod apply --server-side --force-conflicts -f cluster/crds/storageversionmigrations.yaml';
    const file = 'cluster/crds/storageversionmigrations.yaml';
    expect(
      of(findings(healthy({ crds: [{ file, object: shippedCrd, installed: stale }] })), 'crd storageversionmigrations.migration.k8s.io'),
    ).toEqual({
      check: 'crd storageversionmigrations.migration.k8s.io',
      cluster: 'prod',
      status: 'fail',
      message: `not current: differs from ${file} at spec.versions[v1alpha1].schema.openAPIV3Schema.properties.status.properties: absent in the cluster`,
      fix,
    });
    const absent = healthy({ storage: false, crds: [{ file, object: shippedCrd, installed: undefined }] });
    expect(of(findings(absent), 'crd storageversionmigrations.migration.k8s.io')).toMatchObject({
      status: 'warn',
      message: `not installed (${file})`,
      fix,
    });
  });

  test('the difference path: a version the cluster lacks, a changed value, a field only the cluster has', () => {
    const two = crd({});
    (two.spec as { versions: unknown[] }).versions.push({ name: 'v1', served: true, storage: false });
    expect(crdDifference(two, crd({}))).toBe('spec.versions[v1]: not served by the installed CRD');
    expect(firstDifference({ a: { b: 1 } }, { a: { b: 2 } }, 'x')).toBe('x.a.b: 2 in the cluster, 1 in the manifest');
    expect(firstDifference({ a: {} }, { a: { c: true } }, 'x')).toBe('x.a.c: in the cluster, not in the manifest');
  });

  test('property: an object equals itself; any leaf removed from the copy is named as absent', () => {
    const json = fc.dictionary(
      fc.stringMatching(/^[a-z]{1,4}$/),
      fc.oneof(fc.integer(), fc.string(), fc.dictionary(fc.stringMatching(/^[a-z]{1,4}$/), fc.boolean(), { minKeys: 1 })),
      { minKeys: 1 },
    );
    fc.assert(
      fc.property(json, fc.nat(), (o, pick) => {
        expect(firstDifference(o, structuredClone(o), 'x')).toBeUndefined();
        const keys = Object.keys(o);
        const key = keys[pick % keys.length]!;
        const copy = structuredClone(o);
        delete copy[key];
        expect(firstDifference(o, copy, 'x')).toBe(`x.${key}: absent in the cluster`);
      }),
    );
  });

  test('RBAC: a role lacking a permission names it, a binding of another role or without the group fails, with the apply', () => {
    const shipped = role([
      { apiGroups: ['outrigger.dev'], resources: ['revisionpolicies/status'], verbs: ['patch'] },
      { nonResourceURLs: ['/apis/*'], verbs: ['get'] },
    ]);
    const lacking = role([{ nonResourceURLs: ['/apis/*'], verbs: ['get'] }]);
    const fix = 'kubectl --context prod apply --server-side -f cluster/rbac.yaml';
    expect(
      of(findings(healthy({ rbac: [{ file: 'cluster/rbac.yaml', object: shipped, installed: lacking }] })), 'rbac ClusterRole outrigger'),
    ).toMatchObject({
      status: 'fail',
      message: 'lacks patch revisionpolicies/status.outrigger.dev (cluster/rbac.yaml)',
      fix,
    });
    const want = binding('outrigger', 'outrigger:controllers');
    expect(
      of(
        findings(healthy({ rbac: [{ file: 'cluster/rbac.yaml', object: want, installed: binding('view', 'outrigger:controllers') }] })),
        'rbac ClusterRoleBinding outrigger',
      ),
    ).toMatchObject({
      status: 'fail',
      message: 'binds ClusterRole view, not ClusterRole outrigger',
    });
    expect(
      of(
        findings(healthy({ rbac: [{ file: 'cluster/rbac.yaml', object: want, installed: binding('outrigger', 'someone') }] })),
        'rbac ClusterRoleBinding outrigger',
      ),
    ).toMatchObject({
      status: 'fail',
      message: 'does not bind Group outrigger:controllers (cluster/rbac.yaml)',
      fix,
    });
  });

  test("RBAC: the migrator's role narrowed by outrigger migrator-role is accepted; narrowed short of the StorageStates' resources, it fails", async () => {
    const file = 'cluster/rbac.yaml';
    const [shipped] = (loadAll(await readFile(new URL('../../cluster/rbac.yaml', import.meta.url), 'utf8')) as KubeObject[]).filter(
      (o) => o.kind === 'ClusterRole' && o.metadata.name === MIGRATOR_ROLE,
    );
    const state = (group: string, resource: string) => ({ spec: { resource: { group, resource } } });
    const applied = migratorRole([state('example.com', 'widgets'), state('', 'configmaps')]);
    const narrowed = migratorRole([state('example.com', 'widgets'), state('', 'configmaps'), state('example.com', 'gadgets')]);
    const check = `rbac ClusterRole ${MIGRATOR_ROLE}`;
    const facts = (installed: KubeObject, over: Partial<ClusterFacts> = {}) =>
      healthy({ rbac: [{ file, object: shipped!, installed }], ...over });
    // As the cluster's StorageStates narrow it: ok, where the shipped rules alone would call it lacking list * and patch *.
    expect(of(findings(facts(applied, { narrowedMigratorRole: applied })), check)).toMatchObject({
      status: 'ok',
      message: "narrowed to the StorageStates' resources, as outrigger migrator-role prints it",
    });
    expect(of(findings(facts(applied)), check)).toMatchObject({ status: 'fail', message: expect.stringContaining('lacks list *') });
    // A resource served since the role was applied: the narrowed role names it, the installed one does not.
    expect(of(findings(facts(applied, { narrowedMigratorRole: narrowed })), check)).toMatchObject({
      status: 'fail',
      message:
        "neither as shipped nor narrowed to the StorageStates' resources: lacks list gadgets.example.com, patch gadgets.example.com (outrigger migrator-role)",
      fix: 'outrigger migrator-role --context prod | kubectl --context prod apply -f - (or kubectl --context prod apply --server-side -f cluster/rbac.yaml for the shipped role)',
    });
    // The shipped role installed is as shipped, whatever the StorageStates name.
    expect(of(findings(facts(shipped!, { narrowedMigratorRole: narrowed })), check)).toMatchObject({
      status: 'ok',
      message: 'grants what it should',
    });
  });

  test('the ServiceAccount admission policy: absent is a failure naming what it lets through; changed rules fail; as shipped, ok', async () => {
    const [policy] = (loadAll(await readFile(new URL('../../cluster/admission.yaml', import.meta.url), 'utf8')) as KubeObject[]).filter(
      (o) => o.kind === 'ValidatingAdmissionPolicy',
    );
    const file = 'cluster/admission.yaml';
    const check = 'admission ValidatingAdmissionPolicy outrigger-serviceaccount-use';
    // The apiserver defaults fields the manifest leaves out; those decide nothing here.
    const defaulted = { ...policy!, spec: { ...(policy!.spec as object), matchConstraints: { matchPolicy: 'Equivalent' } } } as KubeObject;
    expect(of(findings(healthy({ admission: [{ file, object: policy!, installed: defaulted }] })), check)).toMatchObject({
      status: 'ok',
      message: 'current (cluster/admission.yaml)',
    });
    expect(of(findings(healthy({ admission: [{ file, object: policy!, installed: undefined }] })), check)).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('may name any ServiceAccount Outrigger may act as'),
      fix: 'kubectl --context prod apply --server-side -f cluster/admission.yaml',
    });
    // Its first rule made to let everything through, the others as shipped.
    const shipped = (policy!.spec as { validations: unknown[] }).validations;
    const loosened = {
      ...policy!,
      spec: { ...(policy!.spec as object), validations: [{ expression: 'true' }, ...shipped.slice(1)] },
    } as KubeObject;
    expect(of(findings(healthy({ admission: [{ file, object: policy!, installed: loosened }] })), check)).toMatchObject({
      status: 'fail',
      message: expect.stringMatching(/^not current: differs from cluster\/admission.yaml at spec.validations\[0\]/),
    });
  });

  test('RBAC coverage as the authorizer decides: wildcards, resource names, a URL prefix', () => {
    expect(
      allows(
        { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
        { verb: 'patch', group: 'apps', resource: 'statefulsets', name: undefined },
      ),
    ).toBe(true);
    expect(
      allows(
        { apiGroups: [''], resources: ['leases'], verbs: ['get'], resourceNames: ['a'] },
        { verb: 'get', group: '', resource: 'leases', name: undefined },
      ),
    ).toBe(false);
    expect(
      allows(
        { apiGroups: [''], resources: ['leases'], verbs: ['get'], resourceNames: ['a'] },
        { verb: 'get', group: '', resource: 'leases', name: 'a' },
      ),
    ).toBe(true);
    expect(allows({ nonResourceURLs: ['/apis*'], verbs: ['get'] }, { verb: 'get', url: '/apis/*' })).toBe(true);
    expect(allows({ nonResourceURLs: ['/api'], verbs: ['get'] }, { verb: 'get', url: '/apis/*' })).toBe(false);
  });

  test('property: rules plus any others grant everything the rules do; a verb taken away is what goes missing', () => {
    const rule = fc.record({
      apiGroups: fc.uniqueArray(fc.constantFrom('', 'apps', 'outrigger.dev'), { minLength: 1 }),
      resources: fc.uniqueArray(fc.constantFrom('pods', 'leases', 'statefulsets'), { minLength: 1 }),
      verbs: fc.uniqueArray(fc.constantFrom('get', 'list', 'watch', 'patch'), { minLength: 1 }),
    });
    fc.assert(
      fc.property(fc.array(rule, { minLength: 1, maxLength: 4 }), fc.array(rule, { maxLength: 3 }), (shipped, extra) => {
        expect(missingPermissions(shipped, [...extra, ...shipped.reverse()])).toEqual([]);
        shipped.reverse();
        const [first, ...rest] = shipped;
        const verb = first!.verbs[0]!;
        const without = [{ ...first!, verbs: first!.verbs.filter((v) => v !== verb) }, ...rest];
        const missing = missingPermissions(shipped, without);
        const stillGranted = (group: string, resource: string) =>
          without.some((r) => allows(r, { verb, group, resource, name: undefined }));
        const expected = first!.apiGroups.flatMap((g) =>
          first!.resources.filter((r) => !stillGranted(g, r)).map((r) => `${verb} ${r}${g ? `.${g}` : ''}`),
        );
        expect(missing).toEqual(expected);
      }),
    );
  });

  test('the forwarder: installed otherwise, not ready, a stale or absent Lease, a quiet checkpoint', () => {
    const fw = healthy().forwarder!;
    const k = 'kubectl --context prod -n outrigger-system';
    const install =
      'npm run forwarder-overlay -- --cluster prod --clusters clusters.json --outputs cdk-outputs.json && kubectl --context prod apply -k deploy/forwarder/overlays/prod';
    const with_ = (over: Partial<typeof fw>) => findings(healthy({ forwarder: { ...fw, ...over } }));
    expect(of(with_({ deployment: undefined }), 'forwarder deployment')).toMatchObject({ status: 'warn', fix: install });
    expect(of(with_({ deployment: undefined, lease: undefined }), 'forwarder deployment')).toMatchObject({ status: 'fail', fix: install });
    expect(of(with_({ deployment: { replicas: 2, readyReplicas: 0 } }), 'forwarder deployment')).toMatchObject({
      status: 'fail',
      message: 'none of 2 replicas is ready',
      fix: `${k} describe deployment outrigger-forwarder; ${k} logs deployment/outrigger-forwarder`,
    });
    expect(of(with_({ deployment: { replicas: 2, readyReplicas: 1 } }), 'forwarder deployment').status).toBe('warn');
    expect(of(with_({ lease: { holderIdentity: 'pod-a', renewTime: ago(121) } }), 'forwarder lease')).toMatchObject({
      status: 'fail',
      message: 'Lease outrigger-system/outrigger-forwarder-leader last renewed 121 s ago by pod-a (over 120 s: no leader sends)',
      fix: `${k} logs deployment/outrigger-forwarder; ${k} rollout restart deployment/outrigger-forwarder`,
    });
    expect(of(with_({ lease: { holderIdentity: '' } }), 'forwarder lease')).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('no renewTime'),
    });
    expect(of(with_({ lease: { holderIdentity: 'pod-a', renewTime: ago(120) } }), 'forwarder lease').status).toBe('ok');
    expect(of(with_({ lease: undefined }), 'forwarder sending').status).toBe('skipped');
    // The forwarder key: without it envelopes are unsigned (correct, a read dearer), and doctor says so.
    expect(of(with_({}), 'forwarder key').status).toBe('ok');
    expect(of(with_({ key: 'absent' }), 'forwarder key')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('the forwarder sends unsigned envelopes'),
      fix: expect.stringContaining('outrigger forwarder-key --cluster prod'),
    });
    expect(of(with_({ key: 'malformed' }), 'forwarder key').status).toBe('fail');
    expect(of(with_({ checkpointWrittenAt: ago(7200) }), 'forwarder sending')).toMatchObject({
      status: 'warn',
      message: expect.stringMatching(/^last sent 120 min ago/),
    });
    expect(of(with_({ checkpointWrittenAt: undefined }), 'forwarder sending')).toMatchObject({
      status: 'warn',
      fix: `${k} logs deployment/outrigger-forwarder; ${k} get configmap outrigger-forwarder-checkpoint`,
    });
    expect(
      of(
        with_({
          objects: [
            {
              file: 'deploy/forwarder/base/serviceaccount.yaml',
              object: {
                apiVersion: 'v1',
                kind: 'ServiceAccount',
                metadata: { name: 'outrigger-forwarder', namespace: 'outrigger-system' },
              },
              installed: undefined,
            },
          ],
        }),
        'forwarder rbac',
      ),
    ).toEqual({
      check: 'forwarder rbac',
      cluster: 'prod',
      status: 'fail',
      message: 'ServiceAccount outrigger-system/outrigger-forwarder absent (deploy/forwarder/base/serviceaccount.yaml)',
      fix: install,
    });
  });

  test('dead letters: a message held names the redrive, a queue that cannot be read fails, none named is skipped', () => {
    const [q] = healthy().deadLetters as DeadLetterQueue[];
    expect(of(findings(healthy({ deadLetters: [{ ...q!, messages: 3 }] })), 'dead letters S-prod-history-dlq.fifo')).toMatchObject({
      status: 'fail',
      message: 'holds 3 message(s): read their reason attribute, fix the cause, then move them back',
      fix:
        'aws sqs --region eu-west-1 receive-message --queue-url https://sqs.eu-west-1.amazonaws.com/1/S-prod-history-dlq.fifo --message-attribute-names All --max-number-of-messages 10 && ' +
        'aws sqs --region eu-west-1 start-message-move-task --source-arn arn:aws:sqs:eu-west-1:1:S-prod-history-dlq.fifo --destination-arn arn:aws:sqs:eu-west-1:1:S-prod-history.fifo',
    });
    expect(
      of(
        findings(healthy({ deadLetters: [{ ...q!, messages: undefined, error: 'QueueDoesNotExist: no queue' }] })),
        'dead letters S-prod-history-dlq.fifo',
      ),
    ).toMatchObject({
      status: 'fail',
      message: 'could not be read: QueueDoesNotExist: no queue',
    });
    expect(of(findings(healthy({ deadLetters: { skipped: 'no queues named' } })), 'dead letters').status).toBe('skipped');
  });
});

/** EKS as a dictionary: what each narrow call answers, or throws. */
function fakeEks(state: {
  mode?: string | Error;
  addon?: string | Error;
  entries?: Array<{ principalArn: string; groups: string[] }> | Error;
  associations?: Array<{ roleArn: string }>;
}): EksApi & { calls: string[] } {
  const calls: string[] = [];
  const answer = async <T>(name: string, v: T | Error | undefined, fallback: T): Promise<T> => {
    calls.push(name);
    if (v instanceof Error) throw v;
    return v ?? fallback;
  };
  return {
    calls,
    authenticationMode: (c) => answer(`mode ${c}`, state.mode, undefined),
    addonStatus: (c, a) => answer(`addon ${c} ${a}`, state.addon, undefined),
    accessEntries: (c) => answer(`entries ${c}`, state.entries, []),
    podIdentityAssociations: (c, ns, sa) => answer(`associations ${c} ${ns}/${sa}`, state.associations, []),
  };
}

describe('doctor EKS checks', () => {
  const controller = 'arn:aws:iam::111122223333:role/Outrigger-History';
  const migrator = 'arn:aws:iam::111122223333:role/Outrigger-Migrator';
  const forwarderRole = 'arn:aws:iam::111122223333:role/Outrigger-ProdForwarder';
  const good = {
    mode: 'API_AND_CONFIG_MAP',
    addon: 'ACTIVE',
    entries: [
      { principalArn: controller, groups: ['outrigger:controllers'] },
      { principalArn: migrator, groups: ['outrigger:controllers', 'outrigger:migrators'] },
    ],
    associations: [{ roleArn: forwarderRole }],
  };
  const expected: EksFacts['expected'] = { controllerRoles: [controller], migratorRole: migrator, forwarderRole };
  const eksFindings = async (state: Parameters<typeof fakeEks>[0], exp: EksFacts['expected'] = expected) => {
    const api = fakeEks(state);
    const eks = await gatherEks(api, { clusterName: 'prod', region: 'eu-west-1', forwarderNamespace: 'outrigger-system' }, exp);
    return { all: findings(healthy({ eks })).filter((f) => f.check.startsWith('eks')), calls: api.calls };
  };

  test('all in place: four ok, each read made once for the cluster and the forwarder', async () => {
    const { all, calls } = await eksFindings(good);
    expect(all.map((f) => [f.check, f.status])).toEqual([
      ['eks authentication mode', 'ok'],
      ['eks pod identity agent', 'ok'],
      ['eks access entries', 'ok'],
      ['eks pod identity association', 'ok'],
    ]);
    expect(calls.sort()).toEqual([
      'addon prod eks-pod-identity-agent',
      'associations prod outrigger-system/outrigger-forwarder',
      'entries prod',
      'mode prod',
    ]);
  });

  test('CONFIG_MAP mode (whose access entries cannot be listed), no agent: each failure with its own fix', async () => {
    const refused = Object.assign(new Error('The cluster authentication mode does not support access entries'), {
      name: 'InvalidRequestException',
    });
    const { all } = await eksFindings({ ...good, mode: 'CONFIG_MAP', addon: undefined, entries: refused });
    expect(all.find((f) => f.check === 'eks authentication mode')).toMatchObject({
      status: 'fail',
      message: 'CONFIG_MAP: access entries need API or API_AND_CONFIG_MAP',
      fix: 'aws eks --region eu-west-1 update-cluster-config --name prod --access-config authenticationMode=API_AND_CONFIG_MAP',
    });
    expect(all.find((f) => f.check === 'eks pod identity agent')).toMatchObject({
      status: 'fail',
      fix: 'aws eks --region eu-west-1 create-addon --cluster-name prod --addon-name eks-pod-identity-agent',
    });
    expect(all.find((f) => f.check === 'eks access entries')).toMatchObject({
      status: 'fail',
      message: 'could not be read: InvalidRequestException: The cluster authentication mode does not support access entries',
    });
    expect((await eksFindings({ ...good, addon: 'DEGRADED' })).all.find((f) => f.check === 'eks pod identity agent')?.status).toBe('warn');
  });

  test("access entries: a role without one gets its create, the migrator's missing group its update", async () => {
    const { all } = await eksFindings({ ...good, entries: [{ principalArn: migrator, groups: ['outrigger:controllers'] }] });
    expect(all.find((f) => f.check === 'eks access entries')).toEqual({
      check: 'eks access entries',
      cluster: 'prod',
      status: 'fail',
      message: `${controller} has no access entry; ${migrator} is in outrigger:controllers, not outrigger:controllers and outrigger:migrators`,
      fix:
        `aws eks --region eu-west-1 create-access-entry --cluster-name prod --principal-arn ${controller} --kubernetes-groups outrigger:controllers && ` +
        `aws eks --region eu-west-1 update-access-entry --cluster-name prod --principal-arn ${migrator} --kubernetes-groups outrigger:controllers outrigger:migrators`,
    });
  });

  test("access entries without the outputs: the groups must be someone's", async () => {
    const none = { controllerRoles: [], migratorRole: undefined, forwarderRole: undefined };
    expect((await eksFindings(good, none)).all.find((f) => f.check === 'eks access entries')?.status).toBe('ok');
    const { all } = await eksFindings({ ...good, entries: [{ principalArn: controller, groups: ['outrigger:controllers'] }] }, none);
    expect(all.find((f) => f.check === 'eks access entries')).toMatchObject({
      status: 'fail',
      message: "no access entry is in both outrigger:controllers and outrigger:migrators (the migrator's)",
    });
  });

  test('the Pod Identity association: none gets the create with the output role, another role fails', async () => {
    const { all } = await eksFindings({ ...good, associations: [] });
    expect(all.find((f) => f.check === 'eks pod identity association')).toMatchObject({
      status: 'fail',
      fix: `aws eks --region eu-west-1 create-pod-identity-association --cluster-name prod --namespace outrigger-system --service-account outrigger-forwarder --role-arn ${forwarderRole}`,
    });
    const other = await eksFindings({ ...good, associations: [{ roleArn: 'arn:aws:iam::111122223333:role/other' }] });
    expect(other.all.find((f) => f.check === 'eks pod identity association')).toMatchObject({
      status: 'fail',
      message: `outrigger-system/outrigger-forwarder is associated with arn:aws:iam::111122223333:role/other, not ${forwarderRole}`,
    });
  });
});

describe('doctor command', () => {
  test('two clusters from the configuration: each reached by the context of its id, queues and roles from the outputs', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'outrigger-doctor-unit-'));
    const eksAccess = (name: string) => ({
      kind: 'eks',
      server: 'https://0123456789ABCDEF0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com',
      caData: 'Q0E=',
      clusterName: name,
      region: 'eu-west-1',
    });
    await writeFile(
      join(dir, 'clusters.json'),
      JSON.stringify([
        { id: 'prod', access: eksAccess('prod') },
        {
          id: 'dr',
          access: {
            kind: 'secret',
            server: 'https://dr.internal:6443',
            secretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:dr',
          },
          storage: { enabled: false },
        },
      ]),
    );
    const queue = (name: string) => `https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-${name}.fifo`;
    await writeFile(
      join(dir, 'outputs.json'),
      JSON.stringify({
        Outrigger: {
          ProdEventsQueueUrl: queue('prod-events'),
          ControllerRoleArns: 'arn:aws:iam::111122223333:role/A arn:aws:iam::111122223333:role/B',
          MigratorRoleArn: 'arn:aws:iam::111122223333:role/M',
          ProdForwarderRoleArn: 'arn:aws:iam::111122223333:role/F',
        },
      }),
    );
    // Nothing listens on port 1: the apiserver finding, and the checks that need no apiserver.
    const kubeconfig = join(dir, 'kubeconfig');
    const cluster = { server: 'https://127.0.0.1:1', 'insecure-skip-tls-verify': true };
    await writeFile(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: ['prod', 'dr'].map((name) => ({ name, context: { cluster: 'c', user: 'u' } })),
      }),
    );
    const asked: string[] = [];
    // Only `send` is used, and only to read a dead-letter queue's attributes: it answers that there is none.
    const sqs = {
      send: async (command: { input: { QueueUrl: string } }) => {
        asked.push(command.input.QueueUrl);
        throw Object.assign(new Error('The specified queue does not exist.'), { name: 'QueueDoesNotExist' });
      },
    } as unknown as SQSClient;
    const eks = fakeEks({ mode: 'API', addon: 'ACTIVE', entries: [], associations: [] });
    const run = await doctor(
      ['--clusters', join(dir, 'clusters.json'), '--outputs', join(dir, 'outputs.json'), '--kubeconfig', kubeconfig],
      {
        root: projectRoot,
        eks: () => eks,
        sqs: () => sqs,
      },
    );
    expect(run.code).toBe(1);
    const find = (cluster: string, check: string) => run.findings.find((f) => f.cluster === cluster && f.check === check);
    expect(find('prod', 'apiserver')).toMatchObject({
      status: 'fail',
      fix: expect.stringMatching(/^kubectl --kubeconfig \S+ --context prod version/),
    });
    expect(find('dr', 'apiserver')?.fix).toMatch(/^kubectl --kubeconfig \S+ --context dr version/);
    expect(asked).toContain(queue('prod-history-dlq'));
    expect(find('prod', 'dead letters Outrigger-prod-history-dlq.fifo')).toMatchObject({
      status: 'fail',
      message: 'could not be read: QueueDoesNotExist: The specified queue does not exist.',
    });
    expect(find('dr', 'dead letters')).toMatchObject({
      status: 'skipped',
      message: 'the outputs name no DrEventsQueueUrl: is the cluster in the deployed configuration?',
    });
    expect(find('prod', 'eks access entries')?.message).toBe(
      'arn:aws:iam::111122223333:role/A has no access entry; arn:aws:iam::111122223333:role/B has no access entry; arn:aws:iam::111122223333:role/M has no access entry',
    );
    expect(find('prod', 'eks pod identity association')?.fix).toMatch(/--role-arn arn:aws:iam::111122223333:role\/F$/);
    expect(find('dr', 'eks authentication mode')).toMatchObject({
      status: 'skipped',
      message: "not an EKS cluster: its configuration's access is secret",
    });
  });
});
