// A CompositeController's rolling updates, pure (docs/controllers/compositecontroller.md#rolling-updates): the
// parent's revisions (ControllerRevisions of its revisionHistory fields, kept by the history core's helpers), which
// revision each child belongs to (a label on the child: the only state, so a restarted or duplicated pass decides
// the same), which child moves to the latest revision next, one per pass, and the pause while a child already on
// it fails its status checks. Revisions are never changed, and none a child belongs to is deleted.
import { parseApiVersion, type KubeObject } from '../kube/resource.ts';
import { semanticallyEqual, type Json, type JsonObject } from '../json.ts';
import { targetState } from '../history/data.ts';
import { withoutDirectives } from '../history/rollback.ts';
import { sortRevisions, truncationPlan, type ControllerRevision } from '../history/revisions.ts';
import { appliedDiffers, identityOf } from '../map/plan/outputs.ts';
import { controllerOf, isBeingDeleted } from '../ownership/controller-ref.ts';
import { APPLIED_ANNOTATION, type ConditionCheck, type RollingRule } from './api.ts';
import type { ChildKind } from './plan.ts';

/** On each child of a rolling kind: the name of the parent's revision it belongs to. */
export const REVISION_LABEL = 'composite.outrigger.dev/revision';
/** How many revisions no child belongs to are kept, for `outrigger history` (the history core's default limit). */
export const KEPT_REVISIONS = 10;

/** Whether any child rule rolls: only then are revisions kept and the hook called per revision. */
export const anyRolling = (kinds: readonly ChildKind[]): boolean => kinds.some((k) => k.rolling);

/** The parent's revisions among those listed by its labels: those it controls, oldest first. */
export function parentRevisions<T extends ControllerRevision>(parent: KubeObject, listed: readonly T[]): T[] {
  return sortRevisions(listed.filter((r) => controllerOf(r)?.uid === parent.metadata.uid));
}

/** The revision data of the parent as it is now: its revisionHistory fields. */
export const revisionData = (parent: KubeObject, paths: readonly string[]): JsonObject =>
  targetState(parent as unknown as JsonObject, paths);

/**
 * The revision holding the parent's fields as they are now (the newest, if several do): the latest. Undefined
 * when none does, and a new one is made. Found by equal data, not by number: a parent set back to an older
 * revision's fields makes that revision the latest again, unchanged (a rollback moves no revision number).
 */
export function latestRevision<T extends ControllerRevision>(revisions: readonly T[], data: JsonObject): T | undefined {
  return [...sortRevisions(revisions)].reverse().find((r) => semanticallyEqual(r.data, data as Json));
}

/**
 * The parent as a revision has it: each revisioned field set to the revision's value, removed where the revision
 * holds null (absent when it was taken); a path the revision does not hold at all (the controller's fieldPaths
 * grew since) keeps the parent's value.
 */
export function parentAt(parent: KubeObject, data: Json | undefined, paths: readonly string[]): KubeObject {
  const copy = structuredClone(parent) as unknown as JsonObject;
  for (const path of paths) {
    const parts = path.split('.');
    let from: Json | undefined = data;
    for (const p of parts) from = from && typeof from === 'object' && !Array.isArray(from) ? from[p] : undefined;
    if (from === undefined) continue;
    let to: JsonObject = copy;
    for (const p of parts.slice(0, -1)) {
      const next = to[p];
      if (!next || typeof next !== 'object' || Array.isArray(next)) to[p] = {};
      to = to[p] as JsonObject;
    }
    const leaf = parts.at(-1)!;
    const value = withoutDirectives(from);
    if (value === null || value === undefined) delete to[leaf];
    else to[leaf] = value;
  }
  return copy as unknown as KubeObject;
}

const revisionOf = (o: KubeObject): string | undefined => o.metadata.labels?.[REVISION_LABEL];
const withRevision = (d: KubeObject, revision: string | undefined): KubeObject =>
  revision === undefined ? d : { ...d, metadata: { ...d.metadata, labels: { ...d.metadata.labels, [REVISION_LABEL]: revision } } };
/** Whether the child is written as `d` has it, whichever revision it is labelled with. */
const writtenAs = (o: KubeObject, d: KubeObject) => !appliedDiffers(o, withRevision(d, revisionOf(o)), APPLIED_ANNOTATION);

/**
 * The revisions the hook is asked about this pass: the latest, and every other the parent has that an observed
 * child of a rolling kind belongs to, oldest first.
 */
export function revisionsToAsk<T extends ControllerRevision>(
  revisions: readonly T[],
  latest: string,
  observed: readonly KubeObject[],
  kinds: readonly ChildKind[],
): T[] {
  const named = new Set(observed.filter((o) => rollingOf(kinds, o)).map(revisionOf));
  return sortRevisions(revisions).filter((r) => r.metadata.name !== latest && named.has(r.metadata.name));
}

/** The child rule's rolling update, if its kind rolls. */
export function rollingOf(kinds: readonly ChildKind[], o: KubeObject): RollingRule | undefined {
  const { group } = parseApiVersion(o.apiVersion ?? '');
  return kinds.find((k) => k.group === group && k.kind === o.kind)?.rolling;
}

export interface Updated {
  status: 'True' | 'False';
  reason: 'OnLatestRevision' | 'RolloutProgressing' | 'RolloutWaiting';
  message: string;
}

export interface RolloutPlan {
  /** The children to write (plan.ts diffChildren): each of a rolling kind as its revision's answer has it, labelled. */
  desired: KubeObject[];
  /**
   * Children whose only change is their revision label (identities): written in place whatever their method, so that
   * RollingRecreate never recreates a child to relabel it.
   */
  relabel: Set<string>;
  /** The child moved to the latest revision this pass (its identity), if one was. */
  moved: string | undefined;
  /** Why the rollout waits, if it does. */
  waiting: string | undefined;
  /** The parent's `Updated` condition. */
  updated: Updated;
  /** The revisions a child belongs to once the pass is written, the latest among them. */
  live: Set<string>;
}

const describe = (o: KubeObject) => `${o.kind ?? '?'} ${o.metadata.name ?? '?'}`;

/**
 * Why a child of the latest revision keeps the rollout waiting, or undefined when it passes: it must be there,
 * not being deleted, written as the latest revision's answer has it, have seen that write where it reports an
 * observedGeneration (RollingInPlace), and pass every status check. The message quotes names and the controller's
 * checks, never a status the child carries.
 */
export function unhappy(child: KubeObject | undefined, desired: KubeObject, rolling: RollingRule): string | undefined {
  const what = describe(desired);
  if (!child) return `${what} is not there yet`;
  if (isBeingDeleted(child)) return `${what} is being deleted`;
  if (!writtenAs(child, desired)) return `${what} is not updated yet`;
  const status = (child.status ?? {}) as { observedGeneration?: unknown; conditions?: unknown };
  if (
    rolling.method === 'RollingInPlace' &&
    typeof status.observedGeneration === 'number' &&
    status.observedGeneration > 0 &&
    status.observedGeneration < (child.metadata.generation ?? 0)
  )
    return `${what} has not observed its latest spec`;
  for (const check of rolling.checks) {
    const failed = failedCheck(status.conditions, check);
    if (failed) return `${what} fails its status check: ${failed}`;
  }
  return undefined;
}

function failedCheck(conditions: unknown, check: ConditionCheck): string | undefined {
  const found = Array.isArray(conditions)
    ? (conditions as Array<Record<string, unknown>>).find((c) => c && typeof c === 'object' && c.type === check.type)
    : undefined;
  if (!found) return `condition ${check.type} is missing`;
  if (check.status !== undefined && found.status !== check.status) return `condition ${check.type} is not ${JSON.stringify(check.status)}`;
  if (check.reason !== undefined && found.reason !== check.reason)
    return `condition ${check.type} has not the reason ${JSON.stringify(check.reason)}`;
  return undefined;
}

/**
 * One pass's rollout. `answers` holds each asked revision's children (prepared, plan.ts prepareChildren), the
 * latest's among them; the latest's answer says which children there are (one it does not name is deleted, as
 * without rolling), in its order. A child of a rolling kind:
 *  - not there yet: created from the latest answer, on the latest revision;
 *  - on the latest revision: kept as the latest answer has it;
 *  - on another revision whose answer names it: kept as that answer has it, unless the latest answer has it the
 *    same (then it only takes the latest revision's label, at once);
 *  - on no revision the parent has (a label removed, a child adopted, a rule that just began to roll): left as it
 *    is, unless the latest answer has it the same.
 * Then the first child, in the latest answer's order, not on the latest revision moves to it, written by its
 * rule's method, but only when every child on the latest revision passes (unhappy): otherwise the rollout waits.
 * Children of other kinds are written as the latest answer has them.
 */
export function planRollout(input: {
  latest: string;
  answers: ReadonlyMap<string, readonly KubeObject[]>;
  observed: readonly KubeObject[];
  kinds: readonly ChildKind[];
}): RolloutPlan {
  const { latest, answers, kinds } = input;
  const observed = new Map(input.observed.map((o) => [identityOf(o), o]));
  const byRevision = new Map([...answers].map(([r, cs]) => [r, new Map(cs.map((c) => [identityOf(c), c]))]));
  const latestAnswer = answers.get(latest) ?? [];
  const desired: KubeObject[] = [];
  const onLatest: Array<{ d: KubeObject; rolling: RollingRule }> = [];
  const pending: Array<{ index: number; d: KubeObject }> = [];
  const relabel = new Set<string>();
  for (const d of latestAnswer) {
    const rolling = rollingOf(kinds, d);
    if (!rolling) {
      desired.push(d);
      continue;
    }
    const id = identityOf(d);
    const o = observed.get(id);
    const from = o && revisionOf(o);
    if (!o || from === latest || writtenAs(o, d)) {
      if (o && from !== latest) relabel.add(id);
      desired.push(withRevision(d, latest));
      onLatest.push({ d, rolling });
      continue;
    }
    const held = from !== undefined ? byRevision.get(from)?.get(id) : undefined;
    pending.push({ index: desired.length, d });
    desired.push(held ? withRevision(held, from) : o);
  }
  const live = new Set([latest]);
  const liveOf = () => {
    for (const d of desired) {
      const r = rollingOf(kinds, d) && revisionOf(d);
      if (r) live.add(r);
    }
    return live;
  };
  const next = pending[0];
  if (!next) return { desired, relabel, moved: undefined, waiting: undefined, updated: onLatestRevision(latest), live: liveOf() };
  for (const { d, rolling } of onLatest) {
    const why = unhappy(observed.get(identityOf(d)), d, rolling);
    if (why)
      return {
        desired,
        relabel,
        moved: undefined,
        waiting: why,
        updated: { status: 'False', reason: 'RolloutWaiting', message: why },
        live: liveOf(),
      };
  }
  desired[next.index] = withRevision(next.d, latest);
  return {
    desired,
    relabel,
    moved: identityOf(next.d),
    waiting: undefined,
    updated: { status: 'False', reason: 'RolloutProgressing', message: `updating ${describe(next.d)}` },
    live: liveOf(),
  };
}

const onLatestRevision = (latest: string): Updated => ({
  status: 'True',
  reason: 'OnLatestRevision',
  message: `every child is on the latest revision, ${latest}`,
});

/**
 * The revisions to delete: the oldest no child belongs to, beyond KEPT_REVISIONS of them (the history core's
 * truncation). The latest and every live one stay, whatever the limit.
 */
export function revisionsToDelete<T extends ControllerRevision>(
  revisions: readonly T[],
  live: ReadonlySet<string>,
  limit = KEPT_REVISIONS,
): T[] {
  return truncationPlan(revisions, live, limit).filter((r) => !live.has(r.metadata.name ?? ''));
}
