// MapController (docs/controllers/mapcontroller.md) as the handlers read it: the controller's spec, the hook contracts, and the tags
// Outrigger puts on outputs. Pure: parsing and types, no I/O. The CRD schema rejects most bad specs at the
// apiserver; the parser repeats those checks, so a bad MapController is reported and never causes a write.
// A namespace import, so bundles keep only what is used (see shared/envelope/index.ts).
import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import { firstIssue, nonEmpty, parseGoDuration } from '../validation.ts';
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

/**
 * How an output whose answer changed is written (docs/controllers/mapcontroller.md#lifecycle): `InPlace`, a server-side
 * apply; `Recreate`, a delete and a create, for kinds whose changed fields are immutable.
 */
export const UPDATE_METHODS = ['InPlace', 'Recreate'] as const;
export type UpdateMethod = (typeof UPDATE_METHODS)[number];
const outputRule = z.object({
  apiVersion: nonEmpty(),
  resource: nonEmpty(),
  updateStrategy: z.optional(z.object({ method: z._default(z.enum(UPDATE_METHODS), 'InPlace') })),
});

/** A key of a Secret or ConfigMap, read as the controller's ServiceAccount (docs/reference/hooks.md#webhook-options). */
const keyRef = z.object({ name: nonEmpty(), namespace: nonEmpty(), key: z.optional(nonEmpty()) });
const oneOf = (n: number) => n === 1;

/**
 * A webhook, in Metacontroller's fields: a `url`, or a `service` (and `path`) inside the cluster
 * (shared/hooks/target.ts); and the options for a URL outside it.
 */
export const webhookSchema = z
  .object({
    url: z.optional(z.url({ protocol: /^https?$/, error: 'must be an http or https URL' })),
    service: z.optional(
      z.object({
        name: nonEmpty(),
        namespace: nonEmpty(),
        port: z.optional(z.number().check(z.int(), z.gte(1), z.lte(65535))),
        protocol: z.optional(z.enum(['http', 'https'])),
      }),
    ),
    path: z.optional(z.string().check(z.regex(/^\//, 'must start with /'))),
    /** A Go duration (`10s`): the call's timeout, in place of timeoutSeconds. */
    timeout: z.optional(z.string().check(z.refine((t) => (parseGoDuration(t) ?? 0) > 0, 'must be a positive Go duration such as 10s'))),
    caBundle: z.optional(
      z
        .object({ inline: z.optional(nonEmpty()), secretRef: z.optional(keyRef), configMapRef: z.optional(keyRef) })
        .check(
          z.refine(
            (c) => oneOf([c.inline, c.secretRef, c.configMapRef].filter(Boolean).length),
            'needs exactly one of inline, secretRef or configMapRef',
          ),
        ),
    ),
    /** `Authorization: <type, default Bearer> <the Secret's key, default token>`; Basic is basicAuth's, as in Metacontroller. */
    authorization: z.optional(
      z.object({
        type: z.optional(
          z.string().check(
            z.regex(/^[A-Za-z][A-Za-z0-9._-]*$/, 'must be an HTTP authorization scheme'),
            z.refine((t) => t.toLowerCase() !== 'basic', 'Basic is not a type: use basicAuth'),
          ),
        ),
        secretRef: keyRef,
      }),
    ),
    /** HTTP basic authorization from a Secret's `usernameKey` and `passwordKey` (default `username`, `password`). */
    basicAuth: z.optional(
      z.object({
        secretRef: z.object({ name: nonEmpty(), namespace: nonEmpty() }),
        usernameKey: z.optional(nonEmpty()),
        passwordKey: z.optional(nonEmpty()),
      }),
    ),
    /** A client certificate from a Secret's `certKey` and `privateKeyKey` (default `tls.crt`, `tls.key`). */
    clientTLS: z.optional(
      z.object({
        secretRef: z.object({ name: nonEmpty(), namespace: nonEmpty() }),
        certKey: z.optional(nonEmpty()),
        privateKeyKey: z.optional(nonEmpty()),
      }),
    ),
    /** If-None-Match caching of answers (docs/reference/hooks.md#webhook-options). */
    etag: z.optional(
      z.object({
        enabled: z.optional(z.boolean()),
        cacheTimeoutSeconds: z.optional(z.number().check(z.int(), z.gte(1))),
        cacheCleanupSeconds: z.optional(z.number().check(z.int(), z.gte(1))),
      }),
    ),
  })
  .check(
    z.refine((w) => (w.url ? 1 : 0) + (w.service ? 1 : 0) === 1, 'needs exactly one of url or service'),
    z.refine((w) => !(w.authorization && w.basicAuth), 'takes authorization or basicAuth, not both'),
  );
export type Webhook = z.infer<typeof webhookSchema>;

/** A hook: a webhook or a Lambda function. CompositeController and DecoratorController hooks extend it (shared/composite/api.ts). */
export const hookSchema = z
  .object({
    webhook: z.optional(webhookSchema),
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
  outputResources: z.array(outputRule).check(z.minLength(1, 'names no output resource')),
  resyncPeriodSeconds: z.optional(z.number().check(z.int(), z.gte(1))),
  /** finalize: called for a parent being deleted, which carries the controller's finalizer while this is set. */
  hooks: z.object({ map: hookSchema, tombstone: z.optional(hookSchema), finalize: z.optional(hookSchema) }),
  /** Whom the controller acts as for its parents, inputs and outputs (docs/controllers/mapcontroller.md#identity-each-mapcontroller-acts-as-its-own-serviceaccount). */
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

/** The finalize hook's request: the parent being deleted and every output it owns (mapKey is not set). */
export type FinalizeHookRequest = Omit<MapHookRequest, 'input' | 'mapKey'>;

// The requests as a hook receives them, for the JSON Schemas published in docs/reference/hooks/ (made from these by
// scripts/hook-schemas.ts; a unit test keeps the two equal). Outrigger builds requests from the interfaces above.
const hookObject = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  metadata: z.looseObject({ name: z.string(), namespace: z.optional(z.string()), uid: z.string() }),
});
const outputMapSchema = z.record(z.string(), z.record(z.string(), hookObject));
export const mapHookRequestSchema = z.object({
  controller: hookObject,
  parent: hookObject,
  mapKey: z.string(),
  input: hookObject,
  outputs: outputMapSchema,
});
export const tombstoneHookRequestSchema = z.object({
  controller: hookObject,
  parent: hookObject,
  mapKey: z.string(),
  outputs: outputMapSchema,
});
export const finalizeHookRequestSchema = z.object({ controller: hookObject, parent: hookObject, outputs: outputMapSchema });

/**
 * The finalizer a MapController with a finalize hook puts on each parent: one per controller, so two controllers
 * (past and present) of one parent kind never remove each other's. A finalizer's name part holds 63 characters:
 * a longer controller name is cut and made unique with a hash of the whole.
 */
export function finalizerName(controller: string): string {
  const prefix = 'map.outrigger.dev/';
  if (controller.length <= 63) return `${prefix}${controller}`;
  const hash = createHash('sha256').update(controller).digest('hex').slice(0, 12);
  return `${prefix}${controller.slice(0, 50).replace(/[^A-Za-z0-9]+$/, '')}-${hash}`;
}

/**
 * On a MapController with a finalize hook: its deletion waits until its finalizer is off every parent
 * (docs/controllers/mapcontroller.md#lifecycle), or those parents could never go.
 */
export const CONTROLLER_FINALIZER = 'map.outrigger.dev/parents';

/** The most outputs one answer may name: each is a write, and a hook that loops must not flood the cluster. */
export const MAX_OUTPUTS_PER_ANSWER = 250;

// The answer's identifying fields are the only parts of it that messages (and so the parent's status) quote:
// they are held to the apiserver's own shapes, so no free text of the hook's travels.
const pattern = (re: RegExp, max: number, what: string) =>
  z.string().check(z.maxLength(max, `must be at most ${max} characters`), z.regex(re, `must be ${what}`));
const objectName = pattern(/^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$/, 253, 'an object name');
const namespaceName = pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 63, 'a namespace name');
const kindName = pattern(/^[A-Za-z][A-Za-z0-9]*$/, 63, 'a kind');
const apiVersionName = pattern(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?v[a-z0-9]+$/, 253, 'an apiVersion');

/**
 * The longest `resyncAfterSeconds` kept: a hook asking for more is called again after a day, and may ask again
 * (a parent's pass record, which holds its wake time, expires after a day without passes).
 */
export const MAX_RESYNC_AFTER_SECONDS = 86_400;

/**
 * What a hook answers: `{outputs: [...]}` (for the tombstone and finalize hooks, the outputs to keep), and, for
 * any hook, `resyncAfterSeconds`: call me again after that long even if nothing changes (0 or absent: no wish).
 */
const outputsSchema = z
  .array(
    z.looseObject({
      apiVersion: apiVersionName,
      kind: kindName,
      metadata: z.looseObject({ name: objectName, namespace: z.optional(namespaceName) }),
    }),
  )
  .check(z.maxLength(MAX_OUTPUTS_PER_ANSWER, `must name at most ${MAX_OUTPUTS_PER_ANSWER} outputs`));
const resyncAfter = z.optional(z.number().check(z.gte(0, 'must be a number of seconds, 0 or more')));
export const hookResponseSchema = z.object({ outputs: outputsSchema, resyncAfterSeconds: resyncAfter });
/** The finalize hook's answer: `finalized` says whether the parent may go (its finalizer is removed). */
export const finalizeResponseSchema = z.object({ outputs: outputsSchema, resyncAfterSeconds: resyncAfter, finalized: z.boolean() });

export class HookResponseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HookResponseError';
  }
}

export interface HookAnswer {
  outputs: KubeObject[];
  /** Seconds after which the hook wants to be called again without a change; undefined for no wish (0 included). */
  resyncAfterSeconds: number | undefined;
}

export interface FinalizeAnswer extends HookAnswer {
  finalized: boolean;
}

function parsed<T extends z.ZodMiniType>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const [field, problem] = firstIssue(result.error, '(answer)');
    throw new HookResponseError(`the answer's ${field} ${problem}`);
  }
  return result.data;
}

const wish = (seconds: number | undefined) => (seconds ? Math.min(seconds, MAX_RESYNC_AFTER_SECONDS) : undefined);

/** A map or tombstone hook's answer. */
export function parseHookAnswer(value: unknown): HookAnswer {
  const { outputs, resyncAfterSeconds } = parsed(hookResponseSchema, value);
  return { outputs: outputs as KubeObject[], resyncAfterSeconds: wish(resyncAfterSeconds) };
}

/** A finalize hook's answer: `finalized` is required (a hook that forgot it never lets a parent go by mistake). */
export function parseFinalizeAnswer(value: unknown): FinalizeAnswer {
  const { outputs, resyncAfterSeconds, finalized } = parsed(finalizeResponseSchema, value);
  return { outputs: outputs as KubeObject[], resyncAfterSeconds: wish(resyncAfterSeconds), finalized };
}

export function parseHookResponse(value: unknown): KubeObject[] {
  return parseHookAnswer(value).outputs;
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
    if (tag === 'MapController-definition' && uid && Number.isSafeInteger(Number(generation)))
      return { uid, generation: Number(generation) };
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
