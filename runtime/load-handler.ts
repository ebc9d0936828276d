// A function's handler in this process, imported from its entry: the module esbuild bundles for the stack, loaded
// as its Lambda container would load it (the local runtime, the test bed's event sources).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from '../local/paths.ts';
import type { Handler } from './lambda-context.ts';

export async function loadHandler(fn: { entry: string }): Promise<Handler> {
  const module = (await import(pathToFileURL(join(projectRoot, fn.entry)).href)) as { handler?: unknown };
  if (typeof module.handler !== 'function') throw new Error(`${fn.entry} exports no function named handler`);
  return module.handler as Handler;
}
