// The controllers the router serves. Each names the sync target its keys go to (its handler's queue), the
// parent kinds it reconciles (possibly read from the cluster, as from RevisionPolicies) and what must be
// watched for it. Controller issues add their entries here; the router reads only this module, so its
// bundle carries no controller code.
import type { GVR, KubeClient } from '../shared/kube/index.ts';
import type { ControllerKind } from '../shared/ownership/index.ts';
import { historySource, revisionPolicies } from './history/policies.ts';
import { mapControllers, mapSource } from './map/controllers.ts';
import { storageSource } from './storage/source.ts';

export interface ControllerSource {
  target: string;
  /** The parent kinds, for one cluster. Called per batch; cache in the source where reading is costly. */
  kinds: (cluster: string, kube: KubeClient) => Promise<ControllerKind[]>;
  /** Resources whose events matter: the parents and the children they own or select (may change with policies). */
  watches: (cluster: string, kube: KubeClient) => Promise<GVR[]>;
  /** Drops what the source caches for the cluster, so the next call reads the definitions again. */
  forget?: (cluster: string) => void;
  /** Why an object of this kind cannot be routed now (its definition's kinds could not be resolved): it is retried. */
  unresolved?: (cluster: string, kube: KubeClient, group: string, kind: string) => Promise<Error | undefined>;
}

/** Every source reads its definitions afresh at its next call (a definition changed, or an event named a kind none knew). */
export function forgetControllers(cluster: string): void {
  for (const s of controllerSources) s.forget?.(cluster);
}

export const controllerSources: ControllerSource[] = [historySource, storageSource, mapSource];

/** The definitions whose events change what is watched and routed (README, "The forwarder"). */
export const definitionResources: readonly GVR[] = [revisionPolicies, mapControllers];
