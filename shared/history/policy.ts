// RevisionPolicy, as the handlers read it. The CRD schema rejects most bad policies at the apiserver; this
// parser repeats those checks (a policy may predate a schema change) and adds the ones only a handler can
// make, so a bad policy is reported and never causes a write.
import { z } from 'zod';
import { firstIssue } from '../envelope/index.ts';
import type { KubeObject } from '../kube/resource.ts';
import { parsePath } from './data.ts';
import type { DefaultsSchema } from './defaults.ts';

export const POLICY_GROUP = 'outrigger.dev';
export const LIMIT_ANNOTATION = 'outrigger.dev/revision-history-limit';
export const DEFAULT_REVISION_LABEL = 'controller-revision-hash';

const specSchema = z
  .object({
    target: z.object({ apiVersion: z.string().min(1), kind: z.string().min(1) }),
    targetState: z.array(z.string()).min(1, 'names no field path'),
    revisionHistoryLimit: z.number().int().min(0, 'must be 0 or more').max(1000).default(10),
    generated: z
      .object({
        apiVersion: z.string().min(1),
        kind: z.string().min(1),
        selectorPath: z.string().default('spec.selector'),
        revisionLabel: z.string().default(DEFAULT_REVISION_LABEL),
      })
      .optional(),
    statusRevisionPaths: z.array(z.string()).default([]),
    mode: z.enum(['snapshot', 'revisionKey']).default('snapshot'),
    revisionKey: z.object({ label: z.string().min(1), rolloutCompleteCondition: z.string().min(1) }).optional(),
  })
  .superRefine((spec, ctx) => {
    for (const [i, p] of spec.targetState.entries()) {
      try {
        parsePath(p);
      } catch (err) {
        ctx.addIssue({ code: 'custom', path: ['targetState', i], message: (err as Error).message });
      }
    }
    if (spec.mode === 'revisionKey' && !spec.revisionKey) ctx.addIssue({ code: 'custom', path: ['revisionKey'], message: 'mode revisionKey needs spec.revisionKey' });
  });

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

/** The history limit for one parent: its annotation if valid, else the policy's. */
export function historyLimit(policy: RevisionPolicy, parent: KubeObject): number {
  const raw = parent.metadata.annotations?.[LIMIT_ANNOTATION];
  if (raw !== undefined && /^\d{1,4}$/.test(raw)) return Number(raw);
  return policy.spec.revisionHistoryLimit;
}
