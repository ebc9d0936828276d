// What a CompositeController's or DecoratorController's sync and finalize hooks are sent (hook version v1,
// docs/controllers/compositecontroller.md#a-pass-per-parent): built here for the pass and for `outrigger render`
// alike, with the schemas of docs/reference/hooks/ (scripts/hook-schemas.ts; a unit test keeps the two equal).
import * as z from 'zod/mini';
import type { KubeObject } from '../kube/resource.ts';
import type { ChildMap } from './api.ts';

export interface CompositeHookRequest {
  controller: KubeObject;
  parent: KubeObject;
  children: ChildMap;
  /** The related objects the customize hook's answer asked for (docs/controllers/compositecontroller.md#related-objects). */
  related: ChildMap;
  /** True for the finalize hook (a parent being deleted), false for sync. */
  finalizing: boolean;
}

/** A DecoratorController's: the decorated object and its attachments, in place of parent and children. */
export interface DecoratorHookRequest {
  controller: KubeObject;
  object: KubeObject;
  attachments: ChildMap;
  related: ChildMap;
  finalizing: boolean;
}

/** The request for a parent (a decorator's object) and its children, whose map childMap made. */
// eslint-disable-next-line max-params -- the request body's parts, in its order; the sync, render and two unit tests build requests from them
export function hookRequest(
  kind: 'CompositeController' | 'DecoratorController',
  controller: KubeObject,
  parent: KubeObject,
  children: ChildMap,
  finalizing: boolean,
  related: ChildMap = {},
): CompositeHookRequest | DecoratorHookRequest {
  // A decorator's request names its object and attachments so in v1 and v2 alike; only the maps' keys differ by
  // version (childMap), as in Metacontroller (docs/controllers/compositecontroller.md#hook-versions).
  return kind === 'CompositeController'
    ? { controller, parent, children, related, finalizing }
    : { controller, object: parent, attachments: children, related, finalizing };
}

const hookObject = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  metadata: z.looseObject({ name: z.string(), namespace: z.optional(z.string()), uid: z.string() }),
});
const childMapSchema = z.record(z.string(), z.record(z.string(), hookObject));

/** The sync hook's request (finalizing false) or the finalize hook's (true). */
export const compositeHookRequestSchema = (finalizing: boolean) =>
  z.object({
    controller: hookObject,
    parent: hookObject,
    children: childMapSchema,
    related: childMapSchema,
    finalizing: z.literal(finalizing),
  });
export const decoratorHookRequestSchema = (finalizing: boolean) =>
  z.object({
    controller: hookObject,
    object: hookObject,
    attachments: childMapSchema,
    related: childMapSchema,
    finalizing: z.literal(finalizing),
  });
