// A CRD whose storage version a test can move: Widget, namespaced, served at v1 and v2, stored at v1, spec open
// to any field.
import { Resources, getResourceList, gvr, type GVR, type KubeObject } from '../../shared/kube/index.ts';
import { adminClient, eventually } from './index.ts';

/** Creates the CRD as the admin; resolves once discovery serves it. Moving `storage: true` to v2 changes its storage version. */
export async function widgetCrd(group: string): Promise<{ resource: GVR; name: string }> {
  const admin = adminClient();
  const name = `widgets.${group}`;
  const version = (v: string, storage: boolean) => ({
    name: v,
    served: true,
    storage,
    schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } },
  });
  await admin.create(Resources.customResourceDefinitions, {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind: 'Widget', plural: 'widgets', singular: 'widget' },
      versions: [version('v1', true), version('v2', false)],
    },
  } as KubeObject);
  await eventually(
    async () => (await getResourceList(admin, group, 'v1').catch(() => undefined))?.resources.some((r) => r.name === 'widgets') ?? false,
    30_000,
  );
  return { resource: gvr(group, 'v1', 'widgets'), name };
}
