// Claiming, carried out. Adoption and release are JSON merge patches that restate the whole ownerReferences
// list together with the child's uid and resourceVersion. The uid is immutable, so a child deleted and
// recreated under the same name answers Invalid instead of being captured; the resourceVersion makes the
// write a compare-and-set, so a concurrent change (another controller adopting first, a label edit) answers
// Conflict and the child is re-read and re-decided. Merge patches work for custom resources too, which
// strategic merge patches do not.
import pLimit from 'p-limit';
import type { KubeApi } from '../kube/api.ts';
import { isKubeError } from '../kube/errors.ts';
import type { GVR, KubeObject } from '../kube/resource.ts';
import { planClaim, type ClaimOptions } from './claim.ts';
import { controllerOf, isBeingDeleted, isOwnedBy, newControllerRef, newOwnerRef, type ParentIdentity } from './controller-ref.ts';
import type { Selector } from './selector.ts';

export interface ClaimContext {
  kube: KubeApi;
  /** The parent's resource, to re-read it before the first adoption. */
  parentResource: GVR;
  /** Who re-reads the parent (a definition's ServiceAccount: docs/operations/security.md); `kube` when absent. */
  parentReader?: KubeApi;
  /** The children's resource. */
  childResource: GVR;
}

export interface ClaimResult<T extends KubeObject> {
  /** What the parent owns after the claim: to count and act on. */
  owned: T[];
  adopted: T[];
  released: T[];
  /** Adoptions another controller won, or children that vanished or changed identity meanwhile. */
  lost: T[];
  /** Set when the parent turned out to be gone or being deleted on re-read: nothing was adopted. */
  parentGone?: string;
}

const MAX_ATTEMPTS = 3;
/** Patches in flight at once per claim: enough to overlap round trips, few enough not to flood the apiserver. */
export const CLAIM_CONCURRENCY = 16;

export async function claim<T extends KubeObject>(
  ctx: ClaimContext,
  parent: ParentIdentity,
  selector: Selector,
  candidates: readonly T[],
  opts: ClaimOptions = {},
): Promise<ClaimResult<T>> {
  const plan = planClaim(parent, selector, candidates, opts);
  const result: ClaimResult<T> = { owned: [...plan.owned], adopted: [], released: [], lost: [] };

  // The event that started this sync may be stale: before adopting anything, confirm from the apiserver
  // that the parent still exists with this uid and is not being deleted (a GC orphaning race otherwise
  // re-adopts children that are then deleted with it). Once per claim, and only when there is something to adopt.
  if (plan.adopt.length > 0) {
    const gone = await recheckParent(ctx, parent);
    if (gone) return { ...result, parentGone: gone };
  }

  const ref = opts.reference === 'owner' ? newOwnerRef(parent) : newControllerRef(parent);
  const claimed: Claimed = { parent, selector, opts, ref };
  const limit = pLimit(CLAIM_CONCURRENCY);
  const outcomes = await Promise.all([
    ...plan.adopt.map((child) => limit(async () => ({ child, op: 'adopt' as const, out: await settle(ctx, claimed, child, 'adopt') }))),
    ...plan.release.map((child) =>
      limit(async () => ({ child, op: 'release' as const, out: await settle(ctx, claimed, child, 'release') })),
    ),
  ]);
  for (const { child, op, out } of outcomes) {
    if (out.state === 'owned') {
      result.owned.push(out.obj as T);
      if (op === 'adopt') result.adopted.push(out.obj as T);
    } else if (out.state === 'released') {
      result.released.push(child);
    } else {
      result.lost.push(child);
    }
  }
  return result;
}

async function recheckParent(ctx: ClaimContext, parent: ParentIdentity): Promise<string | undefined> {
  const { name, namespace, uid } = parent.metadata;
  try {
    const fresh = await (ctx.parentReader ?? ctx.kube).get(ctx.parentResource, { name: name ?? '', namespace });
    if (fresh.metadata.uid !== uid)
      return `${parent.kind} ${namespace ? `${namespace}/` : ''}${name} was replaced (uid ${fresh.metadata.uid}, not ${uid})`;
    if (isBeingDeleted(fresh)) return `${parent.kind} ${namespace ? `${namespace}/` : ''}${name} is being deleted`;
    return undefined;
  } catch (err) {
    if (isKubeError(err, 'NotFound')) return `${parent.kind} ${namespace ? `${namespace}/` : ''}${name} no longer exists`;
    throw err;
  }
}

type Outcome = { state: 'owned'; obj: KubeObject } | { state: 'released' } | { state: 'lost' };

/** What every child of one claim is settled against: the parent, its selector, the options and the reference it adds. */
interface Claimed {
  parent: ParentIdentity;
  selector: Selector;
  opts: ClaimOptions;
  ref: ReturnType<typeof newControllerRef>;
}

/** Adopts or releases one child, re-reading and re-deciding on Conflict, a bounded number of times. */
async function settle(
  ctx: ClaimContext,
  { parent, selector, opts, ref }: Claimed,
  initial: KubeObject,
  op: 'adopt' | 'release',
): Promise<Outcome> {
  let child = initial;
  let action: 'adopt' | 'release' | 'owned' | 'ignored' = op;
  for (let attempt = 1; ; attempt += 1) {
    if (action === 'owned') return { state: 'owned', obj: child };
    const stillOurs = opts.reference === 'owner' ? isOwnedBy(child, parent) : controllerOf(child)?.uid === parent.metadata.uid;
    if (action === 'ignored') return op === 'release' && !stillOurs ? { state: 'released' } : { state: 'lost' };
    // An adoption replaces any reference the child already has to the parent (a plain one, before a ControllerRef).
    const refs = (child.metadata.ownerReferences ?? []).filter((r) => r.uid !== parent.metadata.uid);
    const ownerReferences = action === 'adopt' ? [...refs, ref] : refs;
    // A release marks the child as the controller's (ClaimOptions.mark), so its parents may adopt it back.
    const annotations = action === 'release' && opts.mark ? { annotations: { [opts.mark.annotation]: opts.mark.value } } : {};
    const patch = {
      metadata: { uid: child.metadata.uid, resourceVersion: child.metadata.resourceVersion, ownerReferences, ...annotations },
    };
    try {
      const updated = await ctx.kube.patch(
        ctx.childResource,
        { name: child.metadata.name ?? '', namespace: child.metadata.namespace },
        patch,
        'merge',
      );
      return action === 'adopt' ? { state: 'owned', obj: updated } : { state: 'released' };
    } catch (err) {
      // Gone, or recreated under the same name (uid mismatch), or a second controller ref: nothing to do.
      if (isKubeError(err, 'NotFound')) return action === 'release' ? { state: 'released' } : { state: 'lost' };
      if (isKubeError(err, 'Invalid')) return action === 'release' ? { state: 'released' } : { state: 'lost' };
      if (!isKubeError(err, 'Conflict') || attempt >= MAX_ATTEMPTS) throw err;
    }
    // Someone changed the child since it was read: read it again and decide again, by the same rules.
    let fresh: KubeObject;
    try {
      fresh = await ctx.kube.get(ctx.childResource, { name: child.metadata.name ?? '', namespace: child.metadata.namespace });
    } catch (err) {
      if (isKubeError(err, 'NotFound')) return action === 'release' ? { state: 'released' } : { state: 'lost' };
      throw err;
    }
    if (fresh.metadata.uid !== initial.metadata.uid) return action === 'release' ? { state: 'released' } : { state: 'lost' };
    child = fresh;
    const again = planClaim(parent, selector, [fresh], opts);
    action = again.adopt.length ? 'adopt' : again.release.length ? 'release' : again.owned.length ? 'owned' : 'ignored';
  }
}
