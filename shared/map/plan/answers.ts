// What the map handler keeps per parent: its last clean pass, the answers it rests on, and whether a request is served.
import { createHash } from 'node:crypto';
import type { KubeObject } from '../../kube/resource.ts';
import { parseSyncCause } from '../../lambda/sync-request.ts';
import { definitionOf, RESYNC_CAUSE, type Definition } from '../api.ts';
import { CONTINUE_CAUSE } from './budget.ts';
import { mapKeyOf } from './inputs.ts';
import { identityOf } from './outputs.ts';
import { TIMER_CAUSE, WAKE_CAUSE, WAKE_EARLY_MS } from '../../metacontroller/timers.ts';

/** What the map handler keeps per parent: when its last clean pass started, and with which definition. */
export interface PassRecord {
  startedAt: number;
  controller?: string;
  generation?: number;
  /** What the last clean pass's answers rest on, so the next pass calls the hook only for inputs that changed. */
  answers?: AnswerRecord | undefined;
  /** When the parent's pending wake-up timer is due (ms since the epoch): a timer due at another time is stale. */
  wakeAt?: number | undefined;
  /**
   * What the pass looked at, so it serves only requests about that (docs/design/map-pass.md#triggers): `all`
   * (every hook called), or, for an incremental pass that kept answers, its parent, its inputs and the outputs
   * its request named (their uids). Absent (a record from before this was kept): the parent and inputs only.
   */
  looked?: 'all' | { outputs: string[] } | undefined;
}

/**
 * Per map key, the input's resourceVersion and the outputs its answer named (a hash of their identities), with
 * the parent's generation and the MapController's definition they were answered for.
 */
export interface AnswerRecord {
  parentGeneration: number;
  controller: string;
  generation: number;
  inputs: Record<string, string>;
  /** Per map key, when its hook asked to be called again (resyncAfterSeconds, ms since the epoch). */
  wakes?: Record<string, number> | undefined;
}

/** More inputs than this and a parent's answers are not recorded (a DynamoDB item holds 400 KB): every pass calls every hook. */
export const MAX_RECORDED_INPUTS = 4_000;

/**
 * At most this many bytes of answers in a pass record: a DynamoDB item holds 400 KB, and the rest of the record
 * (its definition, wake and the few uids it looked at) is under 2 KB.
 */
export const MAX_RECORDED_ANSWER_BYTES = 350_000;

/**
 * The answers a pass record keeps: all of them, or none when there are too many inputs or bytes (every pass then
 * calls every hook). Never a part: a kept answer without its wake would hold past the hook's wish. With a wake per
 * input (resyncAfterSeconds) the bytes bind first, at about 2,900 inputs.
 */
export function recordedAnswers(answers: AnswerRecord): AnswerRecord | undefined {
  if (Object.keys(answers.inputs).length > MAX_RECORDED_INPUTS) return undefined;
  return Buffer.byteLength(JSON.stringify(answers)) <= MAX_RECORDED_ANSWER_BYTES ? answers : undefined;
}

/** An input's resourceVersion and the identities of its outputs, as AnswerRecord.inputs keeps them. */
export function answerFingerprint(input: KubeObject, outputs: readonly KubeObject[]): string {
  const ids = outputs.map(identityOf).sort().join('\n');
  return `${input.metadata.resourceVersion ?? ''}:${createHash('sha256').update(ids).digest('hex').slice(0, 16)}`;
}

/**
 * Whether the last answer for an input still holds, so its hook need not be called: an incremental pass (not a
 * resync: hooks may depend on the clock), the same parent generation and MapController definition, the input
 * unchanged (resourceVersion) and its outputs those the answer named (one deleted or added is a change), and no
 * output of it named by the request (someone changed it: the hook's answer is what it is set back to).
 */
// eslint-disable-next-line max-params -- five things the answer is checked against, and `now` only the unit tests pass (their clock); each case is one positional call
export function answerHolds(
  previous: AnswerRecord | undefined,
  at: { parentGeneration: number; controller: string; generation: number },
  input: KubeObject,
  outputs: readonly KubeObject[],
  touched: ReadonlySet<string>,
  now = Date.now(),
): boolean {
  if (
    !previous ||
    previous.parentGeneration !== at.parentGeneration ||
    previous.controller !== at.controller ||
    previous.generation !== at.generation
  )
    return false;
  if (outputs.some((o) => o.metadata.uid && touched.has(o.metadata.uid))) return false;
  // The hook asked to be called again by now (resyncAfterSeconds): its answer no longer holds.
  const wake = previous.wakes?.[mapKeyOf(input)];
  if (wake !== undefined && wake <= now + WAKE_EARLY_MS) return false;
  return previous.inputs[mapKeyOf(input)] === answerFingerprint(input, outputs);
}

/**
 * Whether a request must run a pass, is already served by a later clean pass, or finds this process's
 * definition of the MapController older than the request's or than the last pass's (refresh it, then ask again
 * with `refreshed`). A pass serves later requests only with the definition they would be served with: a process
 * whose cached definition is stale runs its pass, but does not make a request for the newer one look served.
 */
export function passDecision(opts: {
  last: PassRecord | undefined;
  sentAt: number;
  skewMs: number;
  current: Definition | undefined;
  requested: Definition | undefined;
  refreshed: boolean;
  /** The request's causes and its parent's uid: without them only a pass that looked at everything serves it. */
  request?: { causes: readonly string[]; parentUid: string } | undefined;
}): 'run' | 'served' | 'refresh' | 'no-controller' {
  const { last, current, requested } = opts;
  const behind =
    (requested && (!current || requested.uid !== current.uid || requested.generation > current.generation)) ||
    (current && last?.controller === current.uid && (last.generation ?? 0) > current.generation);
  if (behind && !opts.refreshed) return 'refresh';
  if (!current) return 'no-controller';
  const sameDefinition =
    last?.controller === current.uid &&
    last.generation === current.generation &&
    (!requested || (requested.uid === current.uid && requested.generation <= current.generation));
  return last && sameDefinition && last.startedAt > opts.sentAt + opts.skewMs && lookedAtAll(last, opts.request) ? 'served' : 'run';
}

/**
 * Whether a pass looked at everything a request is about. A pass that called every hook did. One that kept
 * answers looked at its parent, listed its inputs (a changed input is called: its resourceVersion moved) and
 * diffed the outputs its own request named; an output edited in place, or a resync, it never looked at. A wake
 * names hooks whose wish was due, which any pass calls, and a definition cause is judged by the definition.
 */
function lookedAtAll(last: PassRecord, request: { causes: readonly string[]; parentUid: string } | undefined): boolean {
  if (last.looked === 'all') return true;
  if (!request) return false;
  const outputs = new Set(last.looked?.outputs ?? []);
  return request.causes.every((cause) => {
    if (cause.startsWith(WAKE_CAUSE) || definitionOf([cause])) return true;
    const { uid } = parseSyncCause(cause);
    if (!uid || cause.startsWith(RESYNC_CAUSE) || cause.startsWith(CONTINUE_CAUSE) || cause.startsWith(TIMER_CAUSE)) return false;
    return uid === request.parentUid || outputs.has(uid) || last.answers?.inputs[uid] !== undefined;
  });
}
