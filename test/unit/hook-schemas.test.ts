// The hook contracts' JSON Schemas (docs/reference/hooks.md) are the code's: the committed files are what
// scripts/hook-schemas.ts makes from shared/map/api.ts and shared/composite/{api,request}.ts, and the request
// schemas name the fields Outrigger sends.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as z from 'zod/mini';
import type { KubeObject } from '../../shared/kube/index.ts';
import {
  finalizeHookRequestSchema,
  mapHookRequestSchema,
  parseFinalizeAnswer,
  parseHookAnswer,
  tombstoneHookRequestSchema,
  type FinalizeHookRequest,
  type MapHookRequest,
  type TombstoneHookRequest,
} from '../../shared/map/api.ts';
import { parseCompositeAnswer, parseDecoratorAnswer } from '../../shared/composite/api.ts';
import { childMap, type ChildKind } from '../../shared/composite/plan.ts';
import {
  compositeHookRequestSchema,
  decoratorHookRequestSchema,
  hookRequest,
  type CompositeHookRequest,
  type DecoratorHookRequest,
} from '../../shared/composite/request.ts';
import { HOOK_SCHEMA_DIR, hookSchemaFiles } from '../../scripts/hook-schemas.ts';

/** True only when the two types are the same (a compile error in the assignments below otherwise). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

const object = (kind: string, name: string, namespace?: string): KubeObject => ({
  apiVersion: 'v1',
  kind,
  metadata: { name, uid: `${name}-uid`, ...(namespace ? { namespace } : {}) },
});

test('the committed docs/reference/hooks/*.schema.json are the ones the code makes (npm run hook-schemas writes them)', () => {
  const made = hookSchemaFiles();
  expect(readdirSync(HOOK_SCHEMA_DIR).sort()).toEqual([...made.keys()].sort());
  for (const [file, text] of made) expect({ file, text: readFileSync(join(HOOK_SCHEMA_DIR, file), 'utf8') }).toEqual({ file, text });
});

test('each request schema names the fields of the request type Outrigger sends, and takes a request as it is built', () => {
  const mapKeys: Same<keyof z.infer<typeof mapHookRequestSchema>, keyof MapHookRequest> = true;
  const tombstoneKeys: Same<keyof z.infer<typeof tombstoneHookRequestSchema>, keyof TombstoneHookRequest> = true;
  const finalizeKeys: Same<keyof z.infer<typeof finalizeHookRequestSchema>, keyof FinalizeHookRequest> = true;
  expect([mapKeys, tombstoneKeys, finalizeKeys]).toEqual([true, true, true]);

  const controller = object('MapController', 'snapshots');
  const parent = object('SnapshotSchedule', 'daily', 'ns');
  const outputs = { 'VolumeSnapshot.snapshot.storage.k8s.io/v1': { 'ns/data-1': object('VolumeSnapshot', 'data-1', 'ns') } };
  const map: MapHookRequest = { controller, parent, mapKey: 'pvc-uid', input: object('PersistentVolumeClaim', 'data', 'ns'), outputs };
  const tombstone: TombstoneHookRequest = { controller, parent, mapKey: 'pvc-uid', outputs };
  const finalize: FinalizeHookRequest = { controller, parent, outputs };
  expect(mapHookRequestSchema.safeParse(map).success).toBe(true);
  expect(tombstoneHookRequestSchema.safeParse(tombstone).success).toBe(true);
  expect(finalizeHookRequestSchema.safeParse(finalize).success).toBe(true);
});

test('an answer the response schemas describe is one the map function takes', () => {
  const snapshot = { apiVersion: 'snapshot.storage.k8s.io/v1', kind: 'VolumeSnapshot', metadata: { name: 'data-1' } };
  expect(parseHookAnswer({ outputs: [snapshot], resyncAfterSeconds: 60 }).outputs).toEqual([snapshot]);
  expect(parseFinalizeAnswer({ outputs: [], finalized: true }).finalized).toBe(true);
});

test('each CompositeController and DecoratorController request schema names the fields of the request the pass builds', () => {
  const compositeKeys: Same<keyof z.infer<ReturnType<typeof compositeHookRequestSchema>>, keyof CompositeHookRequest> = true;
  const decoratorKeys: Same<keyof z.infer<ReturnType<typeof decoratorHookRequestSchema>>, keyof DecoratorHookRequest> = true;
  expect([compositeKeys, decoratorKeys]).toEqual([true, true]);

  const controller = object('CompositeController', 'podsets');
  const parent = { ...object('PodSet', 'web', 'ns'), apiVersion: 'example.com/v1' };
  const pods: ChildKind = { group: '', version: 'v1', resource: 'pods', kind: 'Pod', namespaced: true, method: 'OnDelete' };
  const children = childMap(parent, [pods], [object('Pod', 'web-1', 'ns')]);
  for (const finalizing of [false, true]) {
    const composite = hookRequest('CompositeController', controller, parent, children, finalizing);
    const decorator = hookRequest('DecoratorController', { ...controller, kind: 'DecoratorController' }, parent, children, finalizing);
    expect(compositeHookRequestSchema(finalizing).safeParse(composite).success).toBe(true);
    expect(decoratorHookRequestSchema(finalizing).safeParse(decorator).success).toBe(true);
    // A sync request is not a finalize request: the schemas tell them apart by `finalizing`.
    expect(compositeHookRequestSchema(!finalizing).safeParse(composite).success).toBe(false);
    expect(decoratorHookRequestSchema(finalizing).safeParse(composite).success).toBe(false);
  }
});

test('an answer the CompositeController and DecoratorController response schemas describe is one the pass takes', () => {
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web-1' } };
  expect(parseCompositeAnswer({ children: [pod], status: { ready: 1 }, resyncAfterSeconds: 30 }).children).toEqual([pod]);
  expect(parseCompositeAnswer({ children: [], finalized: true }).finalized).toBe(true);
  expect(parseDecoratorAnswer({ attachments: [pod], labels: { a: 'b', c: null } }).labels).toEqual({ a: 'b', c: null });
  const files = hookSchemaFiles();
  const answer = JSON.parse(files.get('composite-sync-response.schema.json')!) as { properties: Record<string, unknown> };
  expect(Object.keys(answer.properties).sort()).toEqual(['children', 'finalized', 'resyncAfterSeconds', 'status']);
  const decorator = JSON.parse(files.get('decorator-finalize-response.schema.json')!) as { properties: Record<string, unknown> };
  expect(Object.keys(decorator.properties).sort()).toEqual([
    'annotations',
    'attachments',
    'finalized',
    'labels',
    'resyncAfterSeconds',
    'status',
  ]);
});
