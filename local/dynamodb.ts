// AWS's DynamoDB Local, from Maven Central, in memory on a loopback port. It has no bind-address option and
// listens on every interface; Outrigger only ever talks to it through 127.0.0.1.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { projectRoot } from './paths.ts';
import { freePort, mavenLibrary, stopProcess, type Log } from './process.ts';

const pom = join(projectRoot, 'test', 'dynamodb', 'pom.xml');
const mainClass = 'software.amazon.dynamodb.services.local.main.ServerRunner';

export async function ensureDynamoDBLocal(log: Log = () => {}): Promise<string> {
  return mavenLibrary('dynamodb', pom, log);
}

export interface DynamoDBLocal {
  endpoint: string;
  pid: number;
  stop(): Promise<void>;
}

export async function startDynamoDBLocal(opts: { port?: number; log?: Log } = {}): Promise<DynamoDBLocal> {
  const lib = await ensureDynamoDBLocal(opts.log);
  const port = opts.port ?? (await freePort());
  const child = spawn(
    'java',
    [`-Djava.library.path=${lib}`, '-Xmx1g', '-cp', `${lib}/*`, mainClass, '-inMemory', '-sharedDb', '-disableTelemetry', '-port', String(port)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`DynamoDB Local exited with ${child.exitCode}:\n${stderr}`);
    if (await answers(endpoint)) break;
    if (Date.now() > deadline) {
      await stopProcess(child);
      throw new Error(`DynamoDB Local did not answer on ${endpoint} within 60 s:\n${stderr}`);
    }
    await sleep(200);
  }
  return { endpoint, pid: child.pid ?? 0, stop: () => stopProcess(child) };
}

async function answers(endpoint: string): Promise<boolean> {
  try {
    const res = await fetch(endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': 'DynamoDB_20120810.ListTables',
        authorization: 'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
      },
      body: '{}',
      signal: AbortSignal.timeout(1000),
    });
    return res.status === 200;
  } catch {
    return false;
  }
}
