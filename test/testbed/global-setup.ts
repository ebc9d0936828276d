// Jest global setup for integration tests: a real kube-apiserver (with etcd) and DynamoDB Local on
// loopback, started once for the run. Workers find them through OUTRIGGER_TESTBED (a JSON file).
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureCfnLint } from '../../local/cfn-lint.ts';
import { ensureTestClusterBinary } from '../../local/apiserver.ts';
import { ensureDynamoDBLocal } from '../../local/dynamodb.ts';
import { ensureElasticMQ } from '../../local/elasticmq.ts';
import { ensureHelmBinary } from '../../local/helm.ts';
import { ensureKwok } from '../../local/kwok.ts';
import { ensureCrane } from '../../local/registry.ts';
import { ensureSam } from '../../local/sam.ts';
import { startTestbed } from '../../local/testbed.ts';
import type { TestbedInfo } from './index.ts';
import { ensureLwsManager } from './lws.ts';

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const log = (m: string) => process.stderr.write(`[testbed] ${m}\n`);
  // The Python tools two unit tests run (cfn-lint, SAM CLI), installed meanwhile: jest starts no test before this
  // setup ends, and their first install (a minute or two, mostly downloads) then overlaps the Go builds.
  const pythonTools = Promise.all([ensureCfnLint(log), ensureSam(log)]);
  pythonTools.catch(() => {}); // awaited below; this only keeps an early failure from being reported as unhandled
  // Every Go program the tests run, built here, before any test runs, so that a first build (minutes of both cores)
  // never slows the tests that measure time; all at once, so that one's downloads and link overlap another's
  // compiling (docs/contributing/test-beds.md#cost): the test bed's binary, Helm for the forwarder chart's tests,
  // crane for the forwarder image's, kwok and LWS's manager for the beds with nodes (test/integration/nodes.test.ts);
  // and DynamoDB Local's and ElasticMQ's downloads from Maven Central, which the bed would otherwise start after them.
  await Promise.all([
    ensureTestClusterBinary(log),
    ensureHelmBinary(log),
    ensureCrane(log),
    ensureKwok(log),
    ensureLwsManager(log),
    ensureDynamoDBLocal(log),
    ensureElasticMQ(log),
  ]);
  const bed = await startTestbed({ withCluster: true, withQueues: true, log });
  await pythonTools;
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
  };
  const file = join(tmpdir(), `outrigger-testbed-${process.pid}.json`);
  await writeFile(file, JSON.stringify(info));
  process.env.OUTRIGGER_TESTBED = file;
  (globalThis as { __outriggerTestbed?: typeof bed }).__outriggerTestbed = bed;
  process.stderr.write(
    `[testbed] kube-apiserver ${cluster.server} DynamoDB Local ${bed.dynamodb.endpoint} and ElasticMQ ${bed.sqs!.endpoint} ready in ${Date.now() - started} ms\n`,
  );
}
