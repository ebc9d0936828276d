// The finalizers of CompositeControllers and DecoratorControllers (docs/controllers/compositecontroller.md#finalizers-are-released):
// a definition with a finalize hook carries Outrigger's, and while it does, its own stays on no parent it no longer
// serves. Its deletion takes its finalizer off every parent, as its ServiceAccount (the account that put it there),
// parents in terminating namespaces included, before Outrigger's goes and the definition with it.
import { definitionFinalizer, compositeFinalizer } from '../../shared/composite/api.ts';
import type { GVR, KubeApi } from '../../shared/kube/index.ts';
import { writeFinalizer } from '../metacontroller/finalizers.ts';
import { compositeControllers, decoratorControllers, type ResolvedDefinition } from './controllers.ts';

/** The definition's own resource (its finalizer is written as Outrigger: the definition is Outrigger's object). */
export const definitionResource = (d: Pick<ResolvedDefinition, 'kind'>): GVR =>
  d.kind === 'CompositeController' ? compositeControllers : decoratorControllers;

/**
 * Outrigger's finalizer on a definition with a finalize hook, before any pass may put its own on a parent; kept when
 * the hook is removed (its parents may still carry the definition's). Answers whether it wrote.
 */
export async function holdDefinition(kube: KubeApi, d: ResolvedDefinition): Promise<boolean> {
  if (!d.hooks.finalize || d.object.metadata.finalizers?.includes(definitionFinalizer(d.kind))) return false;
  await writeFinalizer(kube, definitionResource(d), d.object, definitionFinalizer(d.kind), true);
  return true;
}

/**
 * Takes the definition's finalizer off every parent that carries it, as `kube` (its ServiceAccount): the objects of
 * its parent resource (a decorator's: of each of its resources), wherever they are. Answers how many were released.
 */
export async function releaseParents(kube: KubeApi, d: ResolvedDefinition): Promise<number> {
  const name = compositeFinalizer(d.kind, d.name);
  let released = 0;
  for (const r of d.kind === 'CompositeController' ? [d.parentResource] : d.targets)
    for (const p of await kube.listAll(r))
      if (p.metadata.finalizers?.includes(name)) {
        await writeFinalizer(kube, r, p, name, false);
        released += 1;
      }
  return released;
}
