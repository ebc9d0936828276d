// Server-side apply of manifests (YAML, several documents), as Outrigger's field manager.
import { loadAllYaml } from '@kubernetes/client-node';
import type { KubeClient } from './client.ts';
import { resolveKind } from './discovery.ts';
import type { KubeObject } from './resource.ts';

export async function applyObject(client: KubeClient, obj: KubeObject): Promise<KubeObject> {
  if (!obj.apiVersion || !obj.kind || !obj.metadata?.name) {
    throw new Error(`a manifest needs apiVersion, kind and metadata.name (got ${JSON.stringify({ apiVersion: obj.apiVersion, kind: obj.kind })})`);
  }
  const r = await resolveKind(client, obj.apiVersion, obj.kind);
  const namespace = r.namespaced ? (obj.metadata.namespace ?? 'default') : undefined;
  return client.patch(r, obj.metadata.name, namespace, obj, 'apply', { force: true });
}

export async function applyManifests(client: KubeClient, yamlText: string): Promise<KubeObject[]> {
  const docs = (loadAllYaml(yamlText) as unknown[]).filter((d): d is KubeObject => d !== null && typeof d === 'object');
  const applied: KubeObject[] = [];
  for (const doc of docs) applied.push(await applyObject(client, doc));
  return applied;
}
