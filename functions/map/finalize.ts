// The controller's finalizer on a parent: added while it has a finalize hook, removed once that hook is done.
import { isKubeError, KubeError, type KubeObject } from '../../shared/kube/index.ts';
import { finalizerName } from '../../shared/map/api.ts';
import { finalizersWith } from '../../shared/map/plan/index.ts';
import type { ResolvedMapController } from './controllers.ts';
import { problemOf, type MapContext, type Problem } from './pass.ts';

/** A write of the parent's finalizer refused: the parent's problem, named as such. */
export class FinalizerError extends Error {
  readonly problem: Problem;
  constructor(problem: Problem) {
    super(problem.message);
    this.name = 'FinalizerError';
    this.problem = problem;
  }
}

/**
 * Adds or removes the controller's finalizer on the parent (a merge patch conditional on the resourceVersion read,
 * re-read on a conflict). Throws FinalizerError when the apiserver refuses it.
 */
export async function setFinalizer(ctx: MapContext, mc: ResolvedMapController, parent: KubeObject, want: boolean): Promise<KubeObject> {
  try {
    return await writeFinalizer(ctx, mc, parent, want);
  } catch (err) {
    if (err instanceof KubeError) throw new FinalizerError(finalizerProblem(err, mc));
    throw err;
  }
}

async function writeFinalizer(ctx: MapContext, mc: ResolvedMapController, parent: KubeObject, want: boolean): Promise<KubeObject> {
  const name = finalizerName(mc.name);
  const ns = mc.parent.namespaced ? parent.metadata.namespace : undefined;
  let current = parent;
  for (let attempt = 0; ; attempt += 1) {
    const finalizers = finalizersWith(current.metadata.finalizers, name, want);
    if (!finalizers) return current;
    try {
      const written = await ctx.kube.patch(
        mc.parent,
        { name: current.metadata.name ?? '', namespace: ns },
        { metadata: { resourceVersion: current.metadata.resourceVersion, finalizers: finalizers.length ? finalizers : null } },
        'merge',
      );
      return { ...written, apiVersion: parent.apiVersion, kind: parent.kind };
    } catch (err) {
      if (!isKubeError(err, 'Conflict') || attempt >= 4) throw err;
      const fresh = await ctx.kube.find(mc.parent, { name: current.metadata.name ?? '', namespace: ns });
      // Gone, or another object of that name: nothing to add or remove any more.
      if (!fresh || fresh.metadata.uid !== parent.metadata.uid) return current;
      current = { ...fresh, apiVersion: parent.apiVersion, kind: parent.kind };
    }
  }
}

function finalizerProblem(err: KubeError, mc: ResolvedMapController): Problem {
  if (isKubeError(err, 'Forbidden'))
    return {
      mapKey: '',
      what: 'finalizer',
      reason: 'Forbidden',
      message: `the controller's ServiceAccount may not patch ${mc.parent.resource}${mc.parent.group ? `.${mc.parent.group}` : ''} to set its finalizer`,
      detail: err.message,
    };
  return problemOf(err, '', 'finalizer');
}
