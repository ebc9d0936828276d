// What a CompositeController or DecoratorController pass is given (its context), what it reports (its counts and
// problems), and how an error becomes a problem of the parent's Synced condition (its reason by the rules every kind
// shares: shared/metacontroller/problems.ts).
import { HookError, type HookCaller } from '../../shared/hooks/index.ts';
import { KubeError, type KubeApi, type ResolvedResource } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import { AnswerError } from '../../shared/composite/api.ts';
import { ChildError } from '../../shared/composite/plan.ts';
import { RelatedError, type RelatedKind } from '../../shared/composite/related.ts';
import type { ClaimMark } from '../../shared/ownership/index.ts';
import type { ResolvedDefinition } from './controllers.ts';
import type { RelatedContext } from './related.ts';

export interface PassContext {
  /** The definition's ServiceAccount's client (actingAs). */
  kube: KubeApi;
  hooks: HookCaller;
  log?: Log | undefined;
  /** When the pass must be over (ms since the epoch): each hook call is clamped to it. */
  deadline?: number | undefined;
  /** The state's records: customize answers are kept there between passes (functions/composite/related.ts). */
  records?: RelatedContext['records'];
  /** A MapController serves the parent kind too: its status fields are kept (withMapStatus). */
  sharedWithMap?: boolean | undefined;
}

export interface Problem {
  reason: string;
  /** What the parent's condition says: never text of the hook's answer. */
  message: string;
  /** For the log only. */
  detail?: string | undefined;
}

export interface PassResult {
  skipped?: string;
  hookCalls: number;
  adopted: number;
  /** Adopted by this pass and not answered as they are: kept for a later pass to delete or recreate. */
  held: number;
  released: number;
  created: number;
  updated: number;
  recreated: number;
  deleted: number;
  unchanged: number;
  statusWritten: boolean;
  problems: Problem[];
  /** The hook's resyncAfterSeconds, if it asked. */
  resyncAfterSeconds?: number | undefined;
  /** For a parent being deleted with our finalizer: whether the finalize hook finished and the finalizer went. */
  finalized?: boolean | undefined;
  /** The longest wait a hook asked for (Retry-After). */
  retryAfterSeconds?: number | undefined;
  /** The kinds the customize answer's rules read (for the definition's status.relatedResources). */
  relatedKinds?: RelatedKind[] | undefined;
  /**
   * The parent changed while the pass ran, so its labels, annotations and status were not written: that change has
   * an event of its own, whose pass reads it and writes them.
   */
  superseded?: boolean;
}

/** A write to the parent conditional on the resourceVersion the pass read, refused: the parent changed since. */
export class ParentChanged extends Error {}

export const emptyResult = (): PassResult => ({
  hookCalls: 0,
  adopted: 0,
  held: 0,
  released: 0,
  created: 0,
  updated: 0,
  recreated: 0,
  deleted: 0,
  unchanged: 0,
  statusWritten: false,
  problems: [],
});

export interface Pass {
  ctx: PassContext;
  d: ResolvedDefinition;
  /** The parent's resource (a decorator's: the rule this object is of). */
  resource: ResolvedResource & { status?: boolean };
  result: PassResult;
  finalizer: string;
  /** What a CompositeController writes on its children and requires of an orphan it adopts (childMark); a decorator's on its attachments. */
  mark: ClaimMark;
}

export function problemOf(err: unknown): Problem {
  if (err instanceof HookError) return { reason: `Hook${err.reason}`, message: err.message, detail: err.detail };
  if (err instanceof AnswerError) return { reason: 'HookMalformedAnswer', message: err.message };
  if (err instanceof ChildError) return { reason: 'InvalidChild', message: err.message };
  if (err instanceof RelatedError) return { reason: err.reason, message: err.message };
  // The apiserver's message may quote the answer: it goes to the log, the condition gets its kind.
  if (err instanceof KubeError)
    return {
      reason: err.kind === 'Forbidden' ? 'Forbidden' : 'WriteFailed',
      message: err.kind === 'Forbidden' && !err.status ? err.message : `the apiserver refused a write: HTTP ${err.status} ${err.kind}`,
      detail: err.message,
    };
  throw err;
}
