// `npm run invoke` against the test bed: the script bundles a function, imports the bundle in a process of its
// own and calls it with a sample event, and what it prints is the handler's answer. The functions act as the
// `outrigger` identity on the test bed's apiserver and keep state in its DynamoDB Local.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SQSEvent } from 'aws-lambda';
import { projectRoot } from '../../local/paths.ts';
import { capture } from '../../local/process.ts';
import { invokeDir } from '../../scripts/bundle.ts';
import type { DeadLetter } from '../../shared/lambda/dead-letter.ts';
import { parseSyncRequest } from '../../shared/lambda/sync-request.ts';
import { testbed, uniqueName } from '../testbed/index.ts';

interface Invoked {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the script as a user would (Node 24, from the project root), with only the environment given. */
async function invoke(args: string[], env: Record<string, string>): Promise<Invoked> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OUTRIGGER_') && !k.startsWith('AWS_')));
  const { code, stdout, stderr } = await capture(join(projectRoot, 'node_modules/node/bin/node'), ['scripts/invoke.ts', ...args], {
    cwd: projectRoot,
    env: { ...base, ...env },
  });
  return { status: code, stdout, stderr };
}

function json(out: Invoked): unknown {
  if (out.status !== 0) throw new Error(`invoke exited with ${out.status}:\n${out.stderr}`);
  return JSON.parse(out.stdout);
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'outrigger-invoke-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The environment the stack would give, pointed at the test bed. */
function bedEnv(clusterId: string, extra: Record<string, string> = {}): Record<string, string> {
  const bed = testbed();
  return {
    OUTRIGGER_CLUSTERS: JSON.stringify([{ id: clusterId, access: { kind: 'kubeconfig', path: bed.kubeconfigs.outrigger } }]),
    OUTRIGGER_TABLE: bed.tableName,
    OUTRIGGER_DYNAMODB_ENDPOINT: bed.dynamodbEndpoint,
    ...extra,
  };
}

describe('npm run invoke', () => {
  test('runs the heartbeat bundle and prints its result', async () => {
    const out = await invoke(['heartbeat', 'events/heartbeat.json', '--no-runtime'], bedEnv(uniqueName('invoke')));
    expect(json(out)).toEqual({ clusters: 1, unreachable: 0 });
    expect(out.stderr).toContain('.cache/invoke/heartbeat/index.js');
  }, 120_000);

  test("runs a bundle that reads the cluster configuration from a file, as the deployed functions read their layer's", async () => {
    const { OUTRIGGER_CLUSTERS: clusters, ...env } = bedEnv(uniqueName('invoke'));
    const file = join(dir, 'clusters.json');
    await writeFile(file, clusters!);
    const out = await invoke(['heartbeat', 'events/heartbeat.json', '--no-runtime'], { ...env, OUTRIGGER_CLUSTERS_FILE: file });
    expect(json(out)).toEqual({ clusters: 1, unreachable: 0 });
  }, 120_000);

  test("takes the environment from a running local runtime's runtime.json, acting as its outrigger identity", async () => {
    const bed = testbed();
    const stateDir = await mkdtemp(join(dir, 'state-'));
    // This test's process stands in for the runtime: runtime.json names a live pid.
    await writeFile(
      join(stateDir, 'runtime.json'),
      JSON.stringify({ kubeconfig: bed.kubeconfigs.admin, server: bed.server, dynamodb: bed.dynamodbEndpoint, pid: process.pid }),
    );
    const out = await invoke(['heartbeat', '--state-dir', stateDir], {});
    expect(json(out)).toEqual({ clusters: 1, unreachable: 0 });
    expect(out.stderr).toContain('supplies OUTRIGGER_CLUSTERS, OUTRIGGER_TABLE, OUTRIGGER_DYNAMODB_ENDPOINT');
    expect(out.stderr).toContain(`local (kubeconfig ${bed.kubeconfigs.outrigger})`);
  }, 120_000);

  test('routes events/router.json: the malformed record is dead-lettered, nothing fails, sync requests are printed and saved instead of sent', async () => {
    const deadLetters = join(dir, 'router-dead-letter.jsonl');
    // A profile in the user's environment does not matter to an all-local run: the bundle reads credentials from
    // its environment only (as in Lambda), and invoke puts placeholders there.
    const out = await invoke(
      ['router', 'events/router.json', '--no-runtime'],
      bedEnv('local', { OUTRIGGER_DEAD_LETTER_FILE: deadLetters, AWS_PROFILE: 'outrigger-no-such-profile' }),
    );
    expect(json(out)).toEqual({ batchItemFailures: [] });

    const sample = JSON.parse(await readFile(join(projectRoot, 'events/router.json'), 'utf8')) as SQSEvent;
    const malformed = sample.Records.find((r) => r.body.includes('dev.outrigger.watch.bookmark'))!;
    const letters = (await readFile(deadLetters, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as DeadLetter);
    expect(letters).toEqual([
      expect.objectContaining({ body: malformed.body, source: 'router', reason: expect.stringContaining('invalid event envelope: type:') }),
    ]);
    // The router's own log line, and the script's summary.
    expect(out.stderr).toContain(`"messageId":"${malformed.messageId}"`);
    expect(out.stderr).toContain('1 message(s) dead-lettered');

    // The RevisionPolicy's and the StorageVersionMigration's own events sync them (other tests' policies may add more).
    const sent = async (target: string) =>
      (JSON.parse(await readFile(join(invokeDir('router'), `sent-${target}.json`), 'utf8')) as SQSEvent).Records.map(
        (r) => parseSyncRequest(r.body).key,
      );
    expect(await sent('history')).toEqual(
      expect.arrayContaining([expect.objectContaining({ cluster: 'local', kind: 'RevisionPolicy', name: 'deployments' })]),
    );
    expect(await sent('storage')).toEqual([
      expect.objectContaining({ cluster: 'local', kind: 'StorageVersionMigration', name: 'deployments.apps-7xk2p' }),
    ]);
    expect(out.stderr).toContain('would send 1 sync request(s) to storage');
  }, 120_000);

  test("prints Lambda's error shape and exits 1 when the handler throws", async () => {
    const out = await invoke(
      ['heartbeat', '--no-runtime'],
      bedEnv(uniqueName('invoke'), { OUTRIGGER_DYNAMODB_ENDPOINT: 'http://127.0.0.1:1' }),
    );
    expect(out.status).toBe(1);
    expect(JSON.parse(out.stdout)).toEqual({
      errorType: expect.any(String),
      errorMessage: expect.stringContaining('ECONNREFUSED'),
      trace: expect.any(Array),
    });
  }, 120_000);
});
