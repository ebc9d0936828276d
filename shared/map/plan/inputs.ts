// Which objects are a parent's inputs, and each one's map key.
import type { KubeObject } from '../../kube/resource.ts';
import { controllerOf } from '../../ownership/controller-ref.ts';
import { compileSelector, matches, type LabelSelector, type Selector } from '../../ownership/selector.ts';

/** The parent's duck-typed `spec.selector`; missing or empty selects every input in scope (docs/controllers/mapcontroller.md). */
export function inputSelector(parent: KubeObject): Selector {
  const raw = (parent.spec as { selector?: LabelSelector | null } | undefined)?.selector;
  return compileSelector(raw ?? {});
}

/** Inputs: the matching candidates, except those this parent controls (an output listed as an input: no recursion). */
export function selectInputs(parent: KubeObject, selector: Selector, candidates: readonly KubeObject[]): KubeObject[] {
  return candidates.filter((c) => controllerOf(c)?.uid !== parent.metadata.uid && matches(selector, c.metadata.labels));
}

/** The map key of an input: its uid, so a recreated input is a new input and the old one's outputs are detached. */
export function mapKeyOf(input: KubeObject): string {
  const uid = input.metadata.uid;
  if (!uid) throw new Error(`input ${input.metadata.namespace ?? ''}/${input.metadata.name ?? ''} has no uid`);
  return uid;
}
