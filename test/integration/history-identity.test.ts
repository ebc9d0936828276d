// A RevisionPolicy that names a ServiceAccount (docs/operations/security.md): its target kind is read with that
// account's grants, never Outrigger's, and the policy says so when Outrigger may not act as the account or the
// account may not read the kind. The kind here is one Outrigger's own identity may not read at all.
import { load } from 'js-yaml';
import { controllerSources } from '../../functions/controllers.ts';
import { syncHistory } from '../../functions/history/sync.ts';
import { routeBatch } from '../../functions/router/route.ts';
import { Clusters } from '../../shared/clusters.ts';
import { makeEnvelope, messageGroupId } from '../../shared/envelope/index.ts';
import { MemoryDeadLetterSink } from '../../shared/lambda/dead-letter.ts';
import type { SyncRequest } from '../../shared/lambda/sync-request.ts';
import { forgetPolicies, listPolicies, policyFor, revisionPolicies } from '../../functions/history/policies.ts';
import { reportPolicy } from '../../functions/history/report.ts';
import { parentLabels } from '../../shared/history/data.ts';
import { PARENT_LABEL, sortRevisions, type ControllerRevision } from '../../shared/history/revisions.ts';
import { gvr, isKubeError, Resources, resolveKind, forgetDiscovery, type KubeObject } from '../../shared/kube/index.ts';
import { applyManifests } from '../../shared/kube/apply.ts';
import { openCrd } from '../testbed/crds.ts';
import {
  adminClient,
  createNamespace,
  eventually,
  grantsInEffect,
  outriggerClient,
  testCluster,
  testState,
  uniqueName,
} from '../testbed/index.ts';
import { impersonatedAccount, userGrant } from '../testbed/rbac.ts';

const GROUP = 'ident.outrigger.test';
const strongboxes = gvr(GROUP, 'v1', 'strongboxes');
const admin = adminClient();
const kube = outriggerClient();
const READ = `{ apiGroups: ["${GROUP}"], resources: ["strongboxes"], verbs: ["get", "list", "watch"] }`;

beforeAll(async () => {
  // Served, and readable by no one but the admin and the accounts granted below; discovery is open to Outrigger.
  await applyManifests(admin, openCrd(GROUP, 'Strongbox', 'strongboxes'));
  await eventually(async () => {
    forgetDiscovery(kube);
    return resolveKind(kube, `${GROUP}/v1`, 'Strongbox')
      .then(() => true)
      .catch(() => false);
  });
}, 60_000);

function policy(name: string, account?: { namespace: string; name: string }): string {
  return `
apiVersion: outrigger.dev/v1alpha1
kind: RevisionPolicy
metadata: { name: ${name} }
spec:
  target: { apiVersion: ${GROUP}/v1, kind: Strongbox }
  targetState: [spec.template]
${account ? `  serviceAccount: { namespace: ${account.namespace}, name: ${account.name} }\n` : ''}`;
}

async function revisions(ns: string, name: string): Promise<string[]> {
  const list = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
    namespace: ns,
    labelSelector: `${PARENT_LABEL}=${name}`,
  });
  return sortRevisions(list.items).map((r) => `${r.revision}:${(r.data as { spec: { template: { image: string } } }).spec.template.image}`);
}

/** The policy in effect once its check passes (a new grant takes effect once the authorizer's cache has it). */
async function readyPolicy(name: string) {
  await eventually(async () => ((await reportPolicy(kube, 'it', name)).ready ? true : undefined));
  forgetPolicies('it');
  return policyFor(await listPolicies(kube, 'it'), GROUP, 'Strongbox')!;
}

describe('a RevisionPolicy that names a ServiceAccount', () => {
  test("reads its target with the account's grants: revisions of a kind Outrigger itself may not read", async () => {
    const ns = await createNamespace('ident');
    await applyManifests(admin, impersonatedAccount(ns, 'reader', [READ]));
    const box = await admin.create<KubeObject>(strongboxes, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Strongbox',
      metadata: { name: 'vault', namespace: ns },
      spec: { template: { image: 'app:1' } },
    });
    const err = await kube.get(strongboxes, { name: 'vault', namespace: ns }).catch((e: unknown) => e);
    expect(isKubeError(err, 'Forbidden')).toBe(true);
    const name = uniqueName('ident');
    await applyManifests(admin, policy(name, { namespace: ns, name: 'reader' }));
    try {
      // A new grant takes effect once the authorizer's cache has it.
      const report = await eventually(async () => {
        const r = await reportPolicy(kube, 'it', name);
        return r.ready ? r : undefined;
      });
      expect(report).toMatchObject({ ready: true, reason: 'Valid' });
      const effective = policyFor(await listPolicies(kube, 'it'), GROUP, 'Strongbox')!;
      const key = { cluster: 'it', group: GROUP, kind: 'Strongbox', namespace: ns, name: 'vault', uid: box.metadata.uid! };
      expect(
        await syncHistory({ kube, state: testState(), holder: uniqueName('h') }, effective, key, [
          `Strongbox/it/${box.metadata.uid}/1/added`,
        ]),
      ).toMatchObject({ outcome: 'created' });
      expect(await revisions(ns, 'vault')).toEqual(['1:app:1']);
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });

  test('the ServiceAccount boundary: an account that does not name the policy serves it not at all, before its first check and after: Ready=False ServiceAccountNotConsenting', async () => {
    const ns = await createNamespace('ident');
    const name = uniqueName('ident');
    // The account may read the kind and Outrigger may act as it, for another policy only.
    await applyManifests(admin, impersonatedAccount(ns, 'theirs', [READ], `revisionpolicy/${name}-other, mapcontroller/${name}`));
    await applyManifests(admin, policy(name, { namespace: ns, name: 'theirs' }));
    try {
      forgetPolicies('it');
      expect(policyFor(await listPolicies(kube, 'it'), GROUP, 'Strongbox')).toBeUndefined();
      expect(await reportPolicy(kube, 'it', name)).toMatchObject({
        ready: false,
        reason: 'ServiceAccountNotConsenting',
        message: expect.stringContaining(`does not name revisionpolicy/${name} in its outrigger.dev/allowed-controllers annotation`),
      });
      expect(policyFor(await listPolicies(kube, 'it'), GROUP, 'Strongbox')).toBeUndefined();
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });

  test('the ServiceAccount boundary holds for adoption: an orphaned revision is adopted with the parent re-read as the account, not as Outrigger (audit M3)', async () => {
    const ns = await createNamespace('ident');
    await applyManifests(admin, impersonatedAccount(ns, 'reader', [READ]));
    const box = await admin.create<KubeObject>(strongboxes, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Strongbox',
      metadata: { name: 'vault', namespace: ns },
      spec: { template: { image: 'app:1' } },
    });
    const name = uniqueName('ident');
    await applyManifests(admin, policy(name, { namespace: ns, name: 'reader' }));
    try {
      const effective = await readyPolicy(name);
      const key = { cluster: 'it', group: GROUP, kind: 'Strongbox', namespace: ns, name: 'vault', uid: box.metadata.uid! };
      const deps = { kube, state: testState(), holder: uniqueName('h') };
      expect(await syncHistory(deps, effective, key, [`Strongbox/it/${box.metadata.uid}/1/added`])).toMatchObject({ outcome: 'created' });
      // The revision orphaned (as `--cascade=orphan` leaves it); its event makes the sync list and claim it.
      const [rev] = (
        await kube.list<ControllerRevision>(Resources.controllerRevisions, { namespace: ns, labelSelector: `${PARENT_LABEL}=vault` })
      ).items;
      await admin.patch(
        Resources.controllerRevisions,
        { name: rev!.metadata.name!, namespace: ns },
        { metadata: { ownerReferences: null } },
        'merge',
      );
      expect(await syncHistory(deps, effective, key, [`ControllerRevision/it/${rev!.metadata.uid}/2/modified`])).toMatchObject({
        outcome: 'unchanged',
        number: 1,
      });
      const adopted = await kube.get<ControllerRevision>(Resources.controllerRevisions, { name: rev!.metadata.name!, namespace: ns });
      expect(adopted.metadata.ownerReferences).toEqual([expect.objectContaining({ uid: box.metadata.uid, controller: true })]);
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });

  test("the ServiceAccount boundary holds for routing: an orphan ControllerRevision's event is routed with the policy's parents listed as the account, not dead-lettered (audit M3)", async () => {
    const ns = await createNamespace('ident');
    await applyManifests(admin, impersonatedAccount(ns, 'reader', [READ]));
    const box = await admin.create<KubeObject>(strongboxes, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Strongbox',
      metadata: { name: 'vault', namespace: ns },
      spec: { template: { image: 'app:1' } },
    });
    const name = uniqueName('ident');
    await applyManifests(admin, policy(name, { namespace: ns, name: 'reader' }));
    try {
      await readyPolicy(name);
      // Orphans, as another controller's `--cascade=orphan` leaves them: one carrying the box's parent labels, one not.
      const orphan = (n: string, labels: Record<string, string>) =>
        admin.create<KubeObject>(Resources.controllerRevisions, {
          apiVersion: 'apps/v1',
          kind: 'ControllerRevision',
          metadata: { name: n, namespace: ns, labels },
          data: {},
          revision: 1,
        });
      const ours = await orphan('vault-orphan', parentLabels(box));
      const theirs = await orphan('web-7d9f', { app: 'web' });
      const sent: SyncRequest[] = [];
      const deadLetter = new MemoryDeadLetterSink();
      forgetPolicies('it');
      const envelopes = [ours, theirs].map((object) => makeEnvelope({ cluster: 'it', type: 'added', object, source: 'test' }));
      const out = await routeBatch(
        {
          Records: envelopes.map((e, i) => ({
            messageId: `m${i}`,
            receiptHandle: `m${i}`,
            body: JSON.stringify(e),
            attributes: {
              ApproximateReceiveCount: '1',
              SentTimestamp: '0',
              SenderId: 't',
              ApproximateFirstReceiveTimestamp: '0',
              MessageGroupId: messageGroupId(e),
            },
            messageAttributes: {},
            md5OfBody: '',
            eventSource: 'aws:sqs',
            eventSourceARN: 'arn:aws:sqs:local:000000000000:it-events.fifo',
            awsRegion: 'local',
          })),
        },
        {
          clusters: new Clusters([testCluster('it')]),
          sources: controllerSources,
          sink: { send: async (_target: string, requests: SyncRequest[]) => void sent.push(...requests) },
          deadLetter: () => deadLetter,
          queueCluster: () => 'it',
        },
      );
      expect(out.batchItemFailures).toEqual([]);
      expect(sent.map((r) => `${r.key.kind}/${r.key.name}/${r.key.uid}`)).toEqual([`Strongbox/vault/${box.metadata.uid}`]);
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });

  test('a target kind stays with the policy created first: one created later under an earlier name is not in effect, and reports TargetKindTaken', async () => {
    const [first, later] = [uniqueName('zz-ident'), uniqueName('aa-ident')];
    const [held] = await applyManifests(admin, policy(first));
    try {
      // creationTimestamp has whole seconds: the later policy is created in a later one.
      const createdAt = Date.parse(held!.metadata.creationTimestamp ?? '');
      await eventually(async () => (Date.now() >= createdAt + 1_000 ? true : undefined));
      await applyManifests(admin, policy(later));
      forgetPolicies('it');
      expect(policyFor(await listPolicies(kube, 'it'), GROUP, 'Strongbox')?.name).toBe(first);
      // And each says so (L7 in docs/controllers/history.md#the-2026-11-26-history-reviews-findings-and-where-each-stands): the later one is not Ready, naming the policy that holds the kind.
      expect(await reportPolicy(kube, 'it', first)).toMatchObject({ ready: true });
      expect(await reportPolicy(kube, 'it', later)).toMatchObject({
        ready: false,
        reason: 'TargetKindTaken',
        message: expect.stringContaining(`RevisionPolicy ${first}`),
      });
    } finally {
      await admin.delete(revisionPolicies, { name: later }).catch(() => undefined);
      await admin.delete(revisionPolicies, { name: first }).catch(() => undefined);
    }
  });

  test('an account that may not read the target: Ready=False Forbidden, naming what it may not do', async () => {
    const ns = await createNamespace('ident');
    await applyManifests(admin, impersonatedAccount(ns, 'blind', []));
    const name = uniqueName('ident');
    await applyManifests(admin, policy(name, { namespace: ns, name: 'blind' }));
    try {
      const report = await eventually(async () => {
        const r = await reportPolicy(kube, 'it', name);
        return r.reason === 'Forbidden' ? r : undefined;
      });
      expect(report.message).toMatch(new RegExp(`ServiceAccount ${ns}/blind may not get strongboxes.${GROUP}, list strongboxes.${GROUP}`));
      expect(policyFor(await listPolicies(kube, 'it'), GROUP, 'Strongbox')).toBeUndefined();
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });

  test('an account a cluster admin has not let Outrigger act as: Ready=False ServiceAccountNotAllowed; a missing one: ServiceAccountNotFound', async () => {
    const ns = await createNamespace('ident');
    // The account exists and may read the kind, but nothing allows Outrigger to impersonate it.
    await applyManifests(admin, `apiVersion: v1\nkind: ServiceAccount\nmetadata: { name: other, namespace: ${ns} }\n`);
    const notAllowed = uniqueName('ident');
    const missing = uniqueName('ident');
    await applyManifests(
      admin,
      `${policy(notAllowed, { namespace: ns, name: 'other' })}---\n${policy(missing, { namespace: 'outrigger-system', name: 'no-such-account' })}`,
    );
    try {
      expect(await reportPolicy(kube, 'it', notAllowed)).toMatchObject({
        ready: false,
        reason: 'ServiceAccountNotAllowed',
        message: expect.stringMatching(/has not allowed Outrigger to act as ServiceAccount/),
      });
      expect(await reportPolicy(kube, 'it', missing)).toMatchObject({
        ready: false,
        reason: expect.stringMatching(/^ServiceAccountNot(Found|Allowed)$/),
      });
    } finally {
      await admin.delete(revisionPolicies, { name: notAllowed }).catch(() => undefined);
      await admin.delete(revisionPolicies, { name: missing }).catch(() => undefined);
    }
  });
});

describe('a RevisionPolicy that names no ServiceAccount', () => {
  test("the admission boundary: it reads with Outrigger's own grants, so only a requester allowed act-as-outrigger may create or change one", async () => {
    const user = uniqueName('policy-author');
    const name = uniqueName('ident');
    const role = (verbs: string[]) =>
      userGrant(user, [`{ apiGroups: ["outrigger.dev"], resources: ["revisionpolicies"], verbs: ${JSON.stringify(verbs)} }`]);
    await applyManifests(admin, role(['create', 'get', 'update', 'patch']));
    const author = admin.as({ user });
    const unaccounted = load(policy(name)) as KubeObject;
    try {
      // Refused by admission, not by RBAC: the grant must be in effect first.
      await grantsInEffect(author, [{ verb: 'create', group: 'outrigger.dev', resource: 'revisionpolicies' }]);
      await expect(author.create(revisionPolicies, unaccounted)).rejects.toMatchObject({
        kind: 'Forbidden',
        message: expect.stringContaining("spec.serviceAccount: a RevisionPolicy without one reads with Outrigger's own grants"),
      });
      expect(await admin.find(revisionPolicies, { name })).toBeUndefined();

      // One an admin made: the author may not change its spec either, but a change that leaves the spec passes.
      await admin.create(revisionPolicies, unaccounted);
      await expect(
        author.patch(revisionPolicies, { name }, { spec: { targetState: ['spec.template', 'spec.replicas'] } }, 'merge'),
      ).rejects.toMatchObject({ kind: 'Forbidden' });
      await author.patch(revisionPolicies, { name }, { metadata: { labels: { team: 'a' } } }, 'merge');

      // Granted the verb, the author may.
      await applyManifests(admin, role(['create', 'get', 'update', 'patch', 'act-as-outrigger']));
      await grantsInEffect(author, [{ verb: 'act-as-outrigger', group: 'outrigger.dev', resource: 'revisionpolicies' }]);
      await author.patch(revisionPolicies, { name }, { spec: { targetState: ['spec.template', 'spec.replicas'] } }, 'merge');
    } finally {
      await admin.delete(revisionPolicies, { name }).catch(() => undefined);
    }
  });
});
