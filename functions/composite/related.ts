// A parent's related objects (docs/controllers/compositecontroller.md#related-objects): its customize answer, asked
// again only when what it depends on moved (the answer kept in the state table is the cache: whoever may edit the
// parent may edit its annotations, so the pass never takes its rules from there), each rule read as the
// controller's ServiceAccount (never as Outrigger: a tenant reads only what its account may), capped per parent,
// and the answer copied onto the parent for the router, for which it is a trigger only. The kinds read are recorded
// on the definition's status, as Outrigger (the definition is Outrigger's object), for the forwarder to watch.
import type { HookCaller } from '../../shared/hooks/index.ts';
import {
  apiVersionOf,
  isKubeError,
  KubeError,
  NotServedError,
  resolveResource,
  type KubeApi,
  type KubeObject,
  type ResolvedResource,
} from '../../shared/kube/index.ts';
import { hookVersion, type ChildMap } from '../../shared/composite/api.ts';
import type { RecordStore } from '../../shared/state/index.ts';
import {
  customizeKey,
  encodeRecorded,
  MAX_RELATED_OBJECTS,
  newKinds,
  parseCustomizeAnswer,
  recordedKinds,
  relatedAnnotation,
  RelatedError,
  relatedKinds,
  relatedMap,
  scopeRule,
  type RecordedRelated,
  type RelatedKind,
  type ScopedRule,
} from '../../shared/composite/related.ts';
import { canonicalJson, type Json } from '../../shared/json.ts';
import { compileSelector, selectorString } from '../../shared/ownership/index.ts';
import { callerOf, type ResolvedDefinition } from './controllers.ts';

export interface RelatedContext {
  /** The definition's ServiceAccount's client. */
  kube: KubeApi;
  hooks: HookCaller;
  deadline?: number | undefined;
  cluster: string;
  /** Where customize answers are kept between passes (the state table); without it, customize is asked every pass. */
  records?: Pick<RecordStore, 'get' | 'put'> | undefined;
}

/** A kept answer lives a day past the pass that last asked; then it is asked again. */
const ANSWER_TTL_SECONDS = 86_400;

export interface Related {
  /** What the sync or finalize request carries as `related`. */
  related: ChildMap;
  /** The parent, as written when its record changed. */
  parent: KubeObject;
  /** The kinds the rules read. */
  kinds: RelatedKind[];
  /** Whether the customize hook was called (its answer was not recorded for what the parent is now). */
  asked: boolean;
}

/** The related objects of one parent; without a customize hook, none. Throws AnswerError, RelatedError or KubeError. */
export async function readRelated(
  ctx: RelatedContext,
  d: ResolvedDefinition,
  resource: ResolvedResource,
  parent: KubeObject,
): Promise<Related> {
  const hook = d.hooks.customize;
  if (!hook) return { related: {}, parent, kinds: [], asked: false };
  const key = customizeKey(d, parent);
  const stateKey = { cluster: ctx.cluster, kind: 'composite-related', name: `${d.uid}/${parent.metadata.uid ?? ''}` };
  const kept = ctx.records && (await ctx.records.get<RecordedRelated>(stateKey))?.value;
  let rules: ScopedRule[];
  const asked = kept?.key !== key;
  if (!asked) rules = kept.rules;
  else {
    const answer = await ctx.hooks.call(
      hook,
      { controller: d.object, parent },
      // As every hook of the pass: Service hooks and webhook Secrets through the ServiceAccount's client.
      { deadline: ctx.deadline, controller: callerOf(ctx.cluster, d), cluster: ctx.kube },
    );
    rules = await Promise.all(
      parseCustomizeAnswer(answer).map(async (r, i) => {
        let resolved;
        try {
          resolved = await resolveResource(ctx.kube, r.apiVersion, r.resource);
        } catch (err) {
          if (!(err instanceof NotServedError)) throw err;
          throw new RelatedError('UnresolvableRelated', `the customize answer's relatedResources[${i}]: ${err.message}`);
        }
        return scopeRule(parent, r, resolved, i, hookVersion(hook));
      }),
    );
  }
  const objects: KubeObject[] = [];
  for (const r of rules) objects.push(...(await readRule(ctx.kube, r, MAX_RELATED_OBJECTS - objects.length)));
  if (asked) await ctx.records?.put(stateKey, { key, rules }, 'any', { ttlSeconds: ANSWER_TTL_SECONDS });
  // Copied onto the parent whenever the copy differs (absent, stale, or edited by someone): the router reads it.
  const written = await record(ctx.kube, d, resource, parent, { key, rules });
  // Keyed as the sync hook's version keys children (docs/controllers/compositecontroller.md#hook-versions).
  return { related: relatedMap(written, rules, objects, hookVersion(d.hooks.sync)), parent: written, kinds: relatedKinds(rules), asked };
}

const where = (r: ScopedRule) => `${r.resource}${r.group ? `.${r.group}` : ''}${r.namespace ? ` in namespace ${r.namespace}` : ''}`;

/** One rule's objects, as the ServiceAccount; more than `room` is TooManyRelated, a refusal is Forbidden naming the rule. */
async function readRule(kube: KubeApi, r: ScopedRule, room: number): Promise<KubeObject[]> {
  const tooMany = () =>
    new RelatedError(
      'TooManyRelated',
      `the customize answer selects more than ${MAX_RELATED_OBJECTS} related objects (at ${where(r)}); narrow its rules`,
    );
  const typed = (o: KubeObject): KubeObject => ({ ...o, apiVersion: apiVersionOf(r), kind: r.kind });
  const namespace = r.namespaced ? r.namespace : undefined;
  try {
    if (r.names) {
      if (r.names.length > room) throw tooMany();
      // Names in every namespace (hook v2): each looked for by field selector, room + 1 at most.
      if (r.namespaced && namespace === undefined) {
        // A name no object can have (a comma would add a term to the selector) matches none.
        const names = r.names.filter((name) => /^[A-Za-z0-9._:-]+$/.test(name));
        const pages = await Promise.all(names.map((name) => kube.list(r, { fieldSelector: `metadata.name=${name}`, limit: room + 1 })));
        const found = pages.flatMap((p) => p.items);
        if (found.length > room) throw tooMany();
        return found.map(typed);
      }
      const found = await Promise.all(r.names.map((name) => kube.find(r, { name, namespace })));
      return found.flatMap((o) => (o ? [typed(o)] : []));
    }
    // One page one larger than what is left: a second page, or a full one, is past the cap.
    const page = await kube.list(r, {
      namespace,
      limit: room + 1,
      ...(r.labelSelector ? { labelSelector: selectorString(compileSelector(r.labelSelector)) } : {}),
    });
    if (page.items.length > room || page.metadata.continue) throw tooMany();
    return page.items.map(typed);
  } catch (err) {
    if (!isKubeError(err, 'Forbidden')) throw err;
    throw new KubeError('Forbidden', `the controller's ServiceAccount may not ${r.names ? 'get' : 'list'} ${where(r)} (a related rule)`);
  }
}

/** The answer copied onto the parent for the router (merge patch conditional on the resourceVersion read), when it differs. */
async function record(
  kube: KubeApi,
  d: ResolvedDefinition,
  resource: ResolvedResource,
  parent: KubeObject,
  next: { key: string; rules: ScopedRule[] },
): Promise<KubeObject> {
  const annotation = relatedAnnotation(d.uid);
  const value = encodeRecorded(next) ?? null;
  if ((parent.metadata.annotations?.[annotation] ?? null) === value) return parent;
  try {
    const written = await kube.patch(
      resource,
      { name: parent.metadata.name ?? '', namespace: resource.namespaced ? parent.metadata.namespace : undefined },
      { metadata: { resourceVersion: parent.metadata.resourceVersion, annotations: { [annotation]: value } } },
      'merge',
    );
    return { ...written, apiVersion: parent.apiVersion, kind: parent.kind };
  } catch (err) {
    if (!isKubeError(err, 'Forbidden')) throw err;
    throw new KubeError(
      'Forbidden',
      `the controller's ServiceAccount may not patch ${resource.resource} to record its customize answer on the parent`,
    );
  }
}

/**
 * Adds the kinds a pass read to the definition's status.relatedResources, as Outrigger, read afresh (a cached copy
 * would drop a kind another pass added): the forwarder watches them, so a related object's change reaches the
 * router. Kinds are only added: one no parent asks for any more is watched until the definition is replaced.
 */
export async function recordRelatedKinds(
  kube: KubeApi,
  resource: { group: string; version: string; resource: string },
  d: ResolvedDefinition,
  kinds: readonly RelatedKind[],
): Promise<boolean> {
  if (!newKinds(recordedKinds(d.object), kinds).length) return false;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const current = await kube.find(resource, { name: d.name });
    if (!current || current.metadata.uid !== d.uid) return false;
    const known = recordedKinds(current);
    const added = newKinds(known, kinds);
    if (!added.length) return false;
    const all = [...known, ...added].sort((a, b) => canonicalJson(a as unknown as Json).localeCompare(canonicalJson(b as unknown as Json)));
    try {
      await kube.patch(
        resource,
        { name: d.name, subresource: 'status' },
        { metadata: { resourceVersion: current.metadata.resourceVersion }, status: { relatedResources: all } },
        'merge',
      );
      return true;
    } catch (err) {
      if (!isKubeError(err, 'Conflict')) throw err;
    }
  }
  return false;
}
