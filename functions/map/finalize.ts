// The controller's finalizer on a parent: added while it has a finalize hook, removed once that hook is done.
import { isKubeError, KubeError, type KubeObject } from '../../shared/kube/index.ts';
import { writeFinalizer } from '../metacontroller/finalizers.ts';
import { finalizerName } from '../../shared/map/api.ts';
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
 * Adds or removes the controller's finalizer on the parent (writeFinalizer). Throws FinalizerError when the
 * apiserver refuses it.
 */
export async function setFinalizer(ctx: MapContext, mc: ResolvedMapController, parent: KubeObject, want: boolean): Promise<KubeObject> {
  try {
    return await writeFinalizer(ctx.kube, mc.parent, parent, finalizerName(mc.name), want);
  } catch (err) {
    if (err instanceof KubeError) throw new FinalizerError(finalizerProblem(err, mc));
    throw err;
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
