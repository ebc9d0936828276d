// The controllers, each declared in a module of its own (functions/<name>/controller.ts): its source names the
// sync target its keys go to (its handler's queue), the parent kinds it reconciles (possibly read from the
// cluster, as from RevisionPolicies) and what must be watched for it. Declarations are data (a function's
// handler is loaded from its entry), so the router, which reads only this module, bundles no handler code.
import type { GVR } from '../shared/kube/index.ts';
import type { ControllerSource } from './controller-source.ts';
import { compositeController } from './composite/controller.ts';
import { historyController } from './history/controller.ts';
import { mapController } from './map/controller.ts';
import type { Controller } from './spec.ts';
import { storageController } from './storage/controller.ts';

export type { ControllerSource };

/** Every source reads its definitions afresh at its next call (a definition changed, or an event named a kind none knew). */
export function forgetControllers(cluster: string): void {
  for (const s of controllerSources) s.forget?.(cluster);
}

/** Every controller, each declared in one module (docs/contributing/layout.md#adding-a-controller). */
export const controllers: readonly Controller[] = [historyController, storageController, mapController, compositeController];

/** Each controller's source, answering nothing for a cluster the controller does not run in (Controller.runsIn). */
export const controllerSources: ControllerSource[] = controllers.map((c) => (c.runsIn ? onlyWhere(c.runsIn, c.source) : c.source));

function onlyWhere(runsIn: NonNullable<Controller['runsIn']>, source: ControllerSource): ControllerSource {
  const { statusChanges, statusReads, unresolved } = source;
  return {
    ...source,
    kinds: async (cluster, kube) => (runsIn(cluster) ? source.kinds(cluster, kube) : []),
    watches: async (cluster, kube) => (runsIn(cluster) ? source.watches(cluster, kube) : []),
    ...(statusChanges ? { statusChanges: async (cluster, kube) => (runsIn(cluster) ? statusChanges(cluster, kube) : []) } : {}),
    ...(statusReads ? { statusReads: async (cluster, kube) => (runsIn(cluster) ? statusReads(cluster, kube) : []) } : {}),
    ...(unresolved
      ? { unresolved: async (cluster, kube, group, kind) => (runsIn(cluster) ? unresolved(cluster, kube, group, kind) : undefined) }
      : {}),
  };
}

/** The definitions whose events change what is watched and routed (docs/operations/forwarder.md). */
export const definitionResources: readonly GVR[] = controllers.flatMap((c) => c.definitions ?? []);
