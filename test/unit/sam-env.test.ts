// `sam local invoke --env-vars` overrides only what the template declares: every variable the functions' code
// reads is declared in every function, and `npm run sam-env` writes the file for the running local runtime.
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { functions } from '../../functions/index.ts';
import { pascal } from '../../infra/names.ts';
import { FUNCTION_ENVIRONMENT } from '../../infra/functions.ts';
import { OutriggerStack } from '../../infra/stack.ts';
import { projectRoot } from '../../local/paths.ts';
import { CONTAINER_DEAD_LETTER_FILE, INGEST_FUNCTION_ID } from '../../scripts/sam-env.ts';
import { INGEST_DEAD_LETTER_QUEUE } from '../../shared/lambda/queues.ts';
import { eksCluster } from './clusters.ts';

/**
 * Every `OUTRIGGER_*` name in the code the bundles are built from (functions/ and shared/), and the
 * `POWERTOOLS_*` and `AWS_ENDPOINT_URL_*` ones it names for the libraries it configures that way (the logger's
 * level, the Secrets Manager client's endpoint).
 */
function variablesRead(): string[] {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts'))
        for (const m of readFileSync(path, 'utf8').matchAll(/(?:OUTRIGGER|POWERTOOLS)_[A-Z_]+|AWS_ENDPOINT_URL_[A-Z_]+/g)) names.add(m[0]);
    }
  };
  walk(join(projectRoot, 'functions'));
  walk(join(projectRoot, 'shared'));
  return [...names].sort();
}

test('every variable the functions read is declared in every function of the template', () => {
  expect(variablesRead()).toEqual([...FUNCTION_ENVIRONMENT].sort());
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const template = Template.fromStack(new OutriggerStack(app, 'Sam', { clusters: [eksCluster('prod')] }));
  const fns = Object.values(template.findResources('AWS::Lambda::Function'));
  for (const fn of fns)
    expect(Object.keys(fn.Properties.Environment.Variables as object)).toEqual(expect.arrayContaining([...FUNCTION_ENVIRONMENT]));
});

test("npm run sam-env writes the local runtime's state for every function, and refuses without a runtime", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-sam-env-'));
  const run = (...args: string[]) =>
    promisify(execFile)(process.execPath, [join(projectRoot, 'scripts/sam-env.ts'), '--state-dir', dir, ...args], { cwd: dir });
  await expect(run()).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('no local runtime is running') });
  // A runtime.json as runtime/local.ts writes it, of a live process (this one).
  writeFileSync(
    join(dir, 'runtime.json'),
    JSON.stringify({
      kubeconfig: '/tmp/k/admin.kubeconfig',
      server: 'https://127.0.0.1:6443',
      dynamodb: 'http://127.0.0.1:8123',
      pid: process.pid,
    }),
  );
  const outputs = join(dir, 'cdk-outputs.json');
  writeFileSync(outputs, JSON.stringify({ Outrigger: { QueueUrlPrefix: 'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-' } }));
  await run('--host', 'host.docker.internal', '--out', join(dir, 'env.json'), '--outputs', outputs);
  const env = JSON.parse(readFileSync(join(dir, 'env.json'), 'utf8')) as {
    Parameters: Record<string, string>;
    Ingest: Record<string, string>;
  };
  expect(env).toEqual({
    Parameters: {
      // The deployed stack's queues: the template's own value would be SAM's placeholders (https://sqs.<region>.localhost/123456789012/...).
      OUTRIGGER_QUEUE_URL_PREFIX: 'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-',
      OUTRIGGER_TABLE: 'outrigger',
      OUTRIGGER_DYNAMODB_ENDPOINT: 'http://host.docker.internal:8123',
      OUTRIGGER_DEAD_LETTER_FILE: CONTAINER_DEAD_LETTER_FILE,
      OUTRIGGER_DEAD_LETTER_QUEUE_URL: '',
      OUTRIGGER_HOOK_SECRET_ARN: '',
    },
    // The ingest function puts what it refuses on its dead-letter queue only: the deployed stack's, named from the prefix.
    Ingest: { OUTRIGGER_DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-ingest-dlq.fifo' },
  });
  for (const name of Object.keys(env.Parameters)) expect(FUNCTION_ENVIRONMENT).toContain(name);
  // Outputs of a stack deployed before QueueUrlPrefix was one: refused, naming the flag that stands in.
  writeFileSync(outputs, JSON.stringify({ Outrigger: { AlarmTopicArn: 'arn:aws:sns:eu-west-1:111122223333:a' } }));
  await expect(run('--outputs', outputs)).rejects.toMatchObject({
    code: 2,
    stderr: expect.stringContaining('has no QueueUrlPrefix output'),
  });
  // Two deployed stacks' outputs in one file: which prefix is meant cannot be told, and it says so.
  writeFileSync(
    outputs,
    JSON.stringify({
      Outrigger: { QueueUrlPrefix: 'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-' },
      Staging: { QueueUrlPrefix: 'https://sqs.eu-west-1.amazonaws.com/111122223333/Staging-' },
    }),
  );
  await expect(run('--outputs', outputs)).rejects.toMatchObject({
    code: 2,
    stderr: expect.stringContaining('several outputs match QueueUrlPrefix'),
  });
  // An empty flag is no flag: the outputs still answer.
  writeFileSync(outputs, JSON.stringify({ Outrigger: { QueueUrlPrefix: 'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-' } }));
  await run('--queue-url-prefix', '', '--outputs', outputs, '--out', join(dir, 'env.json'));
  expect(JSON.parse(readFileSync(join(dir, 'env.json'), 'utf8')).Parameters.OUTRIGGER_QUEUE_URL_PREFIX).toBe(
    'https://sqs.eu-west-1.amazonaws.com/111122223333/Outrigger-',
  );
  await run('--queue-url-prefix', 'https://sqs.eu-west-1.amazonaws.com/111122223333/Other-', '--out', join(dir, 'env.json'));
  expect(JSON.parse(readFileSync(join(dir, 'env.json'), 'utf8')).Parameters.OUTRIGGER_QUEUE_URL_PREFIX).toBe(
    'https://sqs.eu-west-1.amazonaws.com/111122223333/Other-',
  );
});

test('names every function for `sam local invoke <construct id>` (SamResourceId), and outputs the queue prefix sam-env reads', () => {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const template = Template.fromStack(new OutriggerStack(app, 'Sam', { clusters: [eksCluster('prod')] }));
  const ids = Object.values(template.findResources('AWS::Lambda::Function')).map((fn) => fn.Metadata.SamResourceId as string);
  expect(ids.sort()).toEqual(functions.map((f) => pascal(f.name)).sort());
  // npm run sam-env's section for the ingest function: its construct id, and its dead-letter queue's name after the prefix.
  expect(INGEST_FUNCTION_ID).toBe(pascal(functions.find((f) => f.functionUrl)!.name));
  template.hasResourceProperties('AWS::SQS::Queue', { QueueName: `Sam-${INGEST_DEAD_LETTER_QUEUE}` });
  expect(template.findOutputs('QueueUrlPrefix').QueueUrlPrefix!.Value).toEqual({
    'Fn::Join': ['', ['https://sqs.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }, '/', { Ref: 'AWS::AccountId' }, '/Sam-']],
  });
});
