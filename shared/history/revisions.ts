// Pure history decisions over a parent's owned ControllerRevisions: order, the outcome of a sync
// (unchanged, rollback, new revision), which revisions are live, and what truncation may delete.
import { parseApiVersion, type KubeObject } from '../kube/resource.ts';
import { type Json } from './data.ts';
import { semanticallyEqual } from '../json.ts';
import { matches, selectorAt, SelectorError } from '../ownership/selector.ts';
import type { DefaultsSchema } from '../json.ts';

export interface ControllerRevision extends KubeObject {
  data?: Json;
  revision: number;
}

/** Oldest first: by revision number, then creation time, then name. */
export function sortRevisions<T extends ControllerRevision>(revisions: readonly T[]): T[] {
  return [...revisions].sort(
    (a, b) =>
      a.revision - b.revision ||
      (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? '') ||
      (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
  );
}

export function maxRevision(revisions: readonly ControllerRevision[]): number {
  return revisions.reduce((m, r) => Math.max(m, r.revision), 0);
}

export type Outcome<T extends ControllerRevision> =
  { kind: 'unchanged'; revision: T } | { kind: 'rollback'; revision: T; number: number } | { kind: 'create'; number: number };

/**
 * Seed 000: equal to the latest revision, nothing to do; equal to an older one, a rollback (reuse it with the
 * next number, its data untouched); equal to none, a new revision with the next number. Equal means
 * semantically equal, given the target kind's `defaults`.
 */
export function decide<T extends ControllerRevision>(candidate: Json, owned: readonly T[], defaults?: DefaultsSchema): Outcome<T> {
  const sorted = sortRevisions(owned);
  const latest = sorted[sorted.length - 1];
  const next = maxRevision(sorted) + 1;
  if (latest && semanticallyEqual(latest.data, candidate, defaults)) return { kind: 'unchanged', revision: latest };
  for (let i = sorted.length - 2; i >= 0; i -= 1) {
    if (semanticallyEqual(sorted[i]!.data, candidate, defaults)) return { kind: 'rollback', revision: sorted[i]!, number: next };
  }
  return { kind: 'create', number: next };
}

/**
 * Truncation (docs/design/history-sync.md#truncation): delete the oldest revisions that are not live until at most
 * `limit` non-live revisions remain. `live` holds revision names (and hashes) that generated objects or the
 * parent's status name; the latest revision (the parent's target state) is always kept.
 */
export function truncationPlan<T extends ControllerRevision>(owned: readonly T[], live: ReadonlySet<string>, limit: number): T[] {
  const sorted = sortRevisions(owned);
  const latest = sorted[sorted.length - 1];
  const isLive = (r: T) => r === latest || live.has(r.metadata.name ?? '') || live.has(r.metadata.labels?.[HASH_LABEL] ?? '\0');
  const dead = sorted.filter((r) => !isLive(r));
  return dead.slice(0, Math.max(0, dead.length - Math.max(0, limit)));
}

/**
 * Whether truncation could delete anything from `owned` revisions under `limit`: it keeps the latest and at
 * least `limit` others, so not unless there are more. Cheap to know where the revisions are listed anyway.
 */
export function truncationMayDelete(owned: number, limit: number): boolean {
  return owned - 1 > Math.max(0, limit);
}

/** On each revision: its hash, always the suffix of its name (upstream leaves it stale after a collision). */
export const HASH_LABEL = 'controller.kubernetes.io/hash';
/** On each revision: the parent's name, to select a parent's history. */
export const PARENT_LABEL = 'outrigger.dev/parent';
/** On each revision: the parent's kind and group, so that a DaemonSet never adopts a StatefulSet's history. */
export const PARENT_KIND_LABEL = 'outrigger.dev/parent-kind';

/**
 * Revisions another controller keeps for a parent (kube-controller-manager's StatefulSet and DaemonSet
 * controllers', LWS's): the parent controls them and they carry neither of Outrigger's labels, whatever else
 * they carry (LWS labels its own with the set's name and key only; docs/controllers/history.md#coexistence).
 */
export function foreignRevisions<T extends KubeObject>(
  revisions: readonly T[],
  parentKind: { group: string; kind: string },
  parentUid?: string,
): T[] {
  return revisions.filter((r) => {
    const ref = r.metadata.ownerReferences?.find((o) => o.controller === true);
    if (!ref || ref.kind !== parentKind.kind || parseApiVersion(ref.apiVersion).group !== parentKind.group) return false;
    if (parentUid !== undefined && ref.uid !== parentUid) return false;
    const labels = r.metadata.labels ?? {};
    return labels[PARENT_LABEL] === undefined && labels[PARENT_KIND_LABEL] === undefined;
  });
}

/**
 * Whether a parent's own selector matches a revision's labels: its controller (kube-controller-manager's
 * StatefulSet and DaemonSet controllers) would then list the revision with its own history and adopt it as an
 * orphan. The selector in either form (selectorAt); none, or one that does not parse, matches nothing.
 */
export function selectsRevision(selector: unknown, labels: Readonly<Record<string, string>>): boolean {
  try {
    return matches(selectorAt(selector), labels);
  } catch (err) {
    if (err instanceof SelectorError) return false;
    throw err;
  }
}

export type KeyedOutcome<T extends ControllerRevision> = { kind: 'unchanged'; revision: T } | { kind: 'create'; key: string };

/**
 * Seed 001 (KEP-238), revisionKey mode: each revision carries the key (`label`) of the generated objects made
 * from it, and `current` is the key those objects carry now.
 *  Case 1, upgrade: the objects have a key no revision has: record the target state under that key, so the key
 *    does not change and nothing rolls.
 *  Case 2, new object: no key yet; and case 3, update: the current key's revision holds another state. A
 *    revision holding this state already (a rollout in progress, a redelivery) is the answer; else a new one,
 *    keyed by `hashKey` (the state's hash), which the parent's own controller then rolls the objects to.
 */
// eslint-disable-next-line max-params -- beside decide's three, the key's three parts (label, current, hash); the unit tests state each case as one positional call
export function decideByKey<T extends ControllerRevision>(
  candidate: Json,
  owned: readonly T[],
  label: string,
  current: string | undefined,
  hashKey: string,
  defaults?: DefaultsSchema,
): KeyedOutcome<T> {
  const sorted = sortRevisions(owned);
  if (current !== undefined) {
    const ofKey = sorted.filter((r) => r.metadata.labels?.[label] === current).at(-1);
    if (!ofKey) return { kind: 'create', key: current };
    if (semanticallyEqual(ofKey.data, candidate, defaults)) return { kind: 'unchanged', revision: ofKey };
  }
  const same = sorted.filter((r) => semanticallyEqual(r.data, candidate, defaults)).at(-1);
  return same ? { kind: 'unchanged', revision: same } : { kind: 'create', key: hashKey };
}

/**
 * The current key among the generated objects the parent controls (docs/controllers/history.md#keyed-revisions-revisionkey-mode): the one named
 * like the parent, or else the first by name; objects being deleted, or without the key label, do not count.
 */
export function currentKeyOf(parentName: string | undefined, objects: readonly KubeObject[], label: string): string | undefined {
  const keyed = objects.filter((o) => o.metadata.labels?.[label] && !o.metadata.deletionTimestamp);
  const named = keyed.find((o) => o.metadata.name === parentName);
  if (named) return named.metadata.labels![label];
  return [...keyed].sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''))[0]?.metadata.labels?.[label];
}
