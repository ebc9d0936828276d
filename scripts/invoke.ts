// npm run invoke -- <function> [event-file]: runs one function's Lambda bundle, built as the stack builds it,
// in a process of its own, with an event from a file (events/<function>.json by default) and a Lambda-like
// context; no Docker. The result goes to stdout as JSON, logs to stderr; a thrown error prints Lambda's error
// shape and exits 1, a usage or setup problem exits 2 (docs/contributing/invoking-locally.md).
//
// invoke/args.ts reads the command line, invoke/event.ts the event, invoke/environment.ts makes the handler's
// environment (with invoke/capture.ts catching its sync requests), invoke/run.ts runs the bundle in its own
// process (invoke/child.ts), and invoke/output.ts says what happened.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { functions } from '../functions/index.ts';
import { bundleFunction, invokeDir } from './bundle.ts';
import { parseCommandLine, UsageError } from './invoke/args.ts';
import { environmentFor } from './invoke/environment.ts';
import { readEvent, stampNow } from './invoke/event.ts';
import { fileSize, forgetCaptured, log, reportCaptured, reportDeadLetters, reportReply, shown } from './invoke/output.ts';
import { runChild } from './invoke/run.ts';

async function main(argv: string[]): Promise<number> {
  const invocation = await parseCommandLine(argv, functions);
  if ('exit' in invocation) return invocation.exit;
  const { spec, eventPath } = invocation;

  let event = await readEvent(eventPath);
  if (invocation.now) event = stampNow(event);
  const syncTargets = functions.flatMap((f) => (f.sync ? [f.sync.target] : []));
  const dir = invokeDir(spec.name);
  const setup = await environmentFor(spec, syncTargets, { stateDir: resolve(invocation.stateDir), useRuntime: invocation.useRuntime, dir });

  try {
    await forgetCaptured(dir);
    const started = Date.now();
    const bundle = await bundleFunction(spec, dir);
    log(`bundled ${spec.entry} (${(bundle.bytes / 1024 / 1024).toFixed(2)} MB) in ${Date.now() - started} ms: ${shown(bundle.file)}`);
    const eventFile = join(dir, 'event.json');
    await writeFile(eventFile, `${JSON.stringify(event, null, 2)}\n`);
    if (setup.deadLetterFile) await mkdir(dirname(setup.deadLetterFile), { recursive: true });
    const deadLettersBefore = await fileSize(setup.deadLetterFile);

    log(`invoking ${spec.name} with ${eventPath === '-' ? 'stdin' : shown(eventPath)} (timeout ${spec.timeoutSeconds} s)`);
    const invoked = Date.now();
    const ran = await runChild(bundle.file, spec, eventFile, setup.env);
    log(`${spec.name} finished in ${Date.now() - invoked} ms`);

    await reportDeadLetters(setup.deadLetterFile, deadLettersBefore);
    if (setup.capture) await reportCaptured(setup.capture, dir, spec);
    return reportReply(spec.name, ran);
  } finally {
    await setup.capture?.stop();
  }
}

process.exitCode = await main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(
    `invoke: ${err instanceof UsageError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  return 2;
});
