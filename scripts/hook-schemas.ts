// npm run hook-schemas: writes the hook contracts as JSON Schema files, one per request and answer, into
// docs/reference/hooks/ (docs/reference/hooks.md), from the zod schemas the map function parses answers with
// (shared/map/api.ts, shared/composite/api.ts) and those of the requests it sends (shared/map/api.ts,
// shared/composite/request.ts). test/unit/hook-schemas.test.ts fails when the committed files differ from these.
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
import { compositeAnswer, decoratorAnswer } from '../shared/composite/api.ts';
import { compositeHookRequestSchema, decoratorHookRequestSchema } from '../shared/composite/request.ts';

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
  // CompositeController and DecoratorController hooks, version v1: a sync and a finalize answer are parsed alike.
  'composite-sync-request': {
    schema: compositeHookRequestSchema(false),
    title: 'CompositeController sync hook request (v1)',
    io: 'output',
  },
  'composite-sync-response': { schema: compositeAnswer.loose, title: 'CompositeController sync hook answer (v1)', io: 'input' },
  'composite-finalize-request': {
    schema: compositeHookRequestSchema(true),
    title: 'CompositeController finalize hook request (v1)',
    io: 'output',
  },
  'composite-finalize-response': { schema: compositeAnswer.loose, title: 'CompositeController finalize hook answer (v1)', io: 'input' },
  'decorator-sync-request': {
    schema: decoratorHookRequestSchema(false),
    title: 'DecoratorController sync hook request (v1)',
    io: 'output',
  },
  'decorator-sync-response': { schema: decoratorAnswer.loose, title: 'DecoratorController sync hook answer (v1)', io: 'input' },
  'decorator-finalize-request': {
    schema: decoratorHookRequestSchema(true),
    title: 'DecoratorController finalize hook request (v1)',
    io: 'output',
  },
  'decorator-finalize-response': { schema: decoratorAnswer.loose, title: 'DecoratorController finalize hook answer (v1)', io: 'input' },
} as const;

/** The names of a contract's shared shapes, in zod's order: the object shape (apiVersion, kind, metadata) first. */
function defsOf(contract: string): string[] {
  if (contract.startsWith('decorator-') && contract.endsWith('-response')) return ['stringMap', 'object'];
  if (contract.startsWith('composite-') || contract.startsWith('decorator-')) return ['object', 'childMap'];
  return ['object'];
}

/** Each file's name (`<hook>-<request|response>.schema.json`) and its text. */
export function hookSchemaFiles(): Map<string, string> {
  // A request is what Outrigger sends (the schema's output side); an answer is what it accepts (the input side).
  return new Map(
    Object.entries(contracts).map(([name, { schema, title, io }]) => {
      // A shape used more than once (the objects of a request) is written once, under $defs.
      const { $schema, ...rest } = z.toJSONSchema(schema, { io, reused: 'ref' });
      // zod names those definitions __schema0, __schema1, ... in the order it meets them; each is given its name.
      let text = JSON.stringify({ $schema, title, ...rest }, null, 2);
      defsOf(name).forEach(
        (def, i) => (text = text.replaceAll(`"#/$defs/__schema${i}"`, `"#/$defs/${def}"`).replaceAll(`"__schema${i}":`, `"${def}":`)),
      );
      if (text.includes('__schema')) throw new Error(`${name}: a $defs entry has no name in scripts/hook-schemas.ts`);
      return [`${name}.schema.json`, `${text}\n`];
    }),
  );
}

if (import.meta.main) {
  await mkdir(HOOK_SCHEMA_DIR, { recursive: true });
  for (const [file, text] of hookSchemaFiles()) await writeFile(join(HOOK_SCHEMA_DIR, file), text);
}
