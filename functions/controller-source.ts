// What the router knows of one controller (README, "Ownership and routing"): a module of its own that the
// controllers' sources and the list of them both import, so neither imports the other.
import type { GVR, KubeClient } from '../shared/kube/index.ts';
import type { ControllerKind } from '../shared/ownership/index.ts';

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
