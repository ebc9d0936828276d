// The definitions (RevisionPolicy, MapController, CompositeController, DecoratorController) are parents of their own, with no children: an object's label
// change is matched against no definition, so the router lists none for it (docs/operations/cost.md#definitions-are-watched).
import { describe, expect, it } from '@jest/globals';
import { compositeControllerKind, decoratorControllerKind } from '../../functions/composite/controllers.ts';
import { policyKind } from '../../functions/history/policies.ts';
import { mapControllerKind } from '../../functions/map/controllers.ts';
import type { KubeClient } from '../../shared/kube/index.ts';
import { BatchResolver } from '../../shared/ownership/resolver.ts';

describe('definition kinds', () => {
  it("are not listed to match a child's labels", async () => {
    let lists = 0;
    const kube = {
      listAll: () => {
        lists += 1;
        return Promise.resolve([]);
      },
    } as unknown as KubeClient;
    const resolver = new BatchResolver(kube, 'c', [policyKind, mapControllerKind, compositeControllerKind, decoratorControllerKind]);
    const routed = await resolver.resolve({ by: 'selector', group: 'apps', kind: 'StatefulSet', labels: { app: 'web' }, namespace: 'ns' });
    expect({ routed, lists }).toEqual({ routed: [], lists: 0 });
  });
});
