// `outrigger migrator-role`: the storage migrator's ClusterRole narrowed to the resources a cluster's StorageStates
// name (docs/operations/security.md#the-migrator). Reads the StorageStates as the kubeconfig's user; prints YAML.
import { dump } from 'js-yaml';
import { gvr, type KubeClient } from '../shared/kube/index.ts';
import { MIGRATION_GROUP, MIGRATION_VERSION, MIGRATOR_ROLE, migratorRole, type StorageState } from '../shared/storage/index.ts';

export const migratorRoleUsage = `usage: outrigger migrator-role [--kubeconfig PATH] [--context NAME]

Prints, as YAML, the storage migrator's ClusterRole (${MIGRATOR_ROLE}) narrowed to the
resources the cluster's StorageStates name: list and patch on those alone, instead of on every resource as
cluster/rbac.yaml grants. Apply it over that one (outrigger migrator-role | kubectl apply -f -). Run it again
after a new resource is served (a CRD installed, a cluster upgraded): until then a migration of that resource
fails Forbidden. Reads only.
`;

export async function migratorRoleCommand(kube: KubeClient): Promise<string> {
  const states = await kube.listAll<StorageState>(gvr(MIGRATION_GROUP, MIGRATION_VERSION, 'storagestates'));
  if (!states.length) throw new Error('the cluster has no StorageStates: run the storage poll first (it writes one per resource it finds)');
  return dump(migratorRole(states), { lineWidth: 120, noRefs: true });
}
