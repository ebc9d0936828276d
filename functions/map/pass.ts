// What a MapController pass is given (its context and options) and what it reports (its counts and problems).
import { HookError, type HookCaller } from '../../shared/hooks/index.ts';
import { KubeError, type KubeApi } from '../../shared/kube/index.ts';
import type { Log } from '../../shared/log.ts';
import { HookResponseError } from '../../shared/map/api.ts';
import { OutputError, type AnswerRecord, type Continuation } from '../../shared/map/plan/index.ts';

export interface MapContext {
  kube: KubeApi;
  hooks: HookCaller;
  concurrency?: number;
  now?: () => Date;
  log?: Log;
}

export interface Problem {
  mapKey: string;
  /** The input (kind namespace/name), or "detached" for a tombstone group. */
  what: string;
  reason: string;
  /** What the parent's status says: never text of the hook's answer. */
  message: string;
  /** For the log only: what the hook or the apiserver answered. */
  detail?: string | undefined;
}

export interface MapSyncResult {
  skipped?: string;
  inputs: number;
  hookCalls: number;
  created: number;
  updated: number;
  deleted: number;
  unchanged: number;
  detachedKept: number;
  problems: Problem[];
  statusWritten: boolean;
  /** Inputs whose last answer still held: no hook call (answerHolds). */
  reused: number;
  /** What this pass's answers rest on, for the next incremental pass (none past MAX_RECORDED_INPUTS). */
  answers?: AnswerRecord | undefined;
  /** Map keys whose hook was not called for want of time or because the hook asked to wait (AFTER_ALL_KEYS: a detached group's). */
  deferred: string[];
  /** Inputs before the continuation's cursor that needed a call: they had their turn earlier in this sync. */
  left: number;
  /** The longest wait a hook asked for (Retry-After); no call of that hook was started after it asked. */
  retryAfterSeconds?: number | undefined;
  /** Outputs deleted and created again for a changed answer (updateStrategy Recreate). */
  recreated: number;
  /** Outputs a finalize hook kept, released from the parent before it goes. */
  released: number;
  /** For a parent being deleted with our finalizer: whether the finalize hook finished, and the finalizer went. */
  finalized?: boolean | undefined;
  /** The earliest time (ms since the epoch) a hook of this pass asked to be called again (resyncAfterSeconds). */
  wakeAt?: number | undefined;
}

/** A pass's counts before it starts. */
export function emptyResult(): MapSyncResult {
  return {
    inputs: 0,
    hookCalls: 0,
    created: 0,
    updated: 0,
    deleted: 0,
    unchanged: 0,
    detachedKept: 0,
    problems: [],
    statusWritten: false,
    reused: 0,
    deferred: [],
    left: 0,
    recreated: 0,
    released: 0,
  };
}

export interface MapPassOptions {
  /**
   * An incremental pass: the last clean pass's answers, and the uids the request names (its causes' objects).
   * Without it every input's hook is called (a resync, or nothing recorded).
   */
  reuse?: { previous: AnswerRecord | undefined; touched: ReadonlySet<string> } | undefined;
  /**
   * The pass's time budget: hook calls start only while one fits (callFits), each clamped to `deadline` (ms since
   * the epoch); the inputs not reached are `deferred`, for a follow-up. Without it, a pass calls every hook.
   */
  budget?: { deadline: number; budgetMs: number } | undefined;
  /** A follow-up's continuation: inputs whose map key sorts before its cursor are not called again in this sync. */
  continuation?: Continuation | undefined;
}

/** What a hook slot answers when the call was not started (no time left, or the hook asked to wait). */
export const DEFERRED = Symbol('deferred');

export function problemOf(err: unknown, mapKey: string, what: string): Problem {
  if (err instanceof HookError) return { mapKey, what, reason: `Hook${err.reason}`, message: err.message, detail: err.detail };
  if (err instanceof HookResponseError) return { mapKey, what, reason: 'HookMalformedAnswer', message: err.message };
  if (err instanceof OutputError) return { mapKey, what, reason: 'InvalidOutput', message: err.message };
  // The apiserver's message may quote the output (an invalid value): it goes to the log, the status gets its kind.
  if (err instanceof KubeError)
    return {
      mapKey,
      what,
      reason: 'WriteFailed',
      message: `the apiserver refused a write: HTTP ${err.status} ${err.kind}`,
      detail: err.message,
    };
  throw err;
}
