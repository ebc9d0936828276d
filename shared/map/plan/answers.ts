// What the map handler keeps per parent: its last clean pass, the answers it rests on, and whether a request is served.
import { createHash } from 'node:crypto';
import type { KubeObject } from '../../kube/resource.ts';
import type { Definition } from '../api.ts';
import { mapKeyOf } from './inputs.ts';
import { identityOf } from './outputs.ts';
import { WAKE_EARLY_MS } from './timers.ts';

/** What the map handler keeps per parent: when its last clean pass started, and with which definition. */
export interface PassRecord {
  startedAt: number;
  controller?: string;
  generation?: number;
  /** What the last clean pass's answers rest on, so the next pass calls the hook only for inputs that changed. */
  answers?: AnswerRecord | undefined;
  /** When the parent's pending wake-up timer is due (ms since the epoch): a timer due at another time is stale. */
  wakeAt?: number | undefined;
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
  return last && sameDefinition && last.startedAt > opts.sentAt + opts.skewMs ? 'served' : 'run';
}
