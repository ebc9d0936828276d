import { randomUUID } from 'node:crypto';
import { fittedSyncFunction, type SyncTools } from '../../shared/lambda/sync-function.ts';
import { makeSyncRequest, observedParent, parseSyncCause, truncationRequest, type SyncRequest } from '../../shared/lambda/sync-request.ts';
import { forgetPolicies, freshPolicyFor, listPolicies, policyFor } from './policies.ts';
import { reportPolicy } from './report.ts';
import { RESYNC_CAUSE, parentCause } from './resync.ts';
import { syncHistory } from './sync.ts';
import { policyParents, truncateHistory, truncationStep } from './truncate.ts';

const holder = `history-${randomUUID()}`;

export const handler = fittedSyncFunction('history', async (request, tools) => {
  if (request.truncate) return truncateParent(request, tools);
  const { env, logger, metrics } = tools;
  const { key, causes } = request;
  const kube = env.clusters.client(key.cluster);
  if (key.kind === 'RevisionPolicy' && key.group === 'outrigger.dev') {
    const r = await reportPolicy(kube, key.cluster, key.name, async (policy) => {
      const parents = await policyParents(kube, key.cluster, policy);
      if (parents.length > 0)
        await env.syncSink.send(
          'history',
          parents.map((p) => truncationRequest(p, causes)),
        );
    });
    // Every parent gets a baseline revision from a new spec and from each history resync, events or none
    // (docs/controllers/history.md#history-resync): a parent whose first events were missed is never left without history.
    let queued = 0;
    if (r.policy && (r.newSpec || causes.some((c) => c.startsWith(RESYNC_CAUSE)))) {
      const parents = await policyParents(kube, key.cluster, r.policy);
      if (parents.length > 0)
        await env.syncSink.send(
          'history',
          parents.map((p) => makeSyncRequest(p, [parentCause(p, causes)])),
        );
      queued = parents.length;
    }
    // `message` is the log line's own key (Powertools drops a field of that name).
    logger.info('policy checked', { policy: key.name, ready: r.ready, reason: r.reason, condition: r.message, queued });
    return;
  }
  const policy = await freshPolicyFor(kube, key.cluster, key.group, key.kind);
  if (!policy) return;
  // Truncation right after the sync, from the revisions it listed and wrote (no second list, no second queue).
  const inline = policy.spec.mode === 'snapshot';
  const truncate = inline ? { truncate: truncationStep(kube, policy, request, { logger, sink: env.syncSink }) } : {};
  const result = await syncHistory({ kube, state: env.state, holder, ...truncate }, policy, key, causes, observedParent(request), {
    targetChanged: request.targetChanged === true,
    observedSigned: request.observedSigned === true,
  });
  logger.info('history synced', { parent: `${key.namespace}/${key.name}`, ...result });
  if (result.outcome === 'created') metrics.count(key.cluster, 'RevisionsCreated');
  if (result.outcome === 'rollback') metrics.count(key.cluster, 'Rollbacks');
  // In revisionKey mode always: a rollout that completed shows only in the parent's status.
  if (!inline) await env.syncSink.send('history', [truncationRequest(key, causes)]);
});

/**
 * A truncation request: the parent's revisions beyond its policy's limit are deleted, from a fresh list (its
 * deletes are preconditioned on each revision's resourceVersion, so it needs no lease). Served by the history
 * function from the history queue, in the parent's message group after the sync that asked for it.
 */
async function truncateParent({ key, causes }: SyncRequest, { env, logger, metrics }: SyncTools): Promise<void> {
  const kube = env.clusters.client(key.cluster);
  // Asked because a policy's spec changed: its new limit, not the one a warm process may still hold.
  if (causes.some((c) => parseSyncCause(c).kind === 'RevisionPolicy')) forgetPolicies(key.cluster);
  const policy = policyFor(await listPolicies(kube, key.cluster), key.group, key.kind);
  if (!policy) return;
  const result = await truncateHistory({ kube }, policy, key);
  logger.info('history truncated', { parent: `${key.namespace}/${key.name}`, ...result });
  if (result.deleted.length) metrics.count(key.cluster, 'RevisionsTruncated', result.deleted.length);
}
