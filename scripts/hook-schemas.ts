// npm run hook-schemas: writes the MapController hook contract as JSON Schema files, one per request and answer, into
// docs/reference/hooks/ (docs/reference/hooks.md), from the zod schemas the map function parses answers with
// (shared/map/api.ts). test/unit/hook-schemas.test.ts fails when the committed files differ from these.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { projectRoot } from '../local/paths.ts';
import {
  finalizeHookRequestSchema,
  finalizeResponseSchema,
  hookResponseSchema,
  mapHookRequestSchema,
  tombstoneHookRequestSchema,
} from '../shared/map/api.ts';

export const HOOK_SCHEMA_DIR = join(projectRoot, 'docs/reference/hooks');

const contracts = {
  'map-request': { schema: mapHookRequestSchema, title: 'MapController map hook request', io: 'output' },
  'map-response': { schema: hookResponseSchema, title: 'MapController map hook answer', io: 'input' },
  'tombstone-request': { schema: tombstoneHookRequestSchema, title: 'MapController tombstone hook request', io: 'output' },
  'tombstone-response': {
    schema: hookResponseSchema,
    title: 'MapController tombstone hook answer: the detached outputs to keep',
    io: 'input',
  },
  'finalize-request': { schema: finalizeHookRequestSchema, title: 'MapController finalize hook request', io: 'output' },
  'finalize-response': { schema: finalizeResponseSchema, title: 'MapController finalize hook answer', io: 'input' },
} as const;

/** Each file's name (`<hook>-<request|response>.schema.json`) and its text. */
export function hookSchemaFiles(): Map<string, string> {
  // A request is what Outrigger sends (the schema's output side); an answer is what it accepts (the input side).
  return new Map(
    Object.entries(contracts).map(([name, { schema, title, io }]) => {
      // An object shape used more than once (the objects of a request) is written once, under $defs.
      const { $schema, ...rest } = z.toJSONSchema(schema, { io, reused: 'ref' });
      // zod names that definition __schema0; it is the one object shape (apiVersion, kind, metadata) of a request.
      const text = JSON.stringify({ $schema, title, ...rest }, null, 2).replaceAll('__schema0', 'object');
      return [`${name}.schema.json`, `${text}\n`];
    }),
  );
}

if (import.meta.main) {
  await mkdir(HOOK_SCHEMA_DIR, { recursive: true });
  for (const [file, text] of hookSchemaFiles()) await writeFile(join(HOOK_SCHEMA_DIR, file), text);
}
