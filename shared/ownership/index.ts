// Ownership (docs/controllers/ownership-and-routing.md#the-router): ControllerRef helpers, label selectors, claiming (adopt/release), event routing.
export {
  controllerOf,
  isControlledBy,
  isOwnedBy,
  isBeingDeleted,
  newControllerRef,
  newOwnerRef,
  type ParentIdentity,
} from './controller-ref.ts';
export {
  compileSelector,
  matches,
  parseSelector,
  selectorAt,
  selectorString,
  SelectorError,
  type LabelSelector,
  type LabelSelectorRequirement,
  type Selector,
  type Labels,
} from './selector.ts';
export { planClaim, ordinalNameGuard, hasMark, type ClaimMark, type ClaimOptions, type ClaimPlan } from './claim.ts';
export { claim, type ClaimContext, type ClaimResult } from './claim-shell.ts';
export { routeEvent, inputSteps, relatedSteps, dedupeKeys, syncKeyString, type RouteStep, type SyncKey } from './router.ts';
export { BatchResolver, ownsKind, type ControllerKind, type Refusal, type RoutedKey } from './resolver.ts';
