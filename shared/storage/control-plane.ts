// A control plane whose apiservers cannot be reached one by one (EKS and most managed control planes: one
// endpoint behind a load balancer). One reporter through that endpoint is the non-HA design, unsafe
// during a rolling upgrade; these decisions make it safe enough without per-apiserver endpoints
// (docs/controllers/storage-migration.md#one-endpoint-eks-and-most-managed-control-planes). The poll samples discovery over several fresh connections and
// reads the apiservers' identity leases (each apiserver holds one in kube-system, renamed or re-held by a new
// process whenever it restarts). Any change of those identities, and any disagreement between samples, is
// treated as a rolling upgrade under way: it moves the control plane's generation, which every migration
// records, so a migration made before it never narrows persisted; and nothing starts or narrows until the
// control plane has been stable for a full period.
import type { StorageVersionEntry } from '../kube/discovery.ts';
import { rfc3339 } from './trigger.ts';

/** What Outrigger remembers of a sampled control plane (DynamoDB, one item per cluster). */
export interface ControlPlaneRecord {
  /** The identity leases' holders (name and process), sorted. */
  identities: string[];
  /** Bumped at every change of identities and every disagreement between samples. */
  generation: number;
  /** Since when neither happened (RFC 3339). */
  stableSince: string;
}

/** The record after one poll's observation: unchanged while the control plane is. */
export function observeControlPlane(
  previous: ControlPlaneRecord | undefined,
  seen: { identities: readonly string[]; disagreeing: readonly string[] },
  now: Date,
): ControlPlaneRecord {
  const identities = [...new Set(seen.identities)].sort();
  const same =
    previous !== undefined &&
    previous.identities.length === identities.length &&
    previous.identities.every((id, i) => id === identities[i]);
  if (same && seen.disagreeing.length === 0) return previous;
  return { identities, generation: (previous?.generation ?? 0) + 1, stableSince: rfc3339(now) };
}

/** Why the leader must neither start nor narrow now, or undefined once the control plane has been stable for a period. */
export function unstableReason(record: ControlPlaneRecord | undefined, now: Date, periodMs: number): string | undefined {
  if (!record) return 'the control plane has not been observed yet';
  const since = Date.parse(record.stableSince);
  if (!(now.getTime() - since >= periodMs))
    return `the control plane changed at ${record.stableSince} (apiserver identities or disagreeing answers); waiting for a stable period`;
  return undefined;
}

/** One resource as several samples of discovery saw it: every hash any sample served. */
export interface SampledResource extends StorageVersionEntry {
  /** Sorted; more than one while apiservers disagree. */
  hashes: string[];
}

/** Discovery sampled over several connections, merged per resource; `disagreeing` names resources with several hashes. */
export function mergeSamples(samples: ReadonlyArray<readonly StorageVersionEntry[]>): {
  resources: SampledResource[];
  disagreeing: string[];
} {
  const byKey = new Map<string, SampledResource>();
  for (const sample of samples) {
    for (const r of sample) {
      const key = `${r.resource}.${r.group}`;
      const known = byKey.get(key);
      if (!known) byKey.set(key, { ...r, hashes: [r.storageVersionHash] });
      else if (!known.hashes.includes(r.storageVersionHash)) known.hashes = [...known.hashes, r.storageVersionHash].sort();
    }
  }
  const resources = [...byKey.values()];
  return { resources, disagreeing: resources.filter((r) => r.hashes.length > 1).map((r) => `${r.resource}.${r.group}`) };
}
