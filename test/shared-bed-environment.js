// The integration files' jest environment: Node's, holding the shared test bed for the whole file (its hooks
// included). Files run in several workers at once and share the bed (each works in namespaces, queues and kinds
// of its own); a file named in testEnvironmentOptions.alone (jest.config.js says why for each) has the bed to
// itself: it waits for the files running to end, and no other starts until it ends
// (docs/contributing/test-beds.md#files-in-parallel). A readers-writer lock in files beside the bed's description,
// which every worker reaches: a reader is a file named for its process, the writer a directory.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { relative, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestEnvironment } from 'jest-environment-node';

const POLL_MS = 100;

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Lock files of a kind (`reader`, `waiting`) whose worker still runs: a worker that died left its files behind. */
function held(dir, kind) {
  return readdirSync(dir).filter((f) => f.startsWith(`${kind}-`) && alive(Number(f.split('-')[1])));
}

/** Whether a file has the bed to itself: the writer directory, unless the worker that made it died. */
function writerHeld(writer) {
  let pid;
  try {
    pid = Number(readFileSync(join(writer, 'pid'), 'utf8'));
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
    return existsSync(writer); // made, its pid not written yet
  }
  return !pid || alive(pid);
}

/** A file that has the bed to itself holds it, or waits for it: a file that would share it waits. */
function aloneAhead(dir) {
  return writerHeld(join(dir, 'writer')) || held(dir, 'waiting').length > 0;
}

async function holdShared(dir, name) {
  const mine = join(dir, `reader-${process.pid}-${name}`);
  for (;;) {
    if (!aloneAhead(dir)) {
      writeFileSync(mine, '');
      // A file to be alone may have come between the check and the write: it waits on this one, so give way.
      if (!aloneAhead(dir)) return () => rmSync(mine, { force: true });
      rmSync(mine, { force: true });
    }
    await sleep(POLL_MS);
  }
}

async function holdAlone(dir, name) {
  const writer = join(dir, 'writer');
  // Said first, so that no file starts sharing the bed while this one waits for another to be alone.
  const waiting = join(dir, `waiting-${process.pid}-${name}`);
  writeFileSync(waiting, '');
  for (;;) {
    try {
      mkdirSync(writer);
      writeFileSync(join(writer, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      if (!writerHeld(writer)) rmSync(writer, { recursive: true, force: true });
      else await sleep(POLL_MS);
    }
  }
  rmSync(waiting, { force: true });
  while (held(dir, 'reader').length > 0) await sleep(POLL_MS);
  return () => rmSync(writer, { recursive: true, force: true });
}

export default class SharedBedEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    const { rootDir, testEnvironmentOptions } = config.projectConfig;
    this.file = relative(rootDir, context.testPath);
    this.alone = (testEnvironmentOptions.alone ?? []).includes(this.file);
    // A file that uses no part of the bed (cpuBound) holds no lock: it runs while another file has the bed alone.
    this.bedless = (testEnvironmentOptions.cpuBound ?? []).includes(this.file);
    this.release = () => {};
  }

  async setup() {
    await super.setup();
    const bed = process.env.OUTRIGGER_TESTBED;
    if (!bed || this.bedless) return; // no bed (the global setup failed: the file's own first call says so), or none used
    const dir = `${bed}.locks`;
    mkdirSync(dir, { recursive: true });
    const name = this.file.replaceAll('/', '_');
    this.release = this.alone ? await holdAlone(dir, name) : await holdShared(dir, name);
  }

  async teardown() {
    this.release();
    await super.teardown();
  }
}
