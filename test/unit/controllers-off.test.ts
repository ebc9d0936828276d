// What the router's sources answer for a cluster: nothing for a controller it turns off; and which parents' status
// changes need not be sent.
// A controller a cluster turns off (storage.enabled, metacontroller.enabled: false) is asked nothing for it: its
// source names no kinds to route and nothing to watch, and reads none of its definitions
// (docs/reference/configuration.md#clustersjson).
import { describe, expect, it } from '@jest/globals';
import { controllerSources, forgetControllers, type ControllerSource } from '../../functions/controllers.ts';
import { forgetPolicies, historySource, revisionPolicies } from '../../functions/history/policies.ts';
import { statusReads } from '../../functions/index.ts';
import type { ControllerKind } from '../../shared/ownership/index.ts';
import { gvr, gvrString, type KubeClient } from '../../shared/kube/index.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';
import { FakeKube } from '../fakes/kube.ts';
import { eksCluster } from './clusters.ts';

const METACONTROLLER = ['mapcontrollers', 'compositecontrollers', 'decoratorcontrollers'];

async function ask(config: ClusterConfig) {
  forgetControllers(config.id);
  const kube = new FakeKube();
  const read: string[] = [];
  kube.beforeRequest = (_verb, r) => {
    read.push(r.resource);
  };
  // The sources read through KubeApi's methods alone, which the fake serves.
  const client = kube as unknown as KubeClient;
  const targets = new Set<string>();
  const watched: string[] = [];
  for (const s of controllerSources) {
    const kinds = await s.kinds(config, client);
    if (kinds.length > 0) targets.add(s.target);
    watched.push(...(await s.watches(config, client)).map(gvrString), ...((await s.statusChanges?.(config, client)) ?? []).map(gvrString));
  }
  return { targets: [...targets].sort(), watched, read: [...new Set(read)] };
}

describe('a controller turned off for a cluster', () => {
  it('with the Metacontroller APIs off: no MapController, CompositeController or DecoratorController is read, routed or watched', async () => {
    const on = await ask(eksCluster('meta-on'));
    expect(METACONTROLLER.filter((r) => on.read.includes(r))).toEqual(METACONTROLLER);
    const off = await ask({ ...eksCluster('meta-off'), metacontroller: { enabled: false } });
    expect({
      read: off.read.filter((r) => METACONTROLLER.includes(r)),
      watched: off.watched.filter((w) => w.includes('metacontroller.k8s.io')),
      targets: off.targets,
    }).toEqual({ read: [], watched: [], targets: ['history', 'storage'] });
  });

  it('with storage migration off: no StorageVersionMigration is routed or watched', async () => {
    const off = await ask({ ...eksCluster('storage-off'), storage: { enabled: false, migrations: 'outrigger' } });
    expect({ watched: off.watched.filter((w) => w.includes('migration')), storage: off.targets.includes('storage') }).toEqual({
      watched: [],
      storage: false,
    });
  });
});

describe("the parents' status the forwarder may leave unsent (functions/index.ts#statusReads)", () => {
  const sets = gvr('apps', 'v1', 'statefulsets');
  const kind = (resource: typeof sets): ControllerKind => ({
    resource,
    kind: 'StatefulSet',
    namespaced: true,
    selectorOf: () => null,
    target: 't',
  });
  const source = (target: string, reads?: string[]): ControllerSource => ({
    target,
    kinds: async () => [kind(sets)],
    watches: async () => [sets],
    ...(reads ? { statusReads: async () => [{ resource: sets, paths: reads }] } : {}),
  });
  const kube = {} as KubeClient;

  it('are those every controller of theirs reads at named paths only, with the paths of all of them', async () => {
    expect(await statusReads([source('a', ['status.x']), source('b', ['status.y'])], eksCluster('c'), kube)).toEqual([
      { resource: sets, paths: ['status.x', 'status.y'] },
    ]);
  });

  it('leave out a parent kind that any controller of it reads whole (a DecoratorController over StatefulSets, say)', async () => {
    expect(await statusReads([source('a', ['status.x']), source('b')], eksCluster('c'), kube)).toEqual([]);
    expect(await statusReads([source('b'), source('a', ['status.x'])], eksCluster('c'), kube)).toEqual([]);
  });
});

describe("what a history sync reads of its parents' status (historySource.statusReads)", () => {
  it('names the status revision paths and a selector in status for snapshot mode, and nothing for a revisionKey kind, whose status steps are all sent', async () => {
    const kube = new FakeKube();
    const policy = (name: string, kind: string, spec: Record<string, unknown>) =>
      kube.create(revisionPolicies, {
        apiVersion: 'outrigger.dev/v1alpha1',
        kind: 'RevisionPolicy',
        metadata: { name },
        spec: { target: { apiVersion: 'apps/v1', kind }, targetState: ['spec.template'], ...spec },
      });
    await policy('sets', 'StatefulSet', { statusRevisionPaths: ['status.currentRevision', 'status.updateRevision'] });
    await policy('deployments', 'Deployment', {
      generated: { apiVersion: 'v1', kind: 'Pod', selectorPath: 'status.selector' },
    });
    // As the documented LeaderWorkerSet recipe, on a kind the fake serves.
    await policy('keyed', 'DaemonSet', {
      mode: 'revisionKey',
      revisionKey: { label: 'example.com/key', rolloutCompleteCondition: 'Available' },
      generated: { apiVersion: 'v1', kind: 'Pod', selectorPath: 'status.hpaPodSelector' },
    });
    forgetPolicies('reads');
    const reads = await historySource.statusReads!(eksCluster('reads'), kube as unknown as KubeClient);
    expect(Object.fromEntries(reads.map((r) => [r.resource.resource, [...r.paths].sort()]))).toEqual({
      statefulsets: ['status.currentRevision', 'status.updateRevision'],
      deployments: ['status.selector'],
    });
  });
});
