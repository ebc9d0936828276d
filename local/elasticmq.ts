// ElasticMQ, an open-source SQS-compatible server (Apache 2.0), from Maven Central, in memory on a loopback
// port: the queues the forwarder and the ingest function send to, in the tests. It speaks the
// SQS JSON protocol the AWS SDK uses, with FIFO queues, message groups and deduplication.
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQSClient } from '@aws-sdk/client-sqs';
import { projectRoot } from './paths.ts';
import { freePort, mavenLibrary, startLocalServer, type LocalServer, type Log } from './process.ts';

const pom = join(projectRoot, 'test', 'elasticmq', 'pom.xml');

export async function ensureElasticMQ(log: Log = () => {}): Promise<string> {
  return mavenLibrary('elasticmq', pom, log);
}

export type ElasticMQ = LocalServer;

export async function startElasticMQ(opts: { log?: Log } = {}): Promise<ElasticMQ> {
  const lib = await ensureElasticMQ(opts.log);
  const port = await freePort();
  const conf = join(tmpdir(), `outrigger-elasticmq-${port}.conf`);
  await writeFile(
    conf,
    [
      'include classpath("application.conf")',
      `node-address { protocol = http, host = 127.0.0.1, port = ${port}, context-path = "" }`,
      `rest-sqs { enabled = true, bind-port = ${port}, bind-hostname = "127.0.0.1", sqs-limits = strict }`,
      'rest-stats { enabled = false }',
    ].join('\n'),
  );
  const answers = (endpoint: string) =>
    fetch(`${endpoint}/?Action=ListQueues`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.status === 200,
      () => false,
    );
  return startLocalServer(
    'ElasticMQ',
    'java',
    ['-Xmx512m', `-Dconfig.file=${conf}`, '-cp', `${lib}/*`, 'org.elasticmq.server.Main'],
    port,
    answers,
  );
}

/** An SQS client for a local endpoint (placeholder credentials: it checks no signature). */
export function localSqsClient(endpoint: string): SQSClient {
  return new SQSClient({ endpoint, region: 'elasticmq', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
}
