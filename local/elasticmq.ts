// ElasticMQ, an open-source SQS-compatible server (Apache 2.0), from Maven Central, in memory on a loopback
// port: the queues the forwarder and the ingest function send to, in the tests. It speaks the
// SQS JSON protocol the AWS SDK uses, with FIFO queues, message groups and deduplication.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SQSClient } from '@aws-sdk/client-sqs';
import { projectRoot } from './paths.ts';
import { freePort, mavenLibrary, stopProcess, type Log } from './process.ts';

const pom = join(projectRoot, 'test', 'elasticmq', 'pom.xml');

export async function ensureElasticMQ(log: Log = () => {}): Promise<string> {
  return mavenLibrary('elasticmq', pom, log);
}

export interface ElasticMQ {
  endpoint: string;
  pid: number;
  stop(): Promise<void>;
}

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
  const child = spawn('java', ['-Xmx512m', `-Dconfig.file=${conf}`, '-cp', `${lib}/*`, 'org.elasticmq.server.Main'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`ElasticMQ exited with ${child.exitCode}:\n${stderr}`);
    const ok = await fetch(`${endpoint}/?Action=ListQueues`, { signal: AbortSignal.timeout(1000) }).then((r) => r.status === 200, () => false);
    if (ok) break;
    if (Date.now() > deadline) {
      await stopProcess(child);
      throw new Error(`ElasticMQ did not answer on ${endpoint} within 60 s:\n${stderr}`);
    }
    await sleep(200);
  }
  return { endpoint, pid: child.pid ?? 0, stop: () => stopProcess(child) };
}

/** An SQS client for a local endpoint (placeholder credentials: it checks no signature). */
export function localSqsClient(endpoint: string): SQSClient {
  return new SQSClient({ endpoint, region: 'elasticmq', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
}
