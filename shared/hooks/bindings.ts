// Which definitions may call a Lambda hook (docs/reference/hooks.md#who-may-call-a-lambda-hook). A Lambda hook runs
// with its own IAM role, and its answer is written where its caller's author reads it: the deployment binds each
// function it lets the map function invoke to the definitions that may name it, by cluster, kind, name and the
// namespace of the definition's ServiceAccount. Pure: parsing and the decision, no I/O.
import * as z from 'zod/mini';
import { firstIssue } from '../validation.ts';

export type DefinitionKind = 'MapController' | 'CompositeController' | 'DecoratorController';

/** One rule of a binding: a definition matches it when it matches every field the rule gives. */
export interface CallerRule {
  cluster?: string | undefined;
  kind?: DefinitionKind | undefined;
  name?: string | undefined;
  /** The namespace of the definition's ServiceAccount (a definition itself is cluster-scoped). */
  namespace?: string | undefined;
}

export interface LambdaBinding {
  /** The function's name (its versions and aliases are the same function). */
  functionName: string;
  callers: CallerRule[];
}

/** The definition a hook is called for. */
export interface HookCallerIdentity {
  cluster: string;
  kind?: DefinitionKind | undefined;
  name?: string | undefined;
  namespace?: string | undefined;
}

const nonEmpty = z.string().check(z.minLength(1));
const rule = z.strictObject({
  cluster: z.optional(nonEmpty),
  kind: z.optional(z.enum(['MapController', 'CompositeController', 'DecoratorController'])),
  name: z.optional(nonEmpty),
  namespace: z.optional(nonEmpty),
});
const bindings = z.array(z.strictObject({ functionName: nonEmpty, callers: z.array(rule) }));

/** The bindings as the stack writes them (OUTRIGGER_HOOK_BINDINGS); throws naming the first problem. */
export function parseLambdaBindings(value: unknown): LambdaBinding[] {
  const parsed = bindings.safeParse(value);
  if (!parsed.success) {
    const [field, problem] = firstIssue(parsed.error, 'the list');
    throw new Error(`Lambda hook bindings: ${field}: ${problem}`);
  }
  return parsed.data;
}

/** A function's name, whether the hook gives it as a name, `name:qualifier`, or a (partial) ARN. */
export function functionNameOf(functionName: string): string {
  const parts = functionName.split(':');
  const at = parts.indexOf('function');
  return at >= 0 ? (parts[at + 1] ?? '') : parts[0]!;
}

const describe = (r: CallerRule) =>
  [r.kind ?? 'any definition', r.name, r.cluster && `in cluster ${r.cluster}`, r.namespace && `of ServiceAccount namespace ${r.namespace}`]
    .filter(Boolean)
    .join(' ');

/** Why the caller may not call the function, naming its binding, or undefined when a rule of it matches. */
export function bindingRefusal(
  all: readonly LambdaBinding[],
  functionName: string,
  caller: HookCallerIdentity | undefined,
): string | undefined {
  const name = functionNameOf(functionName);
  const binding = all.find((b) => b.functionName === name);
  if (!binding?.callers.length) return `Lambda function ${name} is bound to no definition by this deployment`;
  const matches = (r: CallerRule) =>
    caller !== undefined &&
    (r.cluster === undefined || r.cluster === caller.cluster) &&
    (r.kind === undefined || r.kind === caller.kind) &&
    (r.name === undefined || r.name === caller.name) &&
    (r.namespace === undefined || r.namespace === caller.namespace);
  if (binding.callers.some(matches)) return undefined;
  return `Lambda function ${name} is bound to ${binding.callers.map(describe).join('; ')}, not to this ${caller?.kind ?? 'definition'}`;
}
