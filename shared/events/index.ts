// Kubernetes Events about the objects Outrigger acts on, so `kubectl describe` and `kubectl events` show what it
// did (RevisionCreated, RolledBack, Truncated) and what went wrong, as in-tree controllers' events do. One small
// recorder for every controller: events are best effort (a failure to record one is logged, never fails the
// work), and each is a new events.k8s.io/v1 Event named after its object, as client-go's recorder names them.
import { randomBytes } from 'node:crypto';
import type { GVR, KubeApi, KubeObject } from '../kube/index.ts';
import { gvr } from '../kube/resource.ts';
import type { Log } from '../log.ts';

export const events: GVR = gvr('events.k8s.io', 'v1', 'events');

export interface EventSpec {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase, short and fixed: what happened (RevisionCreated). */
  reason: string;
  /** What Outrigger did, or tried to (Create, Delete, Sync). */
  action: string;
  note: string;
}

/** The controller that reports, as Events name it (`reportingController`). */
export type Reporter = { controller: string; instance: string };

/** The Event for `regarding` (pure): named `<object>.<random>`, in the object's namespace (`default` for a cluster-scoped one). */
export function eventFor(
  regarding: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>,
  spec: EventSpec,
  reporter: Reporter,
  now: Date,
  suffix = randomBytes(8).toString('hex'),
): KubeObject {
  const { name = '', namespace, uid, resourceVersion } = regarding.metadata;
  return {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: `${name.slice(0, 253 - 17)}.${suffix}`, namespace: namespace ?? 'default' },
    // MicroTime: the apiserver wants six fractional digits.
    eventTime: now.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z'),
    reportingController: reporter.controller,
    reportingInstance: reporter.instance.slice(0, 128),
    action: spec.action,
    reason: spec.reason,
    // A note is at most 1 KB.
    note:
      Buffer.byteLength(spec.note) > 1024
        ? `${Buffer.from(spec.note)
            .subarray(0, 1020)
            .toString('utf8')
            .replace(/\uFFFD$/, '')}...`
        : spec.note,
    type: spec.type,
    regarding: { apiVersion: regarding.apiVersion, kind: regarding.kind, name, namespace, uid, resourceVersion },
  };
}

/** Records an event; a failure (RBAC, quota, a full namespace) goes to `log` and nowhere else. */
export async function recordEvent(
  kube: KubeApi,
  regarding: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>,
  spec: EventSpec,
  reporter: Reporter,
  log?: Log,
): Promise<void> {
  try {
    await kube.create(events, eventFor(regarding, spec, reporter, new Date()));
  } catch (err) {
    log?.('warn', 'could not record an event', {
      reason: spec.reason,
      object: `${regarding.kind}/${regarding.metadata.name}`,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}
