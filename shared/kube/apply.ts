// Server-side apply of manifests (YAML, several documents), as Outrigger's field manager: for tests and tools.
// Not re-exported by index.ts, so that no function bundle carries a YAML parser.
// Plain YAML: client-node's loader renames keys to its model's properties (x-kubernetes-* becomes x_kubernetes_*).
import { loadAll } from 'js-yaml';
import type { KubeClient } from './client.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { forgetDiscovery, resolveKind } from './discovery.ts';
import { Resources, type KubeObject } from './resource.ts';

export async function applyObject(client: KubeClient, obj: KubeObject): Promise<KubeObject> {
  if (!obj.apiVersion || !obj.kind || !obj.metadata?.name) {
    throw new Error(
      `a manifest needs apiVersion, kind and metadata.name (got ${JSON.stringify({ apiVersion: obj.apiVersion, kind: obj.kind })})`,
    );
  }
  const r = await resolveKind(client, obj.apiVersion, obj.kind);
  const namespace = r.namespaced ? (obj.metadata.namespace ?? 'default') : undefined;
  return client.patch(r, { name: obj.metadata.name, namespace }, obj, 'apply', { force: true });
}

/**
 * Applies every document in order. A CustomResourceDefinition is waited for until it is Established, and
 * discovery is refreshed, so that later documents (and callers) can use its kind at once.
 */
export async function applyManifests(client: KubeClient, yamlText: string, opts: { timeoutMs?: number } = {}): Promise<KubeObject[]> {
  const docs = (loadAll(yamlText) as unknown[]).filter((d): d is KubeObject => d !== null && typeof d === 'object');
  const applied: KubeObject[] = [];
  for (const doc of docs) {
    const obj = await applyObject(client, doc);
    applied.push(obj);
    if (doc.kind === 'CustomResourceDefinition') {
      await waitEstablished(client, obj.metadata.name ?? '', opts.timeoutMs ?? 30_000);
      forgetDiscovery(client);
    }
  }
  return applied;
}

async function waitEstablished(client: KubeClient, name: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const crd = await client.get(Resources.customResourceDefinitions, { name });
    const conditions = (crd.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? [];
    if (conditions.some((c) => c.type === 'Established' && c.status === 'True')) return;
    if (Date.now() > deadline) throw new Error(`CustomResourceDefinition ${name} was not Established within ${timeoutMs} ms`);
    await sleep(100);
  }
}
