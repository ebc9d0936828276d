// The controllers the router serves. Each names the sync target its keys go to (its handler's queue), the
// parent kinds it reconciles (possibly read from the cluster, as from RevisionPolicies) and what must be
// watched for it. Controller issues add their entries here; the router reads only this module, so its
// bundle carries no controller code.
import type { GVR } from '../shared/kube/index.ts';
import type { ControllerSource } from './controller-source.ts';
import { historySource, revisionPolicies } from './history/policies.ts';
import { mapControllers, mapSource } from './map/controllers.ts';
import { storageSource } from './storage/source.ts';

export type { ControllerSource };

/** Every source reads its definitions afresh at its next call (a definition changed, or an event named a kind none knew). */
export function forgetControllers(cluster: string): void {
  for (const s of controllerSources) s.forget?.(cluster);
}

export const controllerSources: ControllerSource[] = [historySource, storageSource, mapSource];

/** The definitions whose events change what is watched and routed (README, "The forwarder"). */
export const definitionResources: readonly GVR[] = [revisionPolicies, mapControllers];
