// A Coexist revision (docs/controllers/history.md#coexistence) is owned by its parent through a plain owner
// reference, so its events come to the router as an orphan's. Its parent labels name the parent, so the router
// keys that parent from the reference instead of listing the kind (docs/operations/cost.md#targets).
import { describe, expect, it } from '@jest/globals';
import { historySource, revisionPolicies } from '../../functions/history/policies.ts';
import { parentLabels } from '../../shared/history/data.ts';
import { gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import { BatchResolver, newOwnerRef, routeEvent } from '../../shared/ownership/index.ts';
import { eksCluster } from './clusters.ts';
import { FakeKube } from '../fakes/kube.ts';

async function bed() {
  const kube = new FakeKube();
  await kube.create(revisionPolicies, {
    apiVersion: 'outrigger.dev/v1alpha1',
    kind: 'RevisionPolicy',
    metadata: { name: 'statefulsets' },
    spec: { target: { apiVersion: 'apps/v1', kind: 'StatefulSet' }, targetState: ['spec.template'], foreignHistory: 'Coexist' },
  });
  const set = await kube.create(gvr('apps', 'v1', 'statefulsets'), {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: 'ns' },
    spec: { selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } } } },
  });
  const parent = { ...set, apiVersion: 'apps/v1', kind: 'StatefulSet' };
  const lists: string[] = [];
  kube.beforeRequest = (verb, r) => {
    if (verb === 'list') lists.push(r.resource);
  };
  const route = async (object: KubeObject) => {
    // The resolver and the policies' source read through KubeApi's methods alone, which the fake serves.
    const client = kube as unknown as KubeClient;
    const resolver = new BatchResolver(client, 'c', await historySource.kinds(eksCluster('c'), client));
    lists.length = 0;
    const keys = [];
    for (const step of routeEvent('added', object)) keys.push(...(await resolver.resolve(step)));
    return keys.map((k) => k.key);
  };
  return { parent, lists, route };
}

const revision = (labels: Record<string, string>, owner: KubeObject): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'ControllerRevision',
  metadata: { name: 'web-1', namespace: 'ns', labels, ownerReferences: [newOwnerRef(owner)] },
});

describe('a Coexist revision', () => {
  it('reaches the parent its plain owner reference and parent labels name, with no list of the kind', async () => {
    const { parent, lists, route } = await bed();
    const keys = await route(revision(parentLabels(parent), parent));
    expect({ keys, lists }).toEqual({
      keys: [{ cluster: 'c', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name: 'web', uid: parent.metadata.uid }],
      lists: [],
    });
  });

  it('trust boundary: a forged owner reference whose parent labels name another parent is routed by the labels, as an orphan', async () => {
    const { parent, lists, route } = await bed();
    const other = { ...parent, metadata: { ...parent.metadata, name: 'other', uid: 'forged' } };
    const keys = await route(revision(parentLabels(parent), other));
    // The reference names `other`, whose labels these are not: the kind is listed and the labels find `web`.
    expect({ keys, lists }).toEqual({
      keys: [{ cluster: 'c', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name: 'web', uid: parent.metadata.uid }],
      lists: ['statefulsets'],
    });
  });

  it("trust boundary: a forged reference with the parent's name and labels but another uid keys that uid, which the sync drops", async () => {
    const { parent, route } = await bed();
    const forged = { ...parent, metadata: { ...parent.metadata, uid: 'forged' } };
    // The history sync reads the parent by name and drops a key whose uid is not the parent's (checksRefUid).
    expect((await route(revision(parentLabels(parent), forged))).map((k) => k.uid)).toEqual(['forged']);
  });
});
