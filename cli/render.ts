// `outrigger render`: one pass of a CompositeController or DecoratorController for one parent, offline, for hook
// authors (docs/reference/cli.md#outrigger-render). The controller, the parent and its children come from files;
// the hook is called (a webhook on this machine) or its answer read from a file; what the pass would write is
// printed. Every decision is the pass's own pure code (shared/composite/plan.ts, shared/composite/request.ts): no
// cluster is read or written.
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { dump } from 'js-yaml';
import {
  AnswerError,
  COMPOSITE_GROUP,
  compositeFinalizer,
  DefinitionError,
  parseCompositeAnswer,
  parseCompositeController,
  parseDecoratorAnswer,
  hookVersion,
  strictAnswers,
  parseDecoratorController,
  type CompositeController,
  type DecoratorController,
  type UpdateMethod,
} from '../shared/composite/api.ts';
import {
  attachmentMark,
  attachmentsOf,
  ChildError,
  childMap,
  childMark,
  claimChildren,
  decorates,
  diffChildren,
  metadataPatch,
  parentSelector,
  prepareChildren,
  statusDiffers,
  withMark,
  type ChildKind,
} from '../shared/composite/plan.ts';
import { hookRequest } from '../shared/composite/request.ts';
import { HookError, Hooks, MAX_ANSWER_BYTES, type HookCaller } from '../shared/hooks/index.ts';
import { apiVersionOf, parseApiVersion, type KubeObject } from '../shared/kube/index.ts';
import type { Hook } from '../shared/map/api.ts';
import { crdOf, loadDocuments, loadObjects, RenderError, resolveOffline, unresolved, type Crd, type Loaded } from './render-files.ts';
import { isBeingDeleted, newControllerRef, SelectorError } from '../shared/ownership/index.ts';

export const renderUsage = `usage: outrigger render --controller FILE --parent FILE [--children FILE]... [--crd FILE]...
                       [--url URL | --command CMD | --response FILE | --print-request] [--finalizing] [-o yaml|json]

One pass of a CompositeController or DecoratorController for one parent, offline: the hook is sent the request
the pass would send, and what its answer would do is printed (children to create, update by their update
strategy, recreate and delete; the parent's new status; a decorator's labels and annotations). Nothing is read
from or written to a cluster. Files are YAML or JSON, several documents each (a List's items too).

  --controller FILE  the CompositeController or DecoratorController (and any CustomResourceDefinitions)
  --parent FILE      the parent (a DecoratorController's object): one object
  --children FILE    its existing children (attachments); one without ownerReferences is taken as the parent's
  --crd FILE         CustomResourceDefinitions of the parent and child resources that are not built in
  --url URL          call this webhook instead of the controller's (http or https, on this machine: loopback)
  --command CMD      run CMD (with sh) as the hook: the request on its stdin, the answer (JSON) on its stdout
  --response FILE    take the hook's answer from FILE (YAML or JSON) instead of calling it
  --print-request    print the request the hook would be sent, and stop
  --finalizing       the parent is being deleted: the finalize hook is called
  -o, --output FMT   yaml (the default) or json
`;

export interface RenderOptions {
  controller: string;
  parent: string;
  children?: readonly string[] | undefined;
  crds?: readonly string[] | undefined;
  url?: string | undefined;
  response?: string | undefined;
  command?: string | undefined;
  printRequest?: boolean | undefined;
  finalizing?: boolean | undefined;
  output?: 'yaml' | 'json' | undefined;
}

export function parseRenderArgs(argv: string[]): RenderOptions {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      controller: { type: 'string' },
      parent: { type: 'string' },
      children: { type: 'string', multiple: true },
      crd: { type: 'string', multiple: true },
      url: { type: 'string' },
      response: { type: 'string' },
      command: { type: 'string' },
      'print-request': { type: 'boolean' },
      finalizing: { type: 'boolean' },
      output: { type: 'string', short: 'o' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length) throw new RenderError(`unexpected argument ${JSON.stringify(positionals[0])}\n${renderUsage}`);
  if (!values.controller || !values.parent) throw new RenderError(`--controller and --parent are required\n${renderUsage}`);
  if ([values.url, values.command, values.response, values['print-request']].filter(Boolean).length > 1)
    throw new RenderError('give one of --url, --command, --response and --print-request');
  const output = values.output ?? 'yaml';
  if (output !== 'yaml' && output !== 'json') throw new RenderError(`-o takes yaml or json, not ${JSON.stringify(output)}`);
  return {
    controller: values.controller,
    parent: values.parent,
    children: values.children,
    crds: values.crd,
    url: values.url,
    response: values.response,
    command: values.command,
    printRequest: values['print-request'],
    finalizing: values.finalizing,
    output,
  };
}

type Definition = (CompositeController | DecoratorController) & { kinds: ChildKind[] };

/** The controller of --controller, its child kinds resolved offline; the CRDs found beside it are added to `crds`. */
function definitionOf(loaded: readonly Loaded[], file: string, crds: Crd[]): Definition {
  const controllers: Loaded[] = [];
  for (const l of loaded) {
    if (l.object.kind === 'CustomResourceDefinition') crds.push(crdOf(l));
    else controllers.push(l);
  }
  const [one, extra] = controllers;
  if (!one) throw new RenderError(`${file}: holds no CompositeController or DecoratorController`);
  if (extra) throw new RenderError(`${extra.where}: a second object besides the controller (${one.where}); render runs one controller`);
  const { object, where } = one;
  const group = parseApiVersion(object.apiVersion ?? '').group;
  if (object.kind === 'MapController')
    throw new RenderError(`${where}: render runs CompositeControllers and DecoratorControllers; a MapController is not rendered`);
  if (group !== COMPOSITE_GROUP || (object.kind !== 'CompositeController' && object.kind !== 'DecoratorController'))
    throw new RenderError(`${where}: ${object.apiVersion ?? ''} ${object.kind ?? ''} is not a CompositeController or DecoratorController`);
  let d;
  try {
    d = object.kind === 'CompositeController' ? parseCompositeController(object) : parseDecoratorController(object);
  } catch (err) {
    if (err instanceof DefinitionError)
      throw new RenderError(`${where}: ${err.message} (the controller would be Ready=False ${err.reason})`);
    throw err;
  }
  const field = d.kind === 'CompositeController' ? 'spec.childResources' : 'spec.attachments';
  const kinds = d.children.map((c, i) => {
    const r = resolveOffline(c, `${field}[${i}]`, crds);
    if (!r) throw unresolved(c, `${where}: ${field}[${i}]`);
    return { ...r, method: c.method };
  });
  return { ...d, kinds };
}

/** Checks the parent is of the controller's parent resource (a decorator's: one of its resources) and selected. */
function checkParent(d: Definition, parent: Loaded, crds: readonly Crd[]): void {
  const { object: p, where } = parent;
  const rules =
    d.kind === 'CompositeController'
      ? [{ ...d.parent, field: 'spec.parentResource' }]
      : d.resources.map((r, i) => ({ ...r, field: `spec.resources[${i}]` }));
  const of = rules.find((rule) => {
    const r = resolveOffline(rule, rule.field, crds);
    // A parent kind no CRD names: the parent's own file says its kind.
    return r ? apiVersionOf(r) === p.apiVersion && r.kind === p.kind : rule.apiVersion === p.apiVersion;
  });
  const wanted = rules.map((r) => `${r.apiVersion} ${r.resource}`).join(', ');
  if (!of)
    throw new RenderError(
      `${where}: ${p.apiVersion ?? ''} ${p.kind ?? ''} is not the controller's ${d.kind === 'CompositeController' ? 'parent resource' : 'resources'} (${wanted})`,
    );
  const selected =
    d.kind === 'CompositeController'
      ? !d.parent.labelSelector || decorates({ labelSelector: d.parent.labelSelector }, p)
      : decorates(of as (typeof d.resources)[number], p);
  if (!selected)
    throw new RenderError(
      `${where}: ${p.kind ?? ''} ${p.metadata.name ?? ''} does not match the controller's selector: it would not be synced`,
    );
}

const nameOf = (o: KubeObject) => `${o.kind ?? ''} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name ?? ''}`;

/**
 * The parent's existing children, each of a child kind (as the pass lists them: the rule's apiVersion). One
 * written without ownerReferences is taken as the parent's, as if it had made it; one with `ownerReferences: []`
 * is an orphan, which a CompositeController's claim adopts when its selector matches and it carries the
 * controller's mark (a DecoratorController adopts nothing). One without ownerReferences given to a decorator is
 * taken as its attachment, its mark added.
 */
function childrenOf(d: Definition, parent: KubeObject, loaded: readonly Loaded[]): KubeObject[] {
  return loaded.map(({ object: c, where }) => {
    const { group } = parseApiVersion(c.apiVersion ?? '');
    const k = d.kinds.find((x) => x.group === group && x.kind === c.kind);
    if (!k) {
      const listed = d.kinds.map((x) => `${apiVersionOf(x)} ${x.kind}`).join(', ') || 'none';
      throw new RenderError(
        `${where}: ${nameOf(c)} is of kind ${c.apiVersion ?? ''} ${c.kind ?? ''}, not one of the controller's child resources (${listed})`,
      );
    }
    const namespace = k.namespaced ? (c.metadata.namespace ?? parent.metadata.namespace) : undefined;
    const theParents = c.metadata.ownerReferences === undefined;
    return {
      ...c,
      apiVersion: apiVersionOf(k),
      kind: k.kind,
      metadata: {
        ...c.metadata,
        ...(namespace ? { namespace } : {}),
        ...(theParents ? { ownerReferences: [newControllerRef(parent)] } : {}),
        ...(theParents && d.kind === 'DecoratorController'
          ? { annotations: withMark(c, attachmentMark(d.name)).metadata.annotations }
          : {}),
      },
    };
  });
}

async function answerOf(
  opts: RenderOptions,
  d: Definition,
  hook: Hook,
  request: { finalizing: boolean },
  hooks: HookCaller,
): Promise<unknown> {
  if (opts.response) {
    const [doc, extra] = (await loadDocuments(opts.response)).filter((x) => x !== null && x !== undefined);
    if (extra !== undefined) throw new RenderError(`${opts.response}: holds more than one document; an answer is one`);
    return doc;
  }
  if (opts.command) return commandAnswer(opts.command, request, hook.timeoutSeconds);
  const url = opts.url ?? hook.webhook?.url;
  if (!url)
    throw new RenderError(
      `the ${d.kind}'s ${request.finalizing ? 'finalize' : 'sync'} hook names no webhook URL (a Lambda function or a Service): give --url (a local server of it), --command or --response FILE`,
    );
  try {
    return await hooks.call({ webhook: { url }, timeoutSeconds: hook.timeoutSeconds, retries: 0 }, request);
  } catch (err) {
    if (!(err instanceof HookError)) throw err;
    const hint =
      err.reason === 'NotAllowed' || err.reason === 'Refused'
        ? '; render calls webhooks on this machine only: give --url http://127.0.0.1:<port>/<path>, or --response FILE'
        : '';
    throw new RenderError(`the hook failed (the pass's Hook${err.reason}): ${err.message}${err.detail ? ` (${err.detail})` : ''}${hint}`);
  }
}

/**
 * A hook run as a local process (a Lambda handler's wrapper, a script): the request on stdin, the answer on stdout.
 * Its failure is the pass's HookFunctionError; stderr is shown, as it is the author's own.
 */
async function commandAnswer(command: string, request: unknown, timeoutSeconds: number): Promise<unknown> {
  const failed = (why: string) => new RenderError(`the hook failed (the pass's HookFunctionError): ${JSON.stringify(command)} ${why}`);
  const { stdout, stderr, code, signal } = await new Promise<{
    stdout: string;
    stderr: string;
    code: number | null;
    signal: string | null;
  }>((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', command], { stdio: ['pipe', 'pipe', 'pipe'], timeout: timeoutSeconds * 1000 });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out.length < MAX_ANSWER_BYTES ? (out += c.toString()) : child.kill()));
    child.stderr.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-2000)));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ stdout: out, stderr: err, code, signal }));
    // A command that reads no stdin closes it early: that is its business, not an error.
    child.stdin.on('error', () => undefined);
    child.stdin.end(JSON.stringify(request));
  });
  if (signal) throw failed(`was stopped (${signal}; its timeout is ${timeoutSeconds} s)`);
  if (code !== 0) throw failed(`exited ${code}${stderr.trim() ? `: ${stderr.trim()}` : ''}`);
  try {
    return JSON.parse(stdout) as unknown;
  } catch {
    throw new RenderError(`the hook's answer is refused (the pass's HookMalformedAnswer): ${JSON.stringify(command)} printed no JSON`);
  }
}

/** The hooks caller of render: webhooks on this machine only (a hook under development), unsigned, not retried. */
export function localHooks(): Hooks {
  return new Hooks({ allowLoopbackHttp: true, webhookAllow: ['localhost', '127.0.0.0/8', '::1'] });
}

/** What one pass would do, as printed. */
export interface Rendered {
  controller: string;
  parent: string;
  hook: 'sync' | 'finalize' | 'none';
  skipped?: string;
  request?: unknown;
  children?: Record<string, unknown[]>;
  /** A decorator's labels and annotations, as merged into its object. */
  metadata?: unknown;
  status?: unknown;
  resyncAfterSeconds?: number;
  finalized?: boolean;
  /** The controller's finalizer, put on the parent (a controller with a finalize hook) or taken off (finalized). */
  finalizer?: { add: string } | { remove: string };
}

export async function render(opts: RenderOptions, hooks: HookCaller = localHooks()): Promise<Rendered> {
  const crds: Crd[] = [];
  for (const file of opts.crds ?? [])
    for (const l of await loadObjects(file)) {
      if (l.object.kind !== 'CustomResourceDefinition')
        throw new RenderError(`${l.where}: is a ${l.object.kind ?? ''}, not a CustomResourceDefinition`);
      crds.push(crdOf(l));
    }
  const d = definitionOf(await loadObjects(opts.controller), opts.controller, crds);
  const parents = await loadObjects(opts.parent);
  if (parents.length !== 1) throw new RenderError(`${opts.parent}: holds ${parents.length} objects; give one parent`);
  const given = parents[0]!;
  checkParent(d, given, crds);
  let parent = given.object;
  if (opts.finalizing && !isBeingDeleted(parent))
    parent = { ...parent, metadata: { ...parent.metadata, deletionTimestamp: new Date().toISOString() } };
  const out: Rendered = { controller: `${d.kind} ${d.name}`, parent: nameOf(parent), hook: 'none' };
  const finalizing = isBeingDeleted(parent);
  if (finalizing && !d.hooks.finalize)
    return {
      ...out,
      skipped:
        'the parent is being deleted and the controller has no finalize hook: no hook is called, the garbage collector takes the children',
    };
  const candidates = childrenOf(d, parent, (await Promise.all((opts.children ?? []).map(loadObjects))).flat());

  const listed: Record<string, unknown[]> = {};
  let observed: KubeObject[];
  let adopted = new Set<string>();
  const mark =
    d.kind === 'CompositeController'
      ? childMark(d.name, { ...parseApiVersion(d.parent.apiVersion), resource: d.parent.resource })
      : attachmentMark(d.name);
  if (d.kind === 'CompositeController') {
    let selector;
    try {
      selector = parentSelector(parent, d.generateSelector);
    } catch (err) {
      if (err instanceof SelectorError) throw new RenderError(`${given.where}: ${err.message} (the pass's InvalidSelector)`);
      throw err;
    }
    const plan = claimChildren(parent, selector, candidates, mark);
    observed = [...plan.owned, ...plan.adopt];
    adopted = new Set(plan.adopt.map((o) => o.metadata.uid ?? ''));
    listed.adopted = plan.adopt.map(nameOf);
    listed.released = plan.release.map(nameOf);
    listed.ignored = plan.ignored.map(nameOf);
  } else {
    observed = attachmentsOf(parent, candidates, d.name);
    listed.ignored = candidates.filter((c) => !observed.includes(c)).map(nameOf);
  }

  const hook = finalizing ? d.hooks.finalize! : d.hooks.sync;
  // In the hook's version, its answer read loosely or strictly, as the pass does (docs/controllers/compositecontroller.md#hook-versions).
  const version = hookVersion(hook);
  const strict = strictAnswers(hook);
  const request = hookRequest(d.kind, d.object, parent, childMap(parent, d.kinds, observed, version), finalizing, {});
  out.hook = finalizing ? 'finalize' : 'sync';
  if (opts.printRequest) return { ...out, request };

  const answered = await answerOf(opts, d, hook, request, hooks);
  let answer, desired;
  try {
    answer = d.kind === 'CompositeController' ? parseCompositeAnswer(answered, strict) : parseDecoratorAnswer(answered, strict);
    desired = prepareChildren(answer.children, {
      parent,
      kinds: d.kinds,
      generateSelector: d.kind === 'CompositeController' && d.generateSelector,
    });
  } catch (err) {
    if (err instanceof AnswerError) throw new RenderError(`the hook's answer is refused (the pass's HookMalformedAnswer): ${err.message}`);
    if (err instanceof ChildError) throw new RenderError(`the hook's answer is refused (the pass's InvalidChild): ${err.message}`);
    throw err;
  }
  const methodOf = (o: KubeObject): UpdateMethod => d.kinds.find((k) => k.kind === o.kind && apiVersionOf(k) === o.apiVersion)!.method;
  const changes = diffChildren(observed, desired, methodOf, adopted);
  const marked = (o: KubeObject) => withMark(o, mark);
  // The children OnDelete keeps though they differ: those the same diff would update were every method InPlace.
  const differing = new Set(diffChildren(observed, desired, () => 'InPlace').update.map((u) => u.observed));
  const kept = changes.unchanged.filter((o) => differing.has(o) && methodOf(o) === 'OnDelete');
  Object.assign(listed, {
    create: changes.create.map(marked),
    update: changes.update.map((u) => marked(u.desired)),
    recreate: changes.recreate.map((u) => marked(u.desired)),
    delete: changes.delete.map(nameOf),
    held: changes.held.map(nameOf),
    unchanged: changes.unchanged.filter((o) => !kept.includes(o)).map(nameOf),
    onDelete: kept.map(nameOf),
  });
  out.children = Object.fromEntries(Object.entries(listed).filter(([, v]) => v.length));
  const meta = metadataPatch(parent, answer.labels, answer.annotations);
  if (meta) out.metadata = meta.metadata;
  if (answer.status !== undefined && statusDiffers(parent.status, answer.status)) out.status = answer.status;
  if (answer.resyncAfterSeconds !== undefined) out.resyncAfterSeconds = answer.resyncAfterSeconds;
  if (finalizing) out.finalized = answer.finalized;
  const finalizer = compositeFinalizer(d.kind, d.name);
  const has = parent.metadata.finalizers?.includes(finalizer) ?? false;
  if (finalizing && answer.finalized) out.finalizer = { remove: finalizer };
  else if (!finalizing && d.hooks.finalize && !has) out.finalizer = { add: finalizer };
  return out;
}

export async function renderCommand(argv: string[], hooks?: HookCaller): Promise<string> {
  const opts = parseRenderArgs(argv);
  const rendered = await render(opts, hooks);
  return opts.output === 'json' ? `${JSON.stringify(rendered, null, 2)}\n` : dump(rendered, { lineWidth: 120, noRefs: true });
}
