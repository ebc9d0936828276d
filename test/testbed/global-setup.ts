// Jest global setup for integration tests: a real kube-apiserver (with etcd) and DynamoDB Local on
// loopback, started once for the run. Workers find them through OUTRIGGER_TESTBED (a JSON file).
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureAwsEmulator } from '../../local/aws-emulator.ts';
import { ensureCfnLint } from '../../local/cfn-lint.ts';
import { startContainerEngine, type ContainerEngine } from '../../local/container-engine.ts';
import { ensureTestClusterBinary } from '../../local/apiserver.ts';
import { ensureDynamoDBLocal } from '../../local/dynamodb.ts';
import { ensureElasticMQ } from '../../local/elasticmq.ts';
import { ensureSam } from '../../local/sam.ts';
import { startTestbed } from '../../local/testbed.ts';
import type { TestbedInfo } from './index.ts';
import { startBuildsAhead } from './builds-ahead.ts';

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const log = (m: string) => process.stderr.write(`[testbed] ${m}\n`);
  // The Python tools two unit tests and the deploy rehearsal run (cfn-lint, SAM CLI, moto), installed from here on
  // and not waited for: those tests ask for them again, and buildOnce's lock makes them wait for this install (a
  // failed one, they retry and report). Their first install (a minute or two, mostly downloads) overlaps the Go
  // builds and the first tests.
  Promise.all([ensureCfnLint(log), ensureSam(log), ensureAwsEmulator(log)]).catch((err: unknown) =>
    log(`installing the Python tools failed; the tests that run them will try again: ${String(err)}`),
  );
  // The test bed's own binary and DynamoDB Local's and ElasticMQ's downloads from Maven Central, all at once, before
  // any test runs, so that a first build (minutes of both cores) never slows the tests that measure time. The Go
  // programs only a few files need (Helm, crane, kwok, LWS's manager) build meanwhile at a low priority, and go on
  // while the other files run; jest.config.js runs the files that need them last
  // (docs/contributing/test-beds.md#cost).
  startBuildsAhead(log);
  // The container engine (installed with apt on a machine without one: about 30 s) starts beside the builds. A
  // machine where it cannot run (no root) still runs the files that do not need it.
  const engineStart: Promise<ContainerEngine | Error> = startContainerEngine({ log }).catch((err: unknown) =>
    err instanceof Error ? err : new Error(String(err)),
  );
  const [engine] = await Promise.all([engineStart, ensureTestClusterBinary(log), ensureDynamoDBLocal(log), ensureElasticMQ(log)]);
  if (engine instanceof Error) log(`no container engine: ${engine.message}`);
  else (globalThis as { __outriggerEngine?: ContainerEngine }).__outriggerEngine = engine;
  const bed = await startTestbed({ withCluster: true, withQueues: true, log });
  const cluster = bed.cluster!;
  const info: TestbedInfo = {
    server: cluster.server,
    kubeconfigs: cluster.kubeconfigs,
    tokens: cluster.tokens,
    caFile: cluster.caFile,
    etcdUrl: cluster.etcdUrl,
    dynamodbEndpoint: bed.dynamodb.endpoint,
    sqsEndpoint: bed.sqs!.endpoint,
    tableName: bed.tableName,
    containerEngine: engine instanceof Error ? { error: engine.message } : { host: engine.host },
  };
  const file = join(tmpdir(), `outrigger-testbed-${process.pid}.json`);
  await writeFile(file, JSON.stringify(info));
  process.env.OUTRIGGER_TESTBED = file;
  (globalThis as { __outriggerTestbed?: typeof bed }).__outriggerTestbed = bed;
  process.stderr.write(
    `[testbed] kube-apiserver ${cluster.server} DynamoDB Local ${bed.dynamodb.endpoint} and ElasticMQ ${bed.sqs!.endpoint} ready in ${Date.now() - started} ms\n`,
  );
}
