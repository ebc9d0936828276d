// The one way a MapController, CompositeController or DecoratorController finalizer is written, on a parent (as the
// definition's ServiceAccount) or on the definition itself (as Outrigger): docs/controllers/compositecontroller.md#finalizers-are-released.
import { isKubeError, type GVR, type KubeApi, type KubeObject } from '../../shared/kube/index.ts';
import { finalizersWith } from '../../shared/metacontroller/finalizers.ts';

/**
 * Adds or removes a finalizer: a merge patch of the whole list, conditional on the resourceVersion read (another's
 * finalizer added meanwhile is kept), read again on a conflict. An object gone, or replaced under its name, has
 * nothing to add or remove any more.
 */
export async function writeFinalizer(kube: KubeApi, resource: GVR, object: KubeObject, name: string, want: boolean): Promise<KubeObject> {
  const ref = { name: object.metadata.name ?? '', namespace: object.metadata.namespace };
  let current = object;
  for (let attempt = 0; ; attempt += 1) {
    const finalizers = finalizersWith(current.metadata.finalizers, name, want);
    if (!finalizers) return current;
    try {
      const written = await kube.patch(
        resource,
        ref,
        { metadata: { resourceVersion: current.metadata.resourceVersion, finalizers: finalizers.length ? finalizers : null } },
        'merge',
      );
      return { ...written, apiVersion: object.apiVersion, kind: object.kind };
    } catch (err) {
      if (isKubeError(err, 'NotFound')) return current;
      if (!isKubeError(err, 'Conflict') || attempt >= 4) throw err;
      const fresh = await kube.find(resource, ref);
      if (!fresh || fresh.metadata.uid !== object.metadata.uid) return current;
      current = { ...fresh, apiVersion: object.apiVersion, kind: object.kind };
    }
  }
}
