// `outrigger run`'s log format on its own (docs/operations/operating.md#reading-the-local-log): short lines by default, Lambda's JSON with
// --log-format json. Each run starts its own local kube-apiserver and DynamoDB Local, as `npm start` does.
import { spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../local/paths.ts';
import { eventually } from '../testbed/index.ts';

/** Runs `outrigger run` until its storage poll has logged, and returns its standard output then. */
async function runUntilPolled(args: string[]): Promise<string> {
  const env = { ...process.env };
  delete env.KUBECONFIG;
  const stateDir = await mkdtemp(join(tmpdir(), 'outrigger-log-'));
  const child = spawn(process.execPath, ['bin/outrigger.ts', 'run', '--state-dir', stateDir, ...args], {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    await eventually(() => stdout.includes('storage poll'), 150_000);
  } finally {
    child.kill('SIGINT');
  }
  expect(await exited).toBe(0);
  return stdout;
}

describe('outrigger run --log-format', () => {
  test('prints one short line per action by default, and JSON with --log-format json; refuses anything else', async () => {
    const lines = (await runUntilPolled([])).split('\n').filter((l) => l.includes('storage poll'));
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d storage-poll local apiserver storage poll: resources=\d+/);
    const json = (await runUntilPolled(['--log-format', 'json'])).split('\n').filter((l) => l.includes('storage poll'));
    expect(JSON.parse(json[0]!)).toMatchObject({ level: 'INFO', message: 'storage poll', function: 'storage-poll', cluster: 'local' });
    const refused = spawn(process.execPath, ['bin/outrigger.ts', 'run', '--log-format', 'xml'], {
      cwd: projectRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    refused.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    expect(await new Promise((resolve) => refused.on('exit', resolve))).not.toBe(0);
    expect(stderr).toContain('--log-format');
  }, 400_000);
});
