// AWS's DynamoDB Local, from Maven Central, in memory on a loopback port. It has no bind-address option and
// listens on every interface; Outrigger only ever talks to it through 127.0.0.1.
import { join } from 'node:path';
import { projectRoot } from './paths.ts';
import { freePort, mavenLibrary, startLocalServer, type LocalServer, type Log } from './process.ts';

const pom = join(projectRoot, 'test', 'dynamodb', 'pom.xml');
const mainClass = 'software.amazon.dynamodb.services.local.main.ServerRunner';

export async function ensureDynamoDBLocal(log: Log = () => {}): Promise<string> {
  return mavenLibrary('dynamodb', pom, log);
}

export type DynamoDBLocal = LocalServer;

export async function startDynamoDBLocal(opts: { port?: number; log?: Log } = {}): Promise<DynamoDBLocal> {
  const lib = await ensureDynamoDBLocal(opts.log);
  const port = opts.port ?? (await freePort());
  const args = [
    `-Djava.library.path=${lib}`,
    '-Xmx1g',
    '-cp',
    `${lib}/*`,
    mainClass,
    '-inMemory',
    '-sharedDb',
    '-disableTelemetry',
    '-port',
    String(port),
  ];
  return startLocalServer('DynamoDB Local', 'java', args, port, answers);
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
