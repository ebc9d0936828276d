// Outrigger's migrator: runs a StorageVersionMigration by listing its resource in chunks of 500 and rewriting
// each object with a no-op update, so the apiserver re-encodes it at the current storage version. A Conflict
// means someone rewrote the object since the list (done); NotFound means it is gone (done). After each chunk
// the continue token goes to spec.continueToken, so an invocation that times out or dies resumes there.
// For a CRD, success also narrows status.storedVersions to the storage version, when that did not change
// during the run (the upstream migrator never did this).
import pLimit from 'p-limit';
import { apiVersionOf, isKubeError, Resources, gvr, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import type { State } from '../../shared/state/index.ts';
import { conditionsFor, CRD_STORAGE_VERSION_ANNOTATION, isTerminal, phaseOf, type StorageVersionMigration } from '../../shared/storage/index.ts';
import { migrations } from './context.ts';

export const CHUNK = 500;
const LEASE_TTL_MS = 15 * 60_000 + 60_000;

export interface MigratorContext {
  cluster: string;
  kube: KubeClient;
  state: State;
  holder: string;
  now: () => Date;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export interface MigrateResult {
  migration: string;
  outcome: 'gone' | 'finished-before' | 'busy' | 'paused' | 'Succeeded' | 'Failed';
  chunks: number;
  rewritten: number;
  conflicts: number;
  notFound: number;
  storedVersions?: string[];
  message?: string;
}

interface CRD extends KubeObject {
  spec: { versions: Array<{ name: string; storage: boolean }> };
  status?: { storedVersions?: string[] };
}

/** Runs (or resumes) one migration until it finishes or `shouldPause` says the invocation is nearly out of time. */
export async function runMigration(ctx: MigratorContext, name: string, opts: { shouldPause?: () => boolean; chunk?: number } = {}): Promise<MigrateResult> {
  const result: MigrateResult = { migration: name, outcome: 'gone', chunks: 0, rewritten: 0, conflicts: 0, notFound: 0 };
  let svm = await ctx.kube.find<StorageVersionMigration>(migrations, name);
  if (!svm) return result;
  if (isTerminal(phaseOf(svm))) return { ...result, outcome: 'finished-before' };
  const lease = await ctx.state.leases.acquire(ctx.cluster, `migration/${name}`, ctx.holder, LEASE_TTL_MS);
  if (!lease) return { ...result, outcome: 'busy' };
  try {
    const { group = '', version, resource } = svm.spec.resource;
    if (!version) return await finish(ctx, svm, result, 'Failed', 'InvalidSpec', 'spec.resource.version is required');
    const target = gvr(group, version, resource);
    const crdName = group === '' ? undefined : `${resource}.${group}`;
    if (phaseOf(svm) === 'Pending') {
      const crd = crdName ? await getCrd(ctx.kube, crdName) : undefined;
      const storage = crd?.spec.versions.find((v) => v.storage)?.name;
      if (storage) svm = await ctx.kube.patch<StorageVersionMigration>(migrations, name, undefined, { metadata: { annotations: { [CRD_STORAGE_VERSION_ANNOTATION]: storage } } }, 'merge');
      svm = await setPhase(ctx, svm, 'Running', 'MigrationStarted', `rewriting ${resource}${group ? `.${group}` : ''} through ${version}`);
    }
    let token = svm.spec.continueToken ?? '';
    const limit = pLimit(8);
    for (;;) {
      let page;
      try {
        page = await ctx.kube.list(target, { limit: opts.chunk ?? CHUNK, continue: token || undefined });
      } catch (err) {
        if (isKubeError(err, 'Gone')) {
          // The token expired (etcd compacted past it): start over; rewriting twice is harmless.
          ctx.log?.('continue token expired; restarting the list', { migration: name });
          token = '';
          continue;
        }
        if (isKubeError(err, 'NotFound')) return await finish(ctx, svm, result, 'Failed', 'ResourceNotServed', `the cluster does not serve ${resource} in ${group}/${version}`);
        if (isKubeError(err, 'Transient')) throw err;
        return await finish(ctx, svm, result, 'Failed', 'ListFailed', err instanceof Error ? err.message : String(err));
      }
      const kind = (page.kind ?? '').replace(/List$/, '');
      const failures: string[] = [];
      await Promise.all(
        page.items.map((item) =>
          limit(async () => {
            try {
              await ctx.kube.replace(target, { ...item, apiVersion: apiVersionOf(target), kind });
              result.rewritten += 1;
            } catch (err) {
              if (isKubeError(err, 'Conflict')) result.conflicts += 1;
              else if (isKubeError(err, 'NotFound')) result.notFound += 1;
              else if (isKubeError(err, 'Transient')) throw err;
              else failures.push(`${item.metadata.namespace ? `${item.metadata.namespace}/` : ''}${item.metadata.name}: ${err instanceof Error ? err.message : String(err)}`);
            }
          }),
        ),
      );
      if (failures.length) return await finish(ctx, svm, result, 'Failed', 'RewriteFailed', `${failures.length} object(s) could not be rewritten; first: ${failures[0]}`);
      result.chunks += 1;
      token = page.metadata.continue ?? '';
      svm = await ctx.kube.patch<StorageVersionMigration>(migrations, name, undefined, { spec: { continueToken: token } }, 'merge');
      if (!token) break;
      if (opts.shouldPause?.()) return { ...result, outcome: 'paused' };
    }
    if (crdName) {
      const narrowed = await narrowStoredVersions(ctx.kube, crdName, svm.metadata.annotations?.[CRD_STORAGE_VERSION_ANNOTATION]);
      if (narrowed) result.storedVersions = narrowed;
    }
    return await finish(ctx, svm, result, 'Succeeded', 'MigrationSucceeded', `rewrote ${result.rewritten} object(s); ${result.conflicts} already rewritten, ${result.notFound} gone`);
  } finally {
    await ctx.state.leases.release(lease).catch(() => undefined);
  }
}

async function getCrd(kube: KubeClient, name: string): Promise<CRD | undefined> {
  return kube.find<CRD>(Resources.customResourceDefinitions, name);
}

/** storedVersions := [storage version], only if the storage version is the one the run started with. */
async function narrowStoredVersions(kube: KubeClient, name: string, startedWith: string | undefined): Promise<string[] | undefined> {
  const crd = await getCrd(kube, name);
  const storage = crd?.spec.versions.find((v) => v.storage)?.name;
  if (!crd || !storage || storage !== startedWith) return undefined;
  if (crd.status?.storedVersions?.length === 1 && crd.status.storedVersions[0] === storage) return [storage];
  await kube.patch(Resources.customResourceDefinitions, name, undefined, { metadata: { resourceVersion: crd.metadata.resourceVersion }, status: { storedVersions: [storage] } }, 'merge', { subresource: 'status' });
  return [storage];
}

async function setPhase(ctx: MigratorContext, svm: StorageVersionMigration, phase: 'Running' | 'Succeeded' | 'Failed', reason: string, message: string): Promise<StorageVersionMigration> {
  const conditions = conditionsFor(svm.status?.conditions, phase, ctx.now(), reason, message);
  return ctx.kube.patch<StorageVersionMigration>(migrations, svm.metadata.name ?? '', undefined, { status: { conditions } }, 'merge', { subresource: 'status' });
}

async function finish(ctx: MigratorContext, svm: StorageVersionMigration, result: MigrateResult, phase: 'Succeeded' | 'Failed', reason: string, message: string): Promise<MigrateResult> {
  await setPhase(ctx, svm, phase, reason, message);
  ctx.log?.(`migration ${phase.toLowerCase()}`, { migration: svm.metadata.name, detail: message });
  return { ...result, outcome: phase, message };
}
