// MapController (README, "MapController") as the handlers read it: the controller's spec, the hook contracts, and the tags
// Outrigger puts on outputs. Pure: parsing and types, no I/O. The CRD schema rejects most bad specs at the
// apiserver; the parser repeats those checks, so a bad MapController is reported and never causes a write.
// A namespace import, so bundles keep only what is used (see shared/envelope/index.ts).
import * as z from 'zod/mini';
import { firstIssue, nonEmpty } from '../envelope/index.ts';
import type { KubeObject } from '../kube/resource.ts';

export const MAP_GROUP = 'metacontroller.k8s.io';
export const MAP_VERSION = 'v1alpha1';

/** The map key of the input an output was made for (opaque to hooks: the input's uid). */
export const MAP_KEY_LABEL = 'map.outrigger.dev/key';
/** The parent's uid, so one labelled list finds a parent's outputs; ownership is still judged by ControllerRef. */
export const PARENT_LABEL = 'map.outrigger.dev/parent';
/** A hash of what was last applied, so a pass with nothing changed writes nothing (instead of a last-applied copy). */
export const APPLIED_ANNOTATION = 'map.outrigger.dev/applied';

export const DEFAULT_HOOK_TIMEOUT_SECONDS = 10;
export const DEFAULT_HOOK_RETRIES = 2;

const resourceRule = z.object({ apiVersion: nonEmpty(), resource: nonEmpty() });

const hookSchema = z
  .object({
    webhook: z.optional(z.object({ url: z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }) })),
    lambda: z.optional(z.object({ functionName: nonEmpty(), qualifier: z.optional(nonEmpty()) })),
    timeoutSeconds: z._default(z.number().check(z.positive(), z.lte(900)), DEFAULT_HOOK_TIMEOUT_SECONDS),
    /** Retries of a call that failed for a reason worth retrying (no answer, 429, 5xx). */
    retries: z._default(z.number().check(z.int(), z.gte(0), z.lte(5)), DEFAULT_HOOK_RETRIES),
  })
  .check(z.refine((h) => (h.webhook ? 1 : 0) + (h.lambda ? 1 : 0) === 1, 'needs exactly one of webhook or lambda'));

export type Hook = z.infer<typeof hookSchema>;

const specSchema = z.object({
  parentResource: resourceRule,
  inputResources: z.array(resourceRule).check(z.minLength(1, 'names no input resource')),
  outputResources: z.array(resourceRule).check(z.minLength(1, 'names no output resource')),
  resyncPeriodSeconds: z.optional(z.number().check(z.int(), z.gte(1))),
  hooks: z.object({ map: hookSchema, tombstone: z.optional(hookSchema) }),
  /** Whom the controller acts as for its parents, inputs and outputs (README "MapController", identity). */
  serviceAccount: z.optional(z.object({ namespace: nonEmpty(), name: nonEmpty() })),
});

export type MapControllerSpec = z.infer<typeof specSchema>;
export type ResourceRule = z.infer<typeof resourceRule>;

export interface MapController {
  name: string;
  uid: string;
  generation: number;
  spec: MapControllerSpec;
  /** The object as stored: hooks receive it whole. */
  object: KubeObject;
}

export class MapControllerError extends Error {
  /** The MapController's Ready reason. */
  readonly reason: string;
  constructor(controller: string, message: string, reason = 'InvalidSpec') {
    super(`MapController ${controller}: ${message}`);
    this.name = 'MapControllerError';
    this.reason = reason;
  }
}

export function parseMapController(obj: KubeObject): MapController {
  const name = obj.metadata.name ?? '(unnamed)';
  const result = specSchema.safeParse(obj.spec);
  if (!result.success) {
    const [field, problem] = firstIssue(result.error, 'spec');
    throw new MapControllerError(name, `spec.${field}: ${problem}`);
  }
  return { name, uid: obj.metadata.uid ?? '', generation: obj.metadata.generation ?? 0, spec: result.data, object: obj };
}

/** Outputs as hooks receive them: `<Kind>.<apiVersion>` -> `<namespace>/<name>` (or `<name>`) -> object. */
export type OutputMap = Record<string, Record<string, KubeObject>>;

export interface MapHookRequest {
  controller: KubeObject;
  parent: KubeObject;
  mapKey: string;
  input: KubeObject;
  outputs: OutputMap;
}

export type TombstoneHookRequest = Omit<MapHookRequest, 'input'>;

/** The most outputs one answer may name: each is a write, and a hook that loops must not flood the cluster. */
export const MAX_OUTPUTS_PER_ANSWER = 250;

// The answer's identifying fields are the only parts of it that messages (and so the parent's status) quote:
// they are held to the apiserver's own shapes, so no free text of the hook's travels.
const pattern = (re: RegExp, max: number, what: string) => z.string().check(z.maxLength(max, `must be at most ${max} characters`), z.regex(re, `must be ${what}`));
const objectName = pattern(/^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$/, 253, 'an object name');
const namespaceName = pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 63, 'a namespace name');
const kindName = pattern(/^[A-Za-z][A-Za-z0-9]*$/, 63, 'a kind');
const apiVersionName = pattern(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?v[a-z0-9]+$/, 253, 'an apiVersion');

/** What a hook answers: `{outputs: [...]}` (for the tombstone hook, the detached outputs to keep). */
const hookResponseSchema = z.object({
  outputs: z
    .array(
      z.looseObject({
        apiVersion: apiVersionName,
        kind: kindName,
        metadata: z.looseObject({ name: objectName, namespace: z.optional(namespaceName) }),
      }),
    )
    .check(z.maxLength(MAX_OUTPUTS_PER_ANSWER, `must name at most ${MAX_OUTPUTS_PER_ANSWER} outputs`)),
});

export class HookResponseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HookResponseError';
  }
}

export function parseHookResponse(value: unknown): KubeObject[] {
  const result = hookResponseSchema.safeParse(value);
  if (!result.success) {
    const [field, problem] = firstIssue(result.error, '(answer)');
    throw new HookResponseError(`the answer's ${field} ${problem}`);
  }
  return result.data.outputs as KubeObject[];
}

/**
 * The MapController definition a sync request was queued for, as one of its causes: a request queued because
 * the controller changed names the generation it must be served with, so a process holding an older one
 * refreshes it rather than serve the request with the old definition.
 */
export function controllerCause(mc: Pick<MapController, 'uid' | 'generation'>): string {
  return `MapController-definition/${mc.uid}/${mc.generation}`;
}

export function definitionOf(causes: readonly string[]): Definition | undefined {
  for (const c of causes) {
    const [tag, uid, generation] = c.split('/');
    if (tag === 'MapController-definition' && uid && Number.isSafeInteger(Number(generation))) return { uid, generation: Number(generation) };
  }
  return undefined;
}

/** How a scheduled resync's causes begin: a resync calls every hook again (a hook may depend on the clock). */
export const RESYNC_CAUSE = 'resync/';

/** A MapController as far as a pass depends on it: which one, and which version of its spec. */
export interface Definition {
  uid: string;
  generation: number;
}
