// Writes of a parent's outputs: create (never taking over an object), server-side apply conditional on what was
// read, Recreate's delete and create, deletes with a uid precondition, and the release of a kept output.
import { apiVersionOf, isKubeError, type KubeObject, type ResolvedResource } from '../../shared/kube/index.ts';
import { appliedOwnership, identityOf, OutputError, releasePatch, type diffOutputs } from '../../shared/map/plan/index.ts';
import { isBeingDeleted } from '../../shared/ownership/index.ts';
import type { ResolvedMapController, ResolvedOutput } from './controllers.ts';
import type { MapContext, MapSyncResult } from './pass.ts';

/** Creates an output, then makes Outrigger's fields its applied ones. */
async function createOutput(ctx: MapContext, k: ResolvedOutput, d: KubeObject, final: Map<string, KubeObject>): Promise<void> {
  const made: KubeObject = { ...(await ctx.kube.create(k, d)), apiVersion: d.apiVersion, kind: d.kind };
  final.set(identityOf(d), made);
  // The create made Outrigger the owner of every field by an update; it becomes their applier, so the next
  // apply removes what the hook stops answering. Should this write be lost (someone wrote the output
  // first), the next pass makes it: the output is still owned by update.
  try {
    final.set(identityOf(d), { ...(await toApplied(ctx, k, made, d)), apiVersion: d.apiVersion, kind: d.kind });
  } catch (err) {
    if (!isKubeError(err, 'Conflict')) throw err;
  }
}

export async function apply(
  ctx: MapContext,
  mc: ResolvedMapController,
  changes: ReturnType<typeof diffOutputs>,
  final: Map<string, KubeObject>,
  result: MapSyncResult,
): Promise<void> {
  const kindOf = (o: KubeObject) => mc.outputs.find((k) => k.kind === o.kind && apiVersionOf(k) === o.apiVersion)!;
  for (const d of changes.create) {
    try {
      await createOutput(ctx, kindOf(d), d, final);
      result.created += 1;
    } catch (err) {
      // Someone else's object by that name: never taken over.
      if (isKubeError(err, 'AlreadyExists'))
        throw new OutputError(`output ${d.kind ?? ''} ${d.metadata.name ?? ''} exists and is not this parent's; it is left alone`);
      throw err;
    }
  }
  for (const update of changes.update) {
    const { desired, observed, content } = update;
    const k = kindOf(desired);
    if (k.updateMethod === 'Recreate' && content) {
      await recreate(ctx, k, update, final, result);
      continue;
    }
    const current = await toApplied(ctx, k, observed, desired);
    // Conditional on what was read: an output whose owner changed since is not written.
    const body = { ...desired, metadata: { ...desired.metadata, resourceVersion: current.metadata.resourceVersion } };
    const written = await ctx.kube.patch(
      k,
      { name: desired.metadata.name ?? '', namespace: k.namespaced ? desired.metadata.namespace : undefined },
      body,
      'apply',
      { force: true },
    );
    final.set(identityOf(desired), { ...written, apiVersion: desired.apiVersion, kind: desired.kind });
    result.updated += 1;
  }
  result.unchanged += changes.unchanged.length;
  for (const o of changes.delete) {
    const k = kindOf(o);
    try {
      await ctx.kube.delete(
        k,
        { name: o.metadata.name ?? '', namespace: k.namespaced ? o.metadata.namespace : undefined },
        // Background: some kinds (batch/v1 Jobs) orphan their own dependents when no policy is named. The
        // resourceVersion: an output changed since this pass read it is the next pass's to judge, with its change.
        { propagationPolicy: 'Background', preconditions: { uid: o.metadata.uid!, resourceVersion: o.metadata.resourceVersion! } },
      );
    } catch (err) {
      if (isKubeError(err, 'Conflict')) continue;
      if (!isKubeError(err, 'NotFound')) throw err;
    }
    final.delete(identityOf(o));
    result.deleted += 1;
  }
}

/**
 * updateStrategy Recreate: the output as read is deleted (conditional on its uid and resourceVersion: one changed
 * since is left for the next pass) and created anew from the answer. One that is still going (a finalizer of its
 * own) is created by the pass its deletion event brings.
 */
async function recreate(
  ctx: MapContext,
  k: ResolvedOutput,
  { observed, desired }: { observed: KubeObject; desired: KubeObject },
  final: Map<string, KubeObject>,
  result: MapSyncResult,
): Promise<void> {
  const ns = k.namespaced ? observed.metadata.namespace : undefined;
  if (!isBeingDeleted(observed)) {
    try {
      await ctx.kube.delete(
        k,
        { name: observed.metadata.name ?? '', namespace: ns },
        {
          propagationPolicy: 'Background',
          preconditions: { uid: observed.metadata.uid!, resourceVersion: observed.metadata.resourceVersion! },
        },
      );
    } catch (err) {
      if (!isKubeError(err, 'NotFound')) throw err;
    }
  }
  final.delete(identityOf(observed));
  try {
    await createOutput(ctx, k, desired, final);
    result.recreated += 1;
  } catch (err) {
    if (!isKubeError(err, 'AlreadyExists')) throw err;
    ctx.log?.('info', 'output being deleted for its recreation; the pass its deletion brings creates it', {
      output: `${ns ?? ''}/${observed.metadata.name ?? ''}`,
    });
  }
}

/** An output the finalize hook kept: no longer the parent's, so it outlives it. */
export async function release(
  ctx: MapContext,
  mc: ResolvedMapController,
  parent: KubeObject,
  o: KubeObject,
  result: MapSyncResult,
): Promise<void> {
  const k = mc.outputs.find((r) => r.kind === o.kind && apiVersionOf(r) === o.apiVersion);
  if (!k) return;
  try {
    await ctx.kube.patch(
      k,
      { name: o.metadata.name ?? '', namespace: k.namespaced ? o.metadata.namespace : undefined },
      releasePatch(o, parent.metadata.uid ?? ''),
      'merge',
    );
    result.released += 1;
  } catch (err) {
    if (!isKubeError(err, 'NotFound')) throw err;
  }
}

/** The output with Outrigger's fields owned by its applies only (appliedOwnership), conditional on what was read. */
async function toApplied(ctx: MapContext, k: ResolvedResource, o: KubeObject, desired: KubeObject): Promise<KubeObject> {
  const managedFields = appliedOwnership(o, ctx.kube.fieldManager, desired);
  if (!managedFields) return o;
  // Only managedFields change: no field changes owner to this patch's own update.
  return ctx.kube.patch(
    k,
    { name: o.metadata.name ?? '', namespace: k.namespaced ? o.metadata.namespace : undefined },
    { metadata: { resourceVersion: o.metadata.resourceVersion, managedFields } },
    'merge',
  );
}
