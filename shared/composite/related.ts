// The customize hook of a CompositeController or DecoratorController, pure (docs/controllers/compositecontroller.md#related-objects):
// its answer's relatedResources rules parsed and held to Metacontroller's scope rules, the related objects keyed for
// the sync request, the key an answer is kept under, its copy on the parent (an annotation per controller, which the
// router reads to find the parents a related object's change concerns; never the pass, which keeps the answer in
// the state table), and the rule matching both use.
import * as z from 'zod/mini';
import { canonicalJson, shortHash, type Json } from '../json.ts';
import type { KubeObject } from '../kube/resource.ts';
import { compileSelector, matches, SelectorError, type LabelSelector } from '../ownership/selector.ts';
import { firstIssue } from '../validation.ts';
import { AnswerError, type ChildMap, type HookVersion } from './api.ts';
import { childMap } from './plan.ts';

/** The most rules one customize answer may give: each is a read per pass, and the rules are kept on the parent. */
export const MAX_RELATED_RULES = 20;
/** The most related objects one parent is sent: past it the pass fails, Synced=False TooManyRelated. */
export const MAX_RELATED_OBJECTS = 500;
/** The largest recorded answer kept on the parent (annotations of an object may hold 256 KiB in all). */
export const MAX_RECORDED_BYTES = 16_384;
/** The annotation a controller records its customize answer in, per controller (its uid: names change, uids do not). */
export const RELATED_ANNOTATION_PREFIX = 'related.outrigger.dev/';

export const relatedAnnotation = (controllerUid: string): string => `${RELATED_ANNOTATION_PREFIX}${controllerUid}`;

const name = z.string().check(z.minLength(1), z.maxLength(253));
const requirement = z.object({ key: z.string(), operator: z.string(), values: z.optional(z.array(z.string())) });
const rule = z.looseObject({
  apiVersion: z.string().check(z.minLength(1), z.maxLength(253)),
  resource: z.string().check(z.minLength(1), z.maxLength(253)),
  labelSelector: z.optional(
    z.nullable(z.object({ matchLabels: z.optional(z.record(z.string(), z.string())), matchExpressions: z.optional(z.array(requirement)) })),
  ),
  namespace: z.optional(z.nullable(z.string().check(z.maxLength(63)))),
  names: z.optional(z.nullable(z.array(name).check(z.maxLength(MAX_RELATED_OBJECTS)))),
  namespaceSelector: z.optional(z.unknown()),
});
const customizeAnswer = z.looseObject({
  relatedResources: z.optional(
    z.nullable(z.array(rule).check(z.maxLength(MAX_RELATED_RULES, `must give at most ${MAX_RELATED_RULES} rules`))),
  ),
});

/** Why a parent's related objects could not be sent: its Synced condition's reason (TooManyRelated, UnresolvableRelated). */
export class RelatedError extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = 'RelatedError';
    this.reason = reason;
  }
}

/** A rule as the customize hook answers it. */
export interface RelatedRule {
  apiVersion: string;
  resource: string;
  labelSelector?: LabelSelector | undefined;
  namespace?: string | undefined;
  names?: string[] | undefined;
}

/** The customize answer's rules; AnswerError names the rule and field that is wrong. */
export function parseCustomizeAnswer(value: unknown): RelatedRule[] {
  const result = customizeAnswer.safeParse(value);
  if (!result.success) {
    const [field, problem] = firstIssue(result.error, '(answer)');
    throw new AnswerError(`the customize answer's ${field} ${problem}`);
  }
  return (result.data.relatedResources ?? []).map((r, i) => {
    const at = `the customize answer's relatedResources[${i}]`;
    // A namespaceSelector would widen the rule to namespaces Outrigger does not select for it: refused, not ignored.
    if (r.namespaceSelector !== undefined && r.namespaceSelector !== null)
      throw new AnswerError(`${at}.namespaceSelector is not served; name the namespace`);
    if (r.names && r.labelSelector) throw new AnswerError(`${at} gives both names and labelSelector; give one`);
    if (r.labelSelector) {
      try {
        compileSelector(r.labelSelector as LabelSelector);
      } catch (err) {
        if (err instanceof SelectorError) throw new AnswerError(`${at}.labelSelector: ${err.message}`);
        throw err;
      }
    }
    return {
      apiVersion: r.apiVersion,
      resource: r.resource,
      ...(r.labelSelector ? { labelSelector: r.labelSelector as LabelSelector } : {}),
      ...(r.namespace ? { namespace: r.namespace } : {}),
      ...(r.names ? { names: [...new Set(r.names)] } : {}),
    };
  });
}

/**
 * A rule resolved against discovery and held to the parent's scope: what a pass reads and what the router matches.
 * `namespace` undefined: every namespace (a cluster-scoped parent's rule that names none) or a cluster-scoped kind.
 */
export interface ScopedRule {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  namespace?: string | undefined;
  labelSelector?: LabelSelector | undefined;
  names?: string[] | undefined;
}

/**
 * Metacontroller's scope rules, by the customize hook's version. v1: a namespaced parent's related objects of a
 * namespaced kind are in its own namespace (a rule may name it, or none); a cluster-scoped parent's rule may name
 * any namespace, or none for every namespace (names need one). v2: any parent's rule is a cluster-scoped parent's,
 * and names without a namespace are looked for in every namespace. A cluster-scoped kind takes no namespace.
 * AnswerError otherwise.
 */
export function scopeRule(
  parent: KubeObject,
  r: RelatedRule,
  resolved: { group: string; version: string; kind: string; namespaced: boolean },
  index: number,
  hookVersion: HookVersion = 'v1',
): ScopedRule {
  const at = `the customize answer's relatedResources[${index}]`;
  const parentNs = parent.metadata.namespace;
  let namespace = r.namespace;
  if (!resolved.namespaced) {
    if (namespace) throw new AnswerError(`${at}: ${r.resource} is cluster-scoped and takes no namespace`);
  } else if (parentNs && hookVersion === 'v1') {
    if (namespace && namespace !== parentNs)
      throw new AnswerError(`${at}: names namespace ${namespace}, but a parent in ${parentNs} may relate objects in ${parentNs} only`);
    namespace = parentNs;
  } else if (r.names && !namespace && hookVersion === 'v1')
    throw new AnswerError(`${at}: names objects of the namespaced ${r.resource} without naming their namespace`);
  return {
    group: resolved.group,
    version: resolved.version,
    resource: r.resource,
    kind: resolved.kind,
    namespaced: resolved.namespaced,
    ...(namespace ? { namespace } : {}),
    ...(r.labelSelector ? { labelSelector: r.labelSelector } : {}),
    ...(r.names ? { names: r.names } : {}),
  };
}

/** What a related object is matched by: its kind, where it is, its name and labels (metadata alone: what the router has). */
export interface RelatedCandidate {
  group: string;
  kind: string;
  namespace?: string | undefined;
  name: string;
  labels?: Readonly<Record<string, string>> | undefined;
}

/**
 * Whether the rule selects the object: of the rule's kind, in its namespace (if it names one), named by it (if it
 * names any), matching its label selector (if it gives one; a rule with neither selects every object in scope).
 */
export function ruleSelects(r: ScopedRule, o: RelatedCandidate): boolean {
  if (r.group !== o.group || r.kind !== o.kind) return false;
  if (r.namespaced && r.namespace !== undefined && r.namespace !== o.namespace) return false;
  if (r.names) return r.names.includes(o.name);
  if (!r.labelSelector) return true;
  try {
    return matches(compileSelector(r.labelSelector), o.labels ?? {});
  } catch (err) {
    if (err instanceof SelectorError) return false;
    throw err;
  }
}

/** The related objects as the sync and finalize hooks are sent them: keyed as children are (childMap), one entry per rule's kind. */
export function relatedMap(
  parent: KubeObject,
  rules: readonly ScopedRule[],
  objects: readonly KubeObject[],
  version: HookVersion = 'v1',
): ChildMap {
  return childMap(parent, rules, objects, version);
}

/** A customize answer as kept (and copied onto the parent): the key of what it was asked with, and its rules. */
export interface RecordedRelated {
  key: string;
  rules: ScopedRule[];
}

/**
 * What a customize answer depends on: the controller's spec (its generation) and the parent's generation, as
 * Metacontroller keys its cache, and the parent's labels and annotations (which move no generation; Outrigger's own
 * records left out), so an answer is asked again when any of them changes and never otherwise.
 */
export function customizeKey(controller: { uid: string; generation: number }, parent: KubeObject): string {
  const annotations = Object.fromEntries(
    Object.entries(parent.metadata.annotations ?? {}).filter(([k]) => !k.startsWith(RELATED_ANNOTATION_PREFIX)),
  );
  const basis = {
    controller: `${controller.uid}/${controller.generation}`,
    generation: parent.metadata.generation ?? 0,
    labels: parent.metadata.labels ?? {},
    annotations,
  };
  return shortHash(basis as unknown as Json, 0);
}

/** The annotation's value; undefined when the answer is too large to keep (it is then asked again each pass). */
export function encodeRecorded(r: RecordedRelated): string | undefined {
  const text = canonicalJson(r as unknown as Json);
  return Buffer.byteLength(text) <= MAX_RECORDED_BYTES ? text : undefined;
}

const scoped = z.object({
  group: z.string(),
  version: z.string(),
  resource: z.string(),
  kind: z.string(),
  namespaced: z.boolean(),
  namespace: z.optional(z.string()),
  labelSelector: z.optional(
    z.object({ matchLabels: z.optional(z.record(z.string(), z.string())), matchExpressions: z.optional(z.array(requirement)) }),
  ),
  names: z.optional(z.array(z.string())),
});
const recorded = z.object({ key: z.string(), rules: z.array(scoped) });

/** The controller's copy on the parent, or undefined when there is none or it does not parse. */
export function recordedOn(parent: KubeObject, controllerUid: string): RecordedRelated | undefined {
  const text = parent.metadata.annotations?.[relatedAnnotation(controllerUid)];
  if (!text) return undefined;
  try {
    const r = recorded.safeParse(JSON.parse(text));
    return r.success ? (r.data as RecordedRelated) : undefined;
  } catch {
    return undefined;
  }
}

// A router batch asks of the same listed parents once per related event: each record is parsed once.
const parsedRecords = new WeakMap<KubeObject, Map<string, RecordedRelated | undefined>>();

/** Whether the copy of the parent's customize answer (of that controller) asks for the object: the router's question. */
export function parentAsks(parent: KubeObject, controllerUid: string, o: RelatedCandidate): boolean {
  let byController = parsedRecords.get(parent);
  if (!byController) parsedRecords.set(parent, (byController = new Map()));
  if (!byController.has(controllerUid)) byController.set(controllerUid, recordedOn(parent, controllerUid));
  return byController.get(controllerUid)?.rules.some((r) => ruleSelects(r, o)) ?? false;
}

/** The kinds a set of rules reads, each once (what the forwarder must watch for the router to hear of them). */
export function relatedKinds(rules: readonly ScopedRule[]): RelatedKind[] {
  const out = new Map<string, RelatedKind>();
  for (const r of rules) out.set(`${r.group}/${r.resource}`, { group: r.group, version: r.version, resource: r.resource, kind: r.kind });
  return [...out.values()];
}

export interface RelatedKind {
  group: string;
  version: string;
  resource: string;
  kind: string;
}

/** Kinds in `more` not yet in `known` (by group and resource). */
export function newKinds(known: readonly RelatedKind[], more: readonly RelatedKind[]): RelatedKind[] {
  return more.filter((m) => !known.some((k) => k.group === m.group && k.resource === m.resource));
}

const relatedKindsStatus = z.array(z.object({ group: z.string(), version: z.string(), resource: z.string(), kind: z.string() }));

/** The related kinds a definition's status records (status.relatedResources; written by Outrigger as the passes find them). */
export function recordedKinds(definition: KubeObject): RelatedKind[] {
  const r = relatedKindsStatus.safeParse((definition.status as { relatedResources?: unknown } | undefined)?.relatedResources);
  return r.success ? r.data : [];
}
