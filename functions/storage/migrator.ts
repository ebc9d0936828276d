// Outrigger's migrator: runs a StorageVersionMigration its storage leader recorded (shared/storage/migrator.ts) by
// listing the resource's metadata in chunks of 500 and rewriting each object with a merge patch that changes
// nothing but carries the object's resourceVersion as a precondition. The apiserver decodes the stored object,
// encodes it again in the current storage version and writes it only if the bytes changed; no object's body
// passes through JavaScript, so nothing JSON.parse would alter (an int64 above 2^53) is ever written back. A
// Conflict means someone rewrote the object since the list (done); NotFound that it is gone (done).
// Progress (the continue token, counts, "listed to the end") goes to status.progress after each chunk, so an
// invocation that times out or dies resumes there, and one that dies after the last chunk only finishes.
// For a CRD, success also narrows status.storedVersions to the storage version, only when this migrator
// rewrote the whole list and the CRD did not change in between (the upstream migrator never did this).
import pLimit, { type LimitFunction } from 'p-limit';
import { isKubeError, Resources, gvr, type GVR, type KubeClient, type KubeObject } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import type { State } from '../../shared/state/index.ts';
import {
  afterChunk,
  afterExpiry,
  conditionsFor,
  isOutriggers,
  isTerminal,
  MIGRATOR_LEASE_MS,
  phaseOf,
  progressOf,
  startProgress,
  storedVersionsVerdict,
  type MigrationProgress,
  type StorageVersionMigration,
} from '../../shared/storage/index.ts';
import { migrations, unrecordedBecause } from './context.ts';

export const CHUNK = 500;

export interface MigratorContext {
  cluster: string;
  kube: KubeClient;
  state: State;
  holder: string;
  now: () => Date;
  log?: Log;
}

export interface MigrateResult {
  migration: string;
  outcome: 'gone' | 'not-ours' | 'not-recorded' | 'finished-before' | 'busy' | 'paused' | 'Succeeded' | 'Failed';
  /** This invocation's work; `progress` has the run's totals. */
  chunks: number;
  rewritten: number;
  conflicts: number;
  notFound: number;
  /** Continue tokens that had expired in this invocation. */
  expiredTokens: number;
  progress?: MigrationProgress;
  storedVersions?: string[];
  message?: string;
}

interface CRD extends KubeObject {
  spec: { versions: Array<{ name: string; storage: boolean }> };
  status?: { storedVersions?: string[] };
}

/** Runs (or resumes) one migration until it finishes or `shouldPause` says the invocation is nearly out of time. */
export async function runMigration(
  ctx: MigratorContext,
  name: string,
  opts: { shouldPause?: () => boolean; chunk?: number } = {},
): Promise<MigrateResult> {
  const result: MigrateResult = { migration: name, outcome: 'gone', chunks: 0, rewritten: 0, conflicts: 0, notFound: 0, expiredTokens: 0 };
  const svm = await ctx.kube.find<StorageVersionMigration>(migrations, { name });
  if (!svm) return result;
  if (!isOutriggers(svm)) return { ...result, outcome: 'not-ours' };
  if (isTerminal(phaseOf(svm))) return { ...result, outcome: 'finished-before' };
  // The label routes; only the leader's record grants (docs/operations/security.md#the-migrator). An
  // unrecorded migration is left as it is, its status untouched: it is not this migrator's to fail.
  const untrusted = await unrecordedBecause(ctx, svm);
  if (untrusted) return { ...result, outcome: 'not-recorded', message: untrusted };
  const lease = await ctx.state.leases.acquire(ctx.cluster, `migration/${name}`, ctx.holder, MIGRATOR_LEASE_MS);
  if (!lease) return { ...result, outcome: 'busy' };
  try {
    // Under the migration's lease: start it (or take up its progress), rewrite every object, and finish.
    return await runHeld(ctx, svm, result, opts);
  } finally {
    await ctx.state.leases.release(lease).catch(() => undefined);
  }
}

/** A run under the migration's lease: its start recorded, its chunks rewritten, its success recorded. */
async function runHeld(
  ctx: MigratorContext,
  svm: StorageVersionMigration,
  result: MigrateResult,
  opts: { shouldPause?: () => boolean; chunk?: number },
): Promise<MigrateResult> {
  const { group = '', version, resource } = svm.spec.resource;
  if (!version)
    return await finish(ctx, svm, result, { phase: 'Failed', reason: 'InvalidSpec', message: 'spec.resource.version is required' });
  const crdName = group === '' ? undefined : `${resource}.${group}`;
  // A migration not yet started records its start and its progress, with the CRD's storage version then.
  const started = await startRun(ctx, svm, result, crdName);
  if ('done' in started) return started.done;
  // Every object rewritten, a chunk at a time, the progress saved after each.
  const rewritten = await rewriteAll(ctx, started.svm, result, started.progress, opts);
  if ('done' in rewritten) return rewritten.done;
  const progress = rewritten.progress;
  result.progress = progress;
  // For a CRD, status.storedVersions narrowed to the storage version when the verdict allows.
  let note = '';
  if (crdName) {
    const narrowed = await narrowStoredVersions(ctx.kube, crdName, progress);
    if ('storedVersions' in narrowed) result.storedVersions = narrowed.storedVersions;
    else note = `; status.storedVersions left as it is: ${narrowed.reason}`;
  }
  const summary = `rewrote ${progress.rewritten} object(s); ${progress.conflicts} already rewritten, ${progress.notFound} gone${note}`;
  return await finish(ctx, started.svm, result, { phase: 'Succeeded', reason: 'MigrationSucceeded', message: summary });
}

type Step<T> = T | { done: MigrateResult };

/** Marks a Pending (or never started) migration Running, its progress started; a started one goes on from its progress. */
async function startRun(
  ctx: MigratorContext,
  svm: StorageVersionMigration,
  result: MigrateResult,
  crdName: string | undefined,
): Promise<Step<{ svm: StorageVersionMigration; progress: MigrationProgress }>> {
  const { group = '', version = '', resource } = svm.spec.resource;
  let progress = progressOf(svm);
  if (progress && phaseOf(svm) !== 'Pending') return { svm, progress };
  if (!progress) {
    const crd = crdName ? await ctx.kube.find<CRD>(Resources.customResourceDefinitions, { name: crdName }) : undefined;
    const storageVersion = crd?.spec.versions.find((v) => v.storage)?.name;
    progress = startProgress(ctx.now(), crd && storageVersion ? { storageVersion, generation: crd.metadata.generation ?? 0 } : undefined);
  }
  const conditions = conditionsFor(
    svm.status?.conditions,
    'Running',
    ctx.now(),
    'MigrationStarted',
    `rewriting ${resource}${group ? `.${group}` : ''} through ${version}`,
  );
  const patched = await ctx.kube.patch<StorageVersionMigration>(
    migrations,
    { name: svm.metadata.name ?? '', subresource: 'status' },
    statusWrite(svm, { conditions, progress }),
    'json',
  );
  // A migration.k8s.io CRD without status.progress in its schema (kube-storage-version-migrator's) prunes it:
  // every invocation would start over, and a large resource would never finish.
  if (!progressOf(patched))
    return {
      done: await finish(ctx, patched, result, {
        phase: 'Failed',
        reason: 'ProgressNotKept',
        message:
          "status.progress was pruned: the StorageVersionMigration CRD is not Outrigger's (apply cluster/crds/storageversionmigrations.yaml)",
      }),
    };
  return { svm: patched, progress };
}

/** Lists the resource's metadata a chunk at a time and rewrites each chunk, until the list ends or the run pauses. */
async function rewriteAll(
  ctx: MigratorContext,
  svm: StorageVersionMigration,
  result: MigrateResult,
  from: MigrationProgress,
  opts: { shouldPause?: () => boolean; chunk?: number },
): Promise<Step<{ progress: MigrationProgress }>> {
  const name = svm.metadata.name ?? '';
  const { group = '', version = '', resource } = svm.spec.resource;
  const target = gvr(group, version, resource);
  const limit = pLimit(8);
  let progress = from;
  while (!progress.complete) {
    let page;
    try {
      page = await ctx.kube.listMetadata(target, { limit: opts.chunk ?? CHUNK, continue: progress.continueToken || undefined });
    } catch (err) {
      if (isKubeError(err, 'Gone') && progress.continueToken) {
        ctx.log?.(
          'info',
          err.continueToken ? "continue token expired; going on from the apiserver's token" : 'continue token expired; restarting the list',
          { migration: name },
        );
        result.expiredTokens += 1;
        progress = await saveProgress(ctx, svm, afterExpiry(progress, err.continueToken, ctx.now()));
        continue;
      }
      if (isKubeError(err, 'NotFound'))
        return {
          done: await finish(ctx, svm, result, {
            phase: 'Failed',
            reason: 'ResourceNotServed',
            message: `the cluster does not serve ${resource} in ${group}/${version}`,
          }),
        };
      if (isKubeError(err, 'Transient')) throw err;
      return {
        done: await finish(ctx, svm, result, {
          phase: 'Failed',
          reason: 'ListFailed',
          message: err instanceof Error ? err.message : String(err),
        }),
      };
    }
    const { chunk, failures } = await rewriteChunk(ctx, target, page.items, limit);
    result.chunks += 1;
    result.rewritten += chunk.rewritten;
    result.conflicts += chunk.conflicts;
    result.notFound += chunk.notFound;
    if (failures.length)
      return {
        done: await finish(ctx, svm, result, {
          phase: 'Failed',
          reason: 'RewriteFailed',
          message: `${failures.length} object(s) could not be rewritten; first: ${failures[0]}`,
        }),
      };
    progress = await saveProgress(ctx, svm, afterChunk(progress, chunk, page.metadata.continue || undefined, ctx.now()));
    if (!progress.complete && opts.shouldPause?.()) return { done: { ...result, outcome: 'paused', progress } };
  }
  return { progress };
}

/** Rewrites one listed chunk: the counts of what was rewritten, already rewritten (Conflict) and gone, and the failures. */
async function rewriteChunk(ctx: MigratorContext, target: GVR, items: KubeObject[], limit: LimitFunction) {
  const chunk = { rewritten: 0, conflicts: 0, notFound: 0 };
  const failures: string[] = [];
  await Promise.all(
    items.map((item) =>
      limit(async () => {
        const { name: objectName = '', namespace, resourceVersion } = item.metadata;
        try {
          // Transient answers are retried by the client (honouring Retry-After); one still failing fails
          // the invocation, and the next resumes at this chunk.
          await ctx.kube.patch(target, { name: objectName, namespace }, { metadata: { resourceVersion } }, 'merge', {
            metadataOnly: true,
          });
          chunk.rewritten += 1;
        } catch (err) {
          if (isKubeError(err, 'Conflict')) chunk.conflicts += 1;
          else if (isKubeError(err, 'NotFound')) chunk.notFound += 1;
          else if (isKubeError(err, 'Transient')) throw err;
          else failures.push(`${namespace ? `${namespace}/` : ''}${objectName}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }),
    ),
  );
  return { chunk, failures };
}

/**
 * A status write as a JSON patch whose first operation tests the migration's uid: writes address it by name, and a
 * successor made under the name meanwhile (a retry, a decision made again) must never get this run's progress or
 * outcome. (The status subresource ignores metadata in a merge patch, so a uid there would be no precondition.)
 */
function statusWrite(svm: StorageVersionMigration, fields: Record<string, unknown>): object[] {
  const writes = svm.status
    ? Object.entries(fields).map(([k, value]) => ({ op: 'add', path: `/status/${k}`, value }))
    : [{ op: 'add', path: '/status', value: fields }];
  return [{ op: 'test', path: '/metadata/uid', value: svm.metadata.uid }, ...writes];
}

async function saveProgress(ctx: MigratorContext, svm: StorageVersionMigration, progress: MigrationProgress): Promise<MigrationProgress> {
  await ctx.kube.patch(migrations, { name: svm.metadata.name ?? '', subresource: 'status' }, statusWrite(svm, { progress }), 'json', {
    metadataOnly: true,
  });
  return progress;
}

/** storedVersions := [storage version], when the verdict allows; a CRD changed meanwhile is judged again. */
async function narrowStoredVersions(
  kube: KubeClient,
  name: string,
  progress: MigrationProgress,
): Promise<{ storedVersions: string[] } | { reason: string }> {
  for (;;) {
    const crd = await kube.find<CRD>(Resources.customResourceDefinitions, { name });
    if (!crd) return { reason: 'the CRD is gone' };
    const storage = crd.spec.versions.find((v) => v.storage)?.name;
    const verdict = storedVersionsVerdict(progress, { storageVersion: storage, generation: crd.metadata.generation });
    if (!verdict.narrow) return { reason: verdict.reason };
    if (crd.status?.storedVersions?.length === 1 && crd.status.storedVersions[0] === storage) return { storedVersions: [storage!] };
    try {
      await kube.patch(
        Resources.customResourceDefinitions,
        { name, subresource: 'status' },
        { metadata: { resourceVersion: crd.metadata.resourceVersion }, status: { storedVersions: [storage] } },
        'merge',
        { metadataOnly: true },
      );
      return { storedVersions: [storage!] };
    } catch (err) {
      if (!isKubeError(err, 'Conflict')) throw err;
    }
  }
}

/** How a migration ended: its phase, and the condition's reason and message. */
interface Ending {
  phase: 'Succeeded' | 'Failed';
  reason: string;
  message: string;
}

async function finish(
  ctx: MigratorContext,
  svm: StorageVersionMigration,
  result: MigrateResult,
  { phase, reason, message }: Ending,
): Promise<MigrateResult> {
  const conditions = conditionsFor(svm.status?.conditions, phase, ctx.now(), reason, message);
  await ctx.kube.patch(migrations, { name: svm.metadata.name ?? '', subresource: 'status' }, statusWrite(svm, { conditions }), 'json', {
    metadataOnly: true,
  });
  ctx.log?.('info', `migration ${phase.toLowerCase()}`, { migration: svm.metadata.name, detail: message });
  return { ...result, outcome: phase, message };
}
