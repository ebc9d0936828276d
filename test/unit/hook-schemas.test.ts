// The MapController hook contract's JSON Schemas (docs/reference/hooks.md) are the code's: the committed files are
// what scripts/hook-schemas.ts makes from shared/map/api.ts, and the request schemas name the fields Outrigger sends.
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
