// The function's process, as Lambda runs one: imports the bundle (Lambda's init), calls its handler once with the
// event and a Lambda-like context, sends the result or the error it threw (in Lambda's error shape) to invoke,
// and exits. It imports nothing of the project but the Lambda context, so that the function's code comes from
// its bundle only.
//   node scripts/invoke/child.ts <bundle> <function> <timeout seconds> <event file>   (spawned by ./run.ts)
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { invokeAsLambda, type Handler } from '../../runtime/lambda-context.ts';

/** Sent by the child: the handler's result, or the error it threw (in Lambda's error shape). */
export type ChildReply = { ok: true; result?: unknown } | { ok: false; phase: 'init' | 'invoke'; error: LambdaError };

interface LambdaError {
  errorType: string;
  errorMessage: string;
  trace: string[];
}

function lambdaError(err: unknown): LambdaError {
  if (err instanceof Error) return { errorType: err.name, errorMessage: err.message, trace: (err.stack ?? '').split('\n') };
  return { errorType: 'Error', errorMessage: String(err), trace: [] };
}

async function child(bundle: string, name: string, timeoutSeconds: number, eventFile: string): Promise<void> {
  const reply = (message: ChildReply, code: number) => {
    // Exits without waiting for the handler's sockets and timers: Lambda freezes the process at this point.
    process.send!(message, () => process.exit(code));
  };
  let handler: Handler;
  try {
    const module = (await import(pathToFileURL(bundle).href)) as { handler?: unknown };
    if (typeof module.handler !== 'function') throw new Error(`${bundle} exports no function named handler`);
    handler = module.handler as Handler;
  } catch (err) {
    reply({ ok: false, phase: 'init', error: lambdaError(err) }, 1);
    return;
  }
  const event: unknown = JSON.parse(await readFile(eventFile, 'utf8'));
  try {
    reply({ ok: true, result: await invokeAsLambda({ name, timeoutSeconds }, handler, event) }, 0);
  } catch (err) {
    reply({ ok: false, phase: 'invoke', error: lambdaError(err) }, 1);
  }
}

const [bundle, name, timeout, eventFile] = process.argv.slice(2) as [string, string, string, string];
await child(bundle, name, Number(timeout), eventFile);
