// CompositeController and DecoratorController (docs/controllers/compositecontroller.md,
// docs/controllers/decoratorcontroller.md) as the handlers read them: the specs, Metacontroller's hook contract
// (version v1) and Outrigger's additions. Pure: parsing and types, no I/O. The CRD schemas accept every field
// Metacontroller documents, so its manifests apply unchanged; what Outrigger does not serve is refused here, with a
// reason, and the controller is Ready=False rather than served half.
import * as z from 'zod/mini';
import type { KubeObject } from '../kube/resource.ts';
import type { LabelSelector } from '../ownership/selector.ts';
import { finalizerName, hookSchema, MAX_RESYNC_AFTER_SECONDS, webhookSchema } from '../map/api.ts';
import { firstIssue, nonEmpty } from '../validation.ts';
import { parsePath, PathError } from '../history/data.ts';

export const COMPOSITE_GROUP = 'metacontroller.k8s.io';
export const COMPOSITE_VERSION = 'v1alpha1';

/** The label generateSelector puts on children: the parent's uid (the parent's imaginary selector selects it). */
export const CONTROLLER_UID_LABEL = 'controller-uid';
/** A hash of what was last applied to a child, so a pass with nothing changed writes nothing. */
export const APPLIED_ANNOTATION = 'composite.outrigger.dev/applied';
/**
 * On every child a CompositeController writes: `compositecontroller/<name>/<parent resource>[.<group>]`. Its parents
 * adopt only orphans carrying their controller's (docs/controllers/compositecontroller.md#adoption).
 */
export const MADE_BY_ANNOTATION = 'composite.outrigger.dev/made-by';
/**
 * On every attachment a DecoratorController writes: its name, as Metacontroller writes it, so that each decorator
 * reads back only what it attached (docs/controllers/decoratorcontroller.md#attachments), whichever engine wrote it.
 */
export const DECORATOR_ANNOTATION = 'metacontroller.k8s.io/decorator-controller';

/**
 * How many times a definition's own event is received while a kind it names is not served yet, before the next
 * resync is left to try again: its backoff (2 s, 4 s, 8 s, 16 s) spans the half-minute a CRD applied with it takes
 * to be served at worst, as Metacontroller retries within seconds (docs/controllers/compositecontroller.md#the-definitions-status).
 */
export const UNRESOLVED_RETRY_RECEIVES = 5;

/** Whether a definition's event is retried soon: a kind it names is not served yet (UnresolvableResource). */
export function retriesUnresolved(reason: string | undefined, receiveCount: number): boolean {
  return reason === 'UnresolvableResource' && receiveCount < UNRESOLVED_RETRY_RECEIVES;
}

/** Why a definition is not served: its Ready condition's reason. */
export class DefinitionError extends Error {
  readonly reason: string;
  constructor(kind: string, name: string, message: string, reason = 'InvalidSpec') {
    super(`${kind} ${name}: ${message}`);
    this.name = 'DefinitionError';
    this.reason = reason;
  }
}

const requirement = z.object({ key: z.string(), operator: z.string(), values: z.optional(z.array(z.string())) });
const labelSelector = z.object({
  matchLabels: z.optional(z.record(z.string(), z.string())),
  matchExpressions: z.optional(z.array(requirement)),
});
const annotationSelector = z.object({
  matchAnnotations: z.optional(z.record(z.string(), z.string())),
  matchExpressions: z.optional(z.array(requirement)),
});
const METHODS = ['OnDelete', 'Recreate', 'InPlace', 'RollingRecreate', 'RollingInPlace'] as const;
const conditionCheck = z.looseObject({ type: nonEmpty(), status: z.optional(z.string()), reason: z.optional(z.string()) });
const updateStrategy = z.optional(
  z.looseObject({
    method: z.optional(z.enum(METHODS)),
    statusChecks: z.optional(z.looseObject({ conditions: z.optional(z.array(conditionCheck)) })),
  }),
);
const resourceRule = { apiVersion: nonEmpty(), resource: nonEmpty() };
/**
 * A Metacontroller hook: the MapController's hook schema (one schema and one client for every kind's hooks,
 * shared/hooks: Service hooks through the apiserver's proxy, caBundle, authorization, etag, Retry-After), with
 * Metacontroller's `version` and `webhook.responseUnMarshallMode` (docs/reference/crds.md#compositecontroller).
 */
const metaHook = z.safeExtend(hookSchema, {
  version: z.optional(z.enum(['v1', 'v2'])),
  webhook: z.optional(z.extend(webhookSchema, { responseUnMarshallMode: z.optional(z.enum(['loose', 'strict'])) })),
});
export type MetaHook = z.infer<typeof metaHook>;
const serviceAccount = z.optional(z.object({ namespace: nonEmpty(), name: nonEmpty() }));

/**
 * Metacontroller's per-host webhook settings: not served (each hook's webhook takes the same options), so a
 * definition that gives them is Ready=False naming the field, rather than called without them.
 */
const endpointConfigs = z.optional(z.array(z.unknown()));
const compositeSpec = z.looseObject({
  parentResource: z.looseObject({
    ...resourceRule,
    labelSelector: z.optional(labelSelector),
    ignoreStatusChanges: z.optional(z.boolean()),
    revisionHistory: z.optional(z.looseObject({ fieldPaths: z.optional(z.array(z.string())) })),
  }),
  childResources: z.optional(z.array(z.looseObject({ ...resourceRule, updateStrategy }))),
  hooks: z.optional(z.record(z.string(), z.unknown())),
  resyncPeriodSeconds: z.optional(z.number().check(z.int(), z.gte(1))),
  generateSelector: z.optional(z.boolean()),
  serviceAccount,
  endpointConfigs,
});
const decoratorSpec = z.looseObject({
  resources: z
    .array(
      z.looseObject({
        ...resourceRule,
        labelSelector: z.optional(labelSelector),
        annotationSelector: z.optional(annotationSelector),
        ignoreStatusChanges: z.optional(z.boolean()),
      }),
    )
    .check(z.minLength(1, 'names no resource')),
  attachments: z.optional(z.array(z.looseObject({ ...resourceRule, updateStrategy }))),
  hooks: z.optional(z.record(z.string(), z.unknown())),
  resyncPeriodSeconds: z.optional(z.number().check(z.int(), z.gte(1))),
  serviceAccount,
  endpointConfigs,
});

/** spec.endpointConfigs, refused while it names any host (docs/getting-started/from-metacontroller.md#what-differs-and-why). */
function refuseEndpointConfigs(kind: string, name: string, configs: unknown[] | undefined): void {
  if (configs?.length)
    throw new DefinitionError(
      kind,
      name,
      'spec.endpointConfigs is not served: give each hook its webhook caBundle, clientTLS, authorization or basicAuth',
      'UnsupportedField',
    );
}

/** How an existing child that differs from the answer is written (the default, OnDelete: it is not). */
export type UpdateMethod = 'OnDelete' | 'Recreate' | 'InPlace';

/** A status condition a child of the new revision must have for a rollout to go on (absent status, reason: any). */
export interface ConditionCheck {
  type: string;
  status?: string | undefined;
  reason?: string | undefined;
}

/** A rolling update: children move to the parent's new revision one at a time (docs/controllers/compositecontroller.md#rolling-updates). */
export interface RollingRule {
  /** RollingInPlace or RollingRecreate: how a moved child is written is then `method` (InPlace, Recreate). */
  method: 'RollingInPlace' | 'RollingRecreate';
  checks: ConditionCheck[];
}

export interface ChildRule {
  apiVersion: string;
  resource: string;
  method: UpdateMethod;
  /** Set for the rolling methods; `method` is then how each child is written when its turn comes. */
  rolling?: RollingRule | undefined;
}

export interface ResourceSelectorRule {
  apiVersion: string;
  resource: string;
  labelSelector?: LabelSelector | undefined;
  annotationSelector?:
    { matchAnnotations?: Record<string, string> | undefined; matchExpressions?: LabelSelector['matchExpressions'] } | undefined;
  /** A change of the object's status alone brings no sync (as a CompositeController's parentResource.ignoreStatusChanges). */
  ignoreStatusChanges?: boolean | undefined;
}

interface Common {
  name: string;
  uid: string;
  generation: number;
  /** The object as stored: hooks receive it whole, as `controller`. */
  object: KubeObject;
  serviceAccount: { namespace: string; name: string } | undefined;
  resyncPeriodSeconds: number | undefined;
  /** customize: which related objects the sync and finalize hooks are sent (shared/composite/related.ts). */
  hooks: { sync: MetaHook; finalize: MetaHook | undefined; customize?: MetaHook | undefined };
  children: ChildRule[];
}

export interface CompositeController extends Common {
  kind: 'CompositeController';
  parent: {
    apiVersion: string;
    resource: string;
    labelSelector: LabelSelector | undefined;
    ignoreStatusChanges: boolean;
    /** revisionHistory.fieldPaths: the parent's fields a revision holds (default `spec`). */
    revisionFieldPaths: string[];
  };
  generateSelector: boolean;
}

export interface DecoratorController extends Common {
  kind: 'DecoratorController';
  resources: ResourceSelectorRule[];
}

/**
 * A hook as Outrigger calls it, or a DefinitionError naming the field. A `url` wins over `service` and `path`, as
 * Metacontroller documents, so its manifests that name both apply unchanged.
 */
export function toHook(kind: string, name: string, field: string, value: unknown): MetaHook {
  const webhook = (value as { webhook?: unknown } | null)?.webhook;
  const urlWins =
    webhook && typeof webhook === 'object' && (webhook as { url?: unknown }).url !== undefined
      ? { ...(value as object), webhook: { ...webhook, service: undefined, path: undefined } }
      : value;
  const result = metaHook.safeParse(urlWins);
  if (!result.success) {
    const [at, problem] = firstIssue(result.error, '');
    throw new DefinitionError(kind, name, `${field}${at ? `.${at}` : ''}: ${problem}`);
  }
  return result.data;
}

type StrategyInput = {
  method?: (typeof METHODS)[number] | undefined;
  statusChecks?: { conditions?: ConditionCheck[] | undefined } | undefined;
};

/** A child rule's update strategy; the rolling methods only where `rolling` (a CompositeController's children). */
function strategyOf(
  kind: string,
  name: string,
  field: string,
  s: StrategyInput | undefined,
  rolling: boolean,
): Pick<ChildRule, 'method' | 'rolling'> {
  const m = s?.method;
  if (m === 'RollingRecreate' || m === 'RollingInPlace') {
    if (!rolling)
      throw new DefinitionError(
        kind,
        name,
        `${field}.updateStrategy.method ${m} is not served for attachments (OnDelete, Recreate, InPlace are)`,
        'UnsupportedUpdateStrategy',
      );
    const checks = (s?.statusChecks?.conditions ?? []).map((c) => ({ type: c.type, status: c.status, reason: c.reason }));
    return { method: m === 'RollingInPlace' ? 'InPlace' : 'Recreate', rolling: { method: m, checks } };
  }
  return { method: m ?? 'OnDelete' };
}

/** A hook's API version (docs/controllers/compositecontroller.md#hook-versions): v1 unless it says v2. */
export type HookVersion = 'v1' | 'v2';
export const hookVersion = (h: MetaHook): HookVersion => h.version ?? 'v1';

/**
 * Whether the hook's answers are read strictly (an unknown or twice-named field is a malformed answer):
 * `webhook.responseUnMarshallMode`, or by default loose for v1 and strict for v2, as Metacontroller documents.
 */
export function strictAnswers(h: MetaHook): boolean {
  const mode = h.webhook?.responseUnMarshallMode;
  return mode ? mode === 'strict' : hookVersion(h) === 'v2';
}

function hooksOf(kind: string, name: string, hooks: Record<string, unknown> | undefined): Common['hooks'] {
  const known =
    kind === 'CompositeController'
      ? ['sync', 'finalize', 'customize', 'preUpdateChild', 'postUpdateChild']
      : ['sync', 'finalize', 'customize'];
  for (const k of Object.keys(hooks ?? {})) {
    if (!known.includes(k)) throw new DefinitionError(kind, name, `spec.hooks.${k} is not a known hook`);
    if (k !== 'sync' && k !== 'finalize' && k !== 'customize')
      throw new DefinitionError(kind, name, `spec.hooks.${k} is not served`, 'UnsupportedHook');
  }
  if (!hooks?.sync) throw new DefinitionError(kind, name, 'spec.hooks.sync is not set: nothing to call', 'NoSyncHook');
  return {
    sync: toHook(kind, name, 'spec.hooks.sync', hooks.sync),
    finalize: hooks.finalize ? toHook(kind, name, 'spec.hooks.finalize', hooks.finalize) : undefined,
    ...(hooks.customize ? { customize: toHook(kind, name, 'spec.hooks.customize', hooks.customize) } : {}),
  };
}

function parsed<T extends z.ZodMiniType>(kind: string, name: string, schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const [field, problem] = firstIssue(result.error, 'spec');
    throw new DefinitionError(kind, name, `spec.${field}: ${problem}`);
  }
  return result.data;
}

const common = (obj: KubeObject) => ({
  name: obj.metadata.name ?? '(unnamed)',
  uid: obj.metadata.uid ?? '',
  generation: obj.metadata.generation ?? 0,
  object: obj,
});

export function parseCompositeController(obj: KubeObject): CompositeController {
  const kind = 'CompositeController';
  const base = common(obj);
  const spec = parsed(kind, base.name, compositeSpec, obj.spec);
  refuseEndpointConfigs(kind, base.name, spec.endpointConfigs);
  return {
    ...base,
    kind,
    serviceAccount: spec.serviceAccount,
    resyncPeriodSeconds: spec.resyncPeriodSeconds,
    hooks: hooksOf(kind, base.name, spec.hooks),
    children: (spec.childResources ?? []).map((c, i) => ({
      apiVersion: c.apiVersion,
      resource: c.resource,
      ...strategyOf(kind, base.name, `spec.childResources[${i}]`, c.updateStrategy, true),
    })),
    parent: {
      apiVersion: spec.parentResource.apiVersion,
      resource: spec.parentResource.resource,
      labelSelector: spec.parentResource.labelSelector as LabelSelector | undefined,
      ignoreStatusChanges: spec.parentResource.ignoreStatusChanges ?? false,
      revisionFieldPaths: revisionPaths(base.name, spec.parentResource.revisionHistory?.fieldPaths),
    },
    generateSelector: spec.generateSelector ?? false,
  };
}

/** revisionHistory.fieldPaths, `spec` when none is named (as Metacontroller defaults it); each a dotted path. */
function revisionPaths(name: string, paths: string[] | undefined): string[] {
  const out = paths?.length ? paths : ['spec'];
  for (const p of out) {
    try {
      parsePath(p);
    } catch (err) {
      if (!(err instanceof PathError)) throw err;
      throw new DefinitionError('CompositeController', name, `spec.parentResource.revisionHistory.fieldPaths: ${err.message}`);
    }
  }
  return out;
}

export function parseDecoratorController(obj: KubeObject): DecoratorController {
  const kind = 'DecoratorController';
  const base = common(obj);
  const spec = parsed(kind, base.name, decoratorSpec, obj.spec);
  refuseEndpointConfigs(kind, base.name, spec.endpointConfigs);
  return {
    ...base,
    kind,
    serviceAccount: spec.serviceAccount,
    resyncPeriodSeconds: spec.resyncPeriodSeconds,
    hooks: hooksOf(kind, base.name, spec.hooks),
    children: (spec.attachments ?? []).map((c, i) => ({
      apiVersion: c.apiVersion,
      resource: c.resource,
      ...strategyOf(kind, base.name, `spec.attachments[${i}]`, c.updateStrategy, false),
    })),
    resources: spec.resources.map((r) => ({
      apiVersion: r.apiVersion,
      resource: r.resource,
      labelSelector: r.labelSelector as LabelSelector | undefined,
      annotationSelector: r.annotationSelector as ResourceSelectorRule['annotationSelector'],
      ignoreStatusChanges: r.ignoreStatusChanges ?? false,
    })),
  };
}

/** Children as a hook receives them: `<Kind>.<apiVersion>` -> key (childKey) -> object; every child rule has an entry. */
export type ChildMap = Record<string, Record<string, KubeObject>>;

// The answer's identifying fields are held to the apiserver's shapes: messages quote them, never free text.
const pattern = (re: RegExp, max: number, what: string) =>
  z.string().check(z.maxLength(max, `must be at most ${max} characters`), z.regex(re, `must be ${what}`));
const child = z.looseObject({
  apiVersion: pattern(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?v[a-z0-9]+$/, 253, 'an apiVersion'),
  kind: pattern(/^[A-Za-z][A-Za-z0-9]*$/, 63, 'a kind'),
  metadata: z.looseObject({
    name: pattern(/^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$/, 253, 'an object name'),
    namespace: z.optional(pattern(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 63, 'a namespace name')),
  }),
});
/** The most children one answer may name: each is a write, and a hook that loops must not flood the cluster. */
export const MAX_CHILDREN_PER_ANSWER = 250;
const children = z.optional(
  z.nullable(z.array(child).check(z.maxLength(MAX_CHILDREN_PER_ANSWER, `must name at most ${MAX_CHILDREN_PER_ANSWER} objects`))),
);
const resyncAfter = z.optional(z.nullable(z.number().check(z.gte(0, 'must be a number of seconds, 0 or more'))));
const status = z.optional(z.nullable(z.record(z.string(), z.unknown())));
const stringMap = z.optional(z.nullable(z.record(z.string(), z.nullable(z.string()))));
const compositeFields = { status, children, resyncAfterSeconds: resyncAfter, finalized: z.optional(z.boolean()) };
const decoratorFields = {
  labels: stringMap,
  annotations: stringMap,
  status,
  attachments: children,
  resyncAfterSeconds: resyncAfter,
  finalized: z.optional(z.boolean()),
};
// The sync and finalize hooks' answers (docs/reference/hooks/, made from the loose ones by scripts/hook-schemas.ts).
// Loose: a field the answer does not have is ignored; strict: it is a malformed answer (strictAnswers).
export const compositeAnswer = { loose: z.looseObject(compositeFields), strict: z.strictObject(compositeFields) };
export const decoratorAnswer = { loose: z.looseObject(decoratorFields), strict: z.strictObject(decoratorFields) };

export class AnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AnswerError';
  }
}

export interface SyncAnswer {
  /** The parent's new status; undefined: left as it is (absent or null). */
  status: Record<string, unknown> | undefined;
  children: KubeObject[];
  resyncAfterSeconds: number | undefined;
  finalized: boolean;
  /** A decorator's labels and annotations for its object (a null value removes the key). */
  labels?: Record<string, string | null> | undefined;
  annotations?: Record<string, string | null> | undefined;
}

function answerOf<T extends z.ZodMiniType>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const [field, problem] = firstIssue(result.error, '(answer)');
    throw new AnswerError(`the answer's ${field} ${problem}`);
  }
  return result.data;
}

const wish = (s: number | null | undefined) => (s ? Math.min(s, MAX_RESYNC_AFTER_SECONDS) : undefined);

export function parseCompositeAnswer(value: unknown, strict = false): SyncAnswer {
  const a = answerOf(strict ? compositeAnswer.strict : compositeAnswer.loose, value);
  return {
    status: a.status ?? undefined,
    children: (a.children ?? []) as KubeObject[],
    resyncAfterSeconds: wish(a.resyncAfterSeconds),
    finalized: a.finalized ?? false,
  };
}

export function parseDecoratorAnswer(value: unknown, strict = false): SyncAnswer {
  const a = answerOf(strict ? decoratorAnswer.strict : decoratorAnswer.loose, value);
  return {
    status: a.status ?? undefined,
    children: (a.attachments ?? []) as KubeObject[],
    resyncAfterSeconds: wish(a.resyncAfterSeconds),
    finalized: a.finalized ?? false,
    labels: a.labels ?? undefined,
    annotations: a.annotations ?? undefined,
  };
}

/**
 * Outrigger's finalizer on a CompositeController or DecoratorController with a finalize hook: its deletion waits
 * until its finalizer is off every parent (docs/controllers/compositecontroller.md#finalizers-are-released), or those
 * parents could never go.
 */
export function definitionFinalizer(kind: 'CompositeController' | 'DecoratorController'): string {
  return kind === 'CompositeController' ? 'composite.outrigger.dev/parents' : 'decorator.outrigger.dev/parents';
}

/** The finalizer a controller with a finalize hook puts on its parents: one per controller. */
export function compositeFinalizer(kind: 'CompositeController' | 'DecoratorController', name: string): string {
  // The map's rule for a name part of at most 63 characters, under a prefix of each kind's own.
  const prefix = kind === 'CompositeController' ? 'composite.outrigger.dev/' : 'decorator.outrigger.dev/';
  return finalizerName(name).replace('map.outrigger.dev/', prefix);
}
