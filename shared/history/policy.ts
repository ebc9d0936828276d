// RevisionPolicy, as the handlers read it. The CRD schema rejects most bad policies at the apiserver; this
// parser repeats those checks (a policy may predate a schema change) and adds the ones only a handler can
// make, so a bad policy is reported and never causes a write.
// A namespace import, so bundles keep only what is used (see shared/envelope/index.ts).
import * as z from 'zod/mini';
import { firstIssue, nonEmpty } from '../validation.ts';
import type { KubeObject } from '../kube/resource.ts';
import { fieldAt, parsePath } from './data.ts';
import type { DefaultsSchema } from '../json.ts';

export const POLICY_GROUP = 'outrigger.dev';
export const LIMIT_ANNOTATION = 'outrigger.dev/revision-history-limit';
export const DEFAULT_REVISION_LABEL = 'controller-revision-hash';
/** The Ready reason of a policy whose kind's history another controller keeps (docs/controllers/history.md#coexistence). */
export const FOREIGN_HISTORY = 'ForeignHistory';
/**
 * On a custom kind's CustomResourceDefinition: the controller that keeps ControllerRevisions of the kind. Only who may
 * update CRDs (a cluster admin) writes it, so it, not a revision a tenant can write, makes another controller's
 * history a whole policy's matter (docs/controllers/history.md#coexistence).
 */
export const HISTORY_KEPT_BY_ANNOTATION = 'outrigger.dev/history-kept-by';
/**
 * The policy's ServiceAccount is missing, not Outrigger's to act as, does not name the policy, or may not read the
 * target (docs/operations/security.md#serviceaccounts-a-definition-names).
 */
export const IDENTITY_REASONS = ['ServiceAccountNotFound', 'ServiceAccountNotAllowed', 'ServiceAccountNotConsenting', 'Forbidden'] as const;

const specSchema = z
  .object({
    target: z.object({ apiVersion: nonEmpty(), kind: nonEmpty() }),
    targetState: z.array(z.string()).check(z.minLength(1, 'names no field path')),
    revisionHistoryLimit: z._default(z.number().check(z.int(), z.gte(0, 'must be 0 or more'), z.lte(1000)), 10),
    generated: z.optional(
      z.object({
        apiVersion: nonEmpty(),
        kind: nonEmpty(),
        selectorPath: z._default(z.string(), 'spec.selector'),
        revisionLabel: z._default(z.string(), DEFAULT_REVISION_LABEL),
      }),
    ),
    statusRevisionPaths: z._default(z.array(z.string()), []),
    mode: z._default(z.enum(['snapshot', 'revisionKey']), 'snapshot'),
    revisionKey: z.optional(z.object({ label: nonEmpty(), rolloutCompleteCondition: nonEmpty() })),
    /** Refuse: the policy is not in effect where another controller keeps the kind's history; Coexist: both keep one. */
    foreignHistory: z._default(z.enum(['Refuse', 'Coexist']), 'Refuse'),
    /** The account whose grants the target kinds are read with (docs/operations/security.md); absent: Outrigger's own. */
    serviceAccount: z.optional(z.object({ namespace: nonEmpty(), name: nonEmpty() })),
  })
  .check(
    z.superRefine((spec, ctx) => {
      for (const [i, p] of spec.targetState.entries()) {
        try {
          parsePath(p);
        } catch (err) {
          ctx.addIssue({ code: 'custom', path: ['targetState', i], message: (err as Error).message });
        }
      }
      if (spec.mode === 'revisionKey' && !spec.revisionKey)
        ctx.addIssue({ code: 'custom', path: ['revisionKey'], message: 'mode revisionKey needs spec.revisionKey' });
    }),
  );

export type RevisionPolicySpec = z.infer<typeof specSchema>;

export interface RevisionPolicy {
  name: string;
  uid: string;
  generation: number;
  spec: RevisionPolicySpec;
  /**
   * The target kind's defaulted fields, rooted at the object: not part of the policy object, but added by the
   * history sync once it has resolved the kind (built-in table or the CRD's schema). Without them, fields are
   * compared as they are.
   */
  defaults?: DefaultsSchema | undefined;
}

export class PolicyError extends Error {
  readonly policy: string;
  constructor(policy: string, message: string) {
    super(`RevisionPolicy ${policy}: ${message}`);
    this.name = 'PolicyError';
    this.policy = policy;
  }
}

export function parsePolicy(obj: KubeObject): RevisionPolicy {
  const name = obj.metadata.name ?? '(unnamed)';
  const result = specSchema.safeParse(obj.spec);
  if (!result.success) {
    const [field, problem] = firstIssue(result.error, 'spec');
    throw new PolicyError(name, `spec.${field}: ${problem}`);
  }
  return { name, uid: obj.metadata.uid ?? '', generation: obj.metadata.generation ?? 0, spec: result.data };
}

/**
 * The history limit for one parent: its annotation if valid, else its own `spec.revisionHistoryLimit` where its
 * kind has one (StatefulSet, DaemonSet, Deployment...), else the policy's.
 */
export function historyLimit(policy: RevisionPolicy, parent: KubeObject): number {
  const raw = parent.metadata.annotations?.[LIMIT_ANNOTATION];
  if (raw !== undefined && /^\d{1,4}$/.test(raw)) return Number(raw);
  const own = fieldAt(parent, 'spec.revisionHistoryLimit');
  if (typeof own === 'number' && Number.isInteger(own) && own >= 0) return own;
  return policy.spec.revisionHistoryLimit;
}

/** The revision names (or hashes) the parent's status paths hold: live revisions. */
export function statusRevisions(policy: RevisionPolicy, parent: KubeObject): string[] {
  return policy.spec.statusRevisionPaths.map((p) => fieldAt(parent, p)).filter((v): v is string => typeof v === 'string' && v !== '');
}

/**
 * What truncation decides by that the parent alone holds: its limit and the revisions its status names. When
 * it changes, truncation may have work though no revision changed (docs/design/history-sync.md#truncation).
 */
export function truncationInputs(policy: RevisionPolicy, parent: KubeObject): string {
  return JSON.stringify([historyLimit(policy, parent), ...statusRevisions(policy, parent)]);
}

interface PolicyStatus {
  observedGeneration?: number;
  conditions?: Array<{ type: string; status: string; reason?: string }>;
}

/**
 * Whether the policy's check found it not in effect for its current spec (Ready=False at its generation) for
 * one of `reasons`: those only the check can find (another controller keeps the kind's history), where
 * discovery's answers are read afresh. Such a policy is watched and routed for no more than its own events
 * until a check finds otherwise.
 */
export function reportedNotReady(obj: KubeObject, reasons: readonly string[] = [FOREIGN_HISTORY, ...IDENTITY_REASONS]): boolean {
  const status = obj.status as PolicyStatus | undefined;
  if (status?.observedGeneration !== obj.metadata.generation) return false;
  return (status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'False' && reasons.includes(c.reason ?? ''));
}
