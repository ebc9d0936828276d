// moto's server (Apache 2.0), an emulator of AWS's APIs, from PyPI, in a virtualenv under the cache, on a loopback
// port: what `cdk bootstrap`, `cdk deploy` and `cdk destroy` talk to when the documented deploy is rehearsed
// (docs/getting-started/deploy.md#rehearse-the-deploy-on-an-emulator). test/aws-emulator/moto_server.py starts it
// with the CloudFormation resource types the stack needs and moto lacks.
//   node local/aws-emulator.ts [port]   starts it (installing it on first use; port 5055 by default) until Ctrl-C
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from './paths.ts';
import { capture, freePort, startLocalServer, type LocalServer, type Log } from './process.ts';
import { pythonTool } from './python.ts';

const dir = join(projectRoot, 'test', 'aws-emulator');
const requirements = join(dir, 'requirements.txt');
const server = join(dir, 'moto_server.py');

/** The account moto answers for, whatever the credentials. */
export const EMULATOR_ACCOUNT = '123456789012';

/** Installs moto (once per requirements file and Python) and returns the virtualenv's python. */
export async function ensureAwsEmulator(log: Log = () => {}): Promise<string> {
  return join(await pythonTool('aws-emulator', requirements, log), 'python');
}

export type AwsEmulator = LocalServer;

/** Starts the emulator on 127.0.0.1 (`port`, or a free one), its whole output going to `logFile` if given. */
export async function startAwsEmulator(opts: { port?: number; log?: Log; logFile?: string } = {}): Promise<AwsEmulator> {
  const python = await ensureAwsEmulator(opts.log);
  const port = opts.port ?? (await freePort());
  // moto's own API (its state, as JSON) answers once the server serves.
  const answers = (endpoint: string) =>
    fetch(`${endpoint}/moto-api/data.json`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );
  return startLocalServer('moto', python, [server, '-H', '127.0.0.1', '-p', String(port)], port, answers, opts.logFile);
}

/** The resource types of a template that moto's own CloudFormation skips, each with the warning moto gives. */
export async function typesMotoSkips(template: string, log?: Log): Promise<Map<string, string>> {
  const python = await ensureAwsEmulator(log);
  const out = await capture(python, [server, '--unsupported', template], { name: 'moto_server.py --unsupported' });
  if (out.code !== 0) throw new Error(`moto_server.py --unsupported exited with ${out.code}:\n${out.stderr.slice(-4000)}`);
  return new Map(
    out.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('\t') as [string, string]),
  );
}

// No top-level await: jest's global setup loads this module with require(), which refuses one.
if (import.meta.main) {
  const port = Number(process.argv[2] ?? 5055);
  const logFile = join(tmpdir(), `outrigger-aws-emulator-${port}.log`);
  void startAwsEmulator({ port, logFile, log: (m) => process.stderr.write(`${m}\n`) }).then(
    (emulator) => {
      process.stdout.write(
        `moto serves AWS's APIs on ${emulator.endpoint} (account ${EMULATOR_ACCOUNT}), logging to ${logFile}; Ctrl-C stops it.\n` +
          'Point the CDK at it with:\n' +
          `export AWS_ENDPOINT_URL=http://localhost:${port} AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=eu-west-1\n`,
      );
      const stop = () => void emulator.stop().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    },
    (err: unknown) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    },
  );
}
