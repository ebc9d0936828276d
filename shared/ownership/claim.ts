// Claiming, the pure part: given a parent, its selector and the candidate children, decide what the parent
// owns, which orphans it adopts and which of its children it releases. Nothing here reads or writes; the
// shell (claim-shell.ts) carries the plan out. The Three Laws:
//  1. take ownership only of orphans that match (and, optionally, whose name fits the parent's family, or that carry
//     the controller's mark);
//  2. never act on an object another controller owns;
//  3. count only what it owns.
// A parent that is being deleted adopts nothing and releases nothing.
import type { KubeObject } from '../kube/resource.ts';
import { controllerOf, isBeingDeleted, isOwnedBy, type ParentIdentity } from './controller-ref.ts';
import { matches, type Selector } from './selector.ts';

export interface ClaimOptions {
  /** Adoption is allowed only for names this accepts (StatefulSet's `{parent}-{ordinal}` rule, say). */
  nameGuard?: (name: string, parent: ParentIdentity) => boolean;
  /**
   * How the parent owns its children: by ControllerRef (the default), or by a plain ownerReference, for children
   * another controller must never count as its own (docs/controllers/history.md#coexistence). With `owner`, a
   * child with no controller that references the parent is the parent's, and an adoption adds a plain reference.
   */
  reference?: 'controller' | 'owner';
  /**
   * Adoption only of orphans carrying this annotation with this value: what the controller writes on every object
   * it makes, so that a selector its parent's author chose cannot hand it objects it never made
   * (docs/controllers/compositecontroller.md#adoption). A release writes the mark, so a released child stays
   * adoptable by the controller's parents. Absent: any matching orphan (history's revisions, claimed by labels only
   * Outrigger writes).
   */
  mark?: ClaimMark | undefined;
}

/** An annotation and its value, marking an object as one a controller made. */
export interface ClaimMark {
  annotation: string;
  value: string;
}

/** Whether the object carries the mark. */
export const hasMark = (o: Pick<KubeObject, 'metadata'>, mark: ClaimMark): boolean =>
  o.metadata.annotations?.[mark.annotation] === mark.value;

export interface ClaimPlan<T extends KubeObject = KubeObject> {
  /** Children already controlled by the parent that still match: the parent's to count and act on. */
  owned: T[];
  /** Matching orphans to adopt. */
  adopt: T[];
  /** Children the parent controls that no longer match: to release (orphan). */
  release: T[];
  /** Everything else: owned by another controller, orphans that do not match, or left alone while deleting. */
  ignored: T[];
}

export function planClaim<T extends KubeObject>(
  parent: ParentIdentity,
  selector: Selector,
  candidates: readonly T[],
  opts: ClaimOptions = {},
): ClaimPlan<T> {
  const plan: ClaimPlan<T> = { owned: [], adopt: [], release: [], ignored: [] };
  const parentUid = parent.metadata.uid;
  const deleting = isBeingDeleted(parent);
  for (const child of candidates) {
    const ref = controllerOf(child);
    const fits = matches(selector, child.metadata.labels);
    const ours = ref ? ref.uid === parentUid : opts.reference === 'owner' && isOwnedBy(child, parent);
    if (ref || ours) {
      if (!ours) plan.ignored.push(child);
      else if (fits) plan.owned.push(child);
      else if (deleting) plan.ignored.push(child);
      else plan.release.push(child);
      continue;
    }
    const adoptable =
      !deleting &&
      fits &&
      !isBeingDeleted(child) &&
      (!parent.metadata.namespace || parent.metadata.namespace === child.metadata.namespace) &&
      (!opts.nameGuard || opts.nameGuard(child.metadata.name ?? '', parent)) &&
      (!opts.mark || hasMark(child, opts.mark));
    (adoptable ? plan.adopt : plan.ignored).push(child);
  }
  return plan;
}

/** StatefulSet's family rule: `{parent name}-{ordinal}`. */
export function ordinalNameGuard(name: string, parent: ParentIdentity): boolean {
  const prefix = `${parent.metadata.name ?? ''}-`;
  return name.startsWith(prefix) && /^(0|[1-9]\d*)$/.test(name.slice(prefix.length));
}
