// The synthesized CloudFormation template, checked with CDK's assertions (bundling skipped: the bundle
// itself is measured by bench/bundle).
/* eslint-disable max-lines -- the stack's tests share the synth, grants, byName and mappings helpers below and one synthesized template */
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { functions } from '../../functions/index.ts';
import { sendTargets } from '../../functions/spec.ts';
import { outriggerApp } from '../../infra/app.ts';
import { projectRoot } from '../../local/paths.ts';
import { capture } from '../../local/process.ts';
import { CLUSTERS_FILE_IN_LAYER, OutriggerStack, TARGETS_PER_RULE, type OutriggerStackProps } from '../../infra/stack.ts';
import { DEFAULT_MAX_CONCURRENCY, clustersFromEnv, type ClusterConfig } from '../../shared/clusters.ts';
import { CA_DATA, eksCluster, onpremCluster } from './clusters.ts';

const cluster: ClusterConfig = eksCluster('prod');
/** A second EKS cluster with a concurrency of its own. */
const dr: ClusterConfig = { ...eksCluster('dr-eu', { clusterName: 'prod-dr' }), maxConcurrency: 20 };

const targets = functions.flatMap((f) => (f.sync ? [f.sync.target] : []));

interface Statement {
  Effect: string;
  Action: string | string[];
  Resource?: unknown;
  Principal?: unknown;
  Condition?: unknown;
}

/** A logical id without CDK's hash suffix: the construct's name. */
const stripHash = (id: string) => id.replace(/[0-9A-F]{8}$/, '');
/** `FooBar` for `foo-bar`, as the stack names constructs. */
const fnName = (name: string) => name.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase());
/** A cluster's queue's construct name: `ProdEvents`, `ProdSyncHistory`. */
const queueId = (clusterId: string, queue: string) => `${fnName(clusterId)}${queue === 'events' ? 'Events' : `Sync${fnName(queue)}`}`;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- template JSON, as findResources types it
type Resource = Record<string, any>;

/** Resources by construct name, each with its logical id. */
function byName(resources: Record<string, Resource>): Record<string, { id: string; Properties: Resource }> {
  return Object.fromEntries(Object.entries(resources).map(([id, r]) => [stripHash(id), { id, Properties: r.Properties as Resource }]));
}

function refName(value: unknown): string {
  return stripHash((value as { Ref: string }).Ref);
}

/** Every (action, resource) each role may do, as `action Resource` lines, per role (named by its function). */
function grants(t: Template): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [id, p] of Object.entries(t.findResources('AWS::IAM::Policy'))) {
    const who = stripHash(id).replace(/(ServiceRole)?DefaultPolicy$/, '');
    for (const st of p.Properties.PolicyDocument.Statement as Statement[]) {
      for (const action of [st.Action].flat()) {
        for (const r of [st.Resource].flat()) {
          const name =
            typeof r === 'object' && r && 'Fn::GetAtt' in r
              ? stripHash((r as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0])
              : JSON.stringify(r);
          (out[who] ??= []).push(`${action} ${name}`);
        }
      }
    }
  }
  return sorted(out);
}

function sorted(grants: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(grants).map(([k, v]) => [k, [...v].sort()]));
}

function synth(clusters: ClusterConfig[] = [cluster], extra: Partial<OutriggerStackProps> = {}): Template {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  return Template.fromStack(new OutriggerStack(app, 'Test', { clusters, ...extra }));
}

interface Mapping {
  FunctionName: { Ref: string };
  EventSourceArn: { 'Fn::GetAtt': [string, string] };
  BatchSize: number;
  FunctionResponseTypes: string[];
  ScalingConfig: { MaximumConcurrency: number };
}

/** Each event source mapping as `<function> <- <queue>`, with what it is configured with. */
function mappings(t: Template): Array<{ fn: string; queue: string; mapping: Mapping }> {
  const fns = Object.fromEntries(Object.entries(byName(t.findResources('AWS::Lambda::Function'))).map(([name, f]) => [f.id, name]));
  return Object.values(t.findResources('AWS::Lambda::EventSourceMapping')).map((m) => {
    const mapping = m.Properties as Mapping;
    return { fn: fns[mapping.FunctionName.Ref]!, queue: stripHash(mapping.EventSourceArn['Fn::GetAtt'][0]), mapping };
  });
}

/** The stack's queue URL prefix (Fn::Join of the region, URL suffix and account), as a readable string. */
function urlPrefix(value: unknown): string {
  const parts = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
  return parts.map((p) => (typeof p === 'string' ? p : `<${(p as { Ref: string }).Ref}>`)).join('');
}

interface TemplateJson {
  Resources: Record<string, { Type: string; Properties: Resource; Metadata?: Record<string, unknown> }>;
}

/**
 * Synthesizes the app as `cdk synth` builds it (its own default context, without the CLI's: it must not rely
 * on it) into a directory of its own, and hands `check` the template and that directory.
 */
async function synthesized(clusters: ClusterConfig[], check: (out: { template: TemplateJson; directory: string }) => void): Promise<void> {
  const outdir = await mkdtemp(join(tmpdir(), 'outrigger-sam-'));
  try {
    const { app, stack } = outriggerApp({ outdir, context: { 'aws:cdk:bundling-stacks': [], 'outrigger:clusters': clusters } });
    const assembly = app.synth();
    check({
      template: JSON.parse(await readFile(join(outdir, `${stack.stackName}.template.json`), 'utf8')) as TemplateJson,
      directory: assembly.directory,
    });
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}

/** The cluster configuration in a layer staged at `assetPath` of the assembly in `directory`. */
function layerClusters(directory: string, assetPath: string): unknown {
  return JSON.parse(readFileSync(join(directory, assetPath, CLUSTERS_FILE_IN_LAYER), 'utf8'));
}

/** Lambda's limit on a function's environment: its variables' names and values together. */
const LAMBDA_ENVIRONMENT_BYTES = 4096;

/**
 * An environment's size once deployed, at most: the variables as JSON (a little more than their names and
 * values), each reference to a resource (a table's name, a queue's URL) counted as 255 characters, the longest
 * such a name may be, and the pseudo parameters at their longest.
 */
function environmentBytes(variables: Record<string, unknown>): number {
  const pseudo: Record<string, string> = {
    'AWS::Region': 'ap-southeast-5',
    'AWS::AccountId': '111122223333',
    'AWS::URLSuffix': 'amazonaws.com.cn',
    'AWS::Partition': 'aws-us-gov',
  };
  const resolve = (v: unknown): string => {
    if (typeof v === 'string') return v;
    const intrinsic = v as { Ref?: string; 'Fn::Join'?: [string, unknown[]]; 'Fn::GetAtt'?: unknown };
    if (intrinsic.Ref !== undefined) return pseudo[intrinsic.Ref] ?? 'x'.repeat(255);
    if (intrinsic['Fn::GetAtt'] !== undefined) return 'x'.repeat(255);
    if (intrinsic['Fn::Join']) return intrinsic['Fn::Join'][1].map(resolve).join(intrinsic['Fn::Join'][0]);
    throw new Error(`an environment value this test cannot size: ${JSON.stringify(v)}`);
  };
  return Buffer.byteLength(JSON.stringify(Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, resolve(v)]))), 'utf8');
}

describe('the Outrigger stack', () => {
  const template = synth();

  test('has the state table with the shared key schema, TTL and point-in-time recovery', () => {
    template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
      TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
      Replicas: [Match.objectLike({ PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } })],
    });
  });

  test("runs every registered function on arm64 Node 24, with the cluster configuration in a layer's file rather than in its environment", () => {
    const fns = template.findResources('AWS::Lambda::Function', { Properties: { Runtime: 'nodejs24.x' } });
    expect(Object.keys(fns)).toHaveLength(functions.length);
    const [layer, more] = Object.keys(template.findResources('AWS::Lambda::LayerVersion'));
    expect(more).toBeUndefined();
    template.hasResourceProperties('AWS::Lambda::LayerVersion', { CompatibleRuntimes: ['nodejs24.x'], CompatibleArchitectures: ['arm64'] });
    for (const fn of Object.values(fns)) {
      expect(fn.Properties.Architectures).toEqual(['arm64']);
      expect(fn.Properties.Layers).toEqual([{ Ref: layer }]);
      expect(fn.Properties.Environment.Variables.OUTRIGGER_CLUSTERS_FILE).toBe(`/opt/${CLUSTERS_FILE_IN_LAYER}`);
      expect(fn.Properties.Environment.Variables.OUTRIGGER_CLUSTERS).toBe('');
    }
  });

  /** Each rule of the given rate as its description and its targets' inputs (undefined: the scheduled event). */
  function scheduled(t: Template, rate: string): Array<{ description: string; inputs: unknown[] }> {
    return Object.values(t.findResources('AWS::Events::Rule', { Properties: { ScheduleExpression: rate } })).map((r) => ({
      description: r.Properties.Description as string,
      inputs: (r.Properties.Targets as Array<{ Input?: string }>).map((target) =>
        target.Input === undefined ? undefined : (JSON.parse(target.Input) as unknown),
      ),
    }));
  }

  test('runs the heartbeat and the map resync every minute, each from one rule for every cluster', () => {
    const t = synth(Array.from({ length: 6 }, (_, i) => eksCluster(`c${i}`)));
    expect(scheduled(t, 'rate(1 minute)').sort((a, b) => a.description.localeCompare(b.description))).toEqual([
      { description: 'Runs heartbeat every 1 minute(s)', inputs: [undefined] },
      { description: 'Runs map-resync every 1 minute(s)', inputs: [undefined] },
    ]);
  });

  test('polls storage every 10 minutes, one invocation per cluster and reporter, from a rule per cluster', () => {
    const ha = (id: string, reporters: number): ClusterConfig => ({
      ...eksCluster(id),
      storage: {
        enabled: true,
        migrations: 'outrigger',
        // Each apiserver at an endpoint of its own: reporters on the balanced endpoint are refused.
        reporters: Array.from({ length: reporters }, (_, i) => ({ id: `apiserver-${i}`, server: `https://10.0.0.${i + 1}` })),
      },
    });
    const polls = (clusters: ClusterConfig[]) =>
      scheduled(synth(clusters), 'rate(10 minutes)').sort((a, b) => a.description.localeCompare(b.description));
    expect(polls([ha('prod', 2)])).toEqual([
      {
        description: 'Runs storage-poll for cluster prod every 10 minute(s)',
        inputs: [
          { cluster: 'prod', reporter: 'apiserver-0' },
          { cluster: 'prod', reporter: 'apiserver-1' },
        ],
      },
    ]);
    // A rule takes at most 5 targets: one rule for all clusters would refuse 6 clusters, or 3 with 2 reporters each.
    expect(polls(Array.from({ length: 6 }, (_, i) => eksCluster(`c${i}`)))).toEqual(
      Array.from({ length: 6 }, (_, i) => ({
        description: `Runs storage-poll for cluster c${i} every 10 minute(s)`,
        inputs: [{ cluster: `c${i}`, reporter: 'apiserver' }],
      })),
    );
    expect(polls([ha('a', 2), ha('b', 2), ha('c', 2)]).map((r) => r.inputs.length)).toEqual([2, 2, 2]);
    // More reporters than a rule takes: a further rule for the rest.
    const seven = polls([ha('big', 7)]);
    expect(seven.map((r) => r.description)).toEqual([
      'Runs storage-poll for cluster big (reporters 1-5 of 7) every 10 minute(s)',
      'Runs storage-poll for cluster big (reporters 6-7 of 7) every 10 minute(s)',
    ]);
    expect(seven.flatMap((r) => r.inputs)).toEqual(Array.from({ length: 7 }, (_, i) => ({ cluster: 'big', reporter: `apiserver-${i}` })));
    // Storage migration off: nothing to poll.
    expect(
      polls([cluster, { ...eksCluster('off'), storage: { enabled: false, migrations: 'outrigger' } }]).map((r) => r.description),
    ).toEqual(['Runs storage-poll for cluster prod every 10 minute(s)']);
  });

  test('grants each function only what its code does: its table actions, its queue, its dead letters, the queues it sends to', () => {
    const table = (...actions: string[]) => actions.map((a) => `${a} State`);
    const consume = (queue: string) =>
      ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'].map(
        (a) => `${a} ${queue}`,
      );
    const send = (...queues: string[]) => queues.map((q) => `sqs:SendMessage ${q}`);
    const consumer = (queue: string, ...sendsTo: string[]) => [...consume(queue), ...send(`${queue}DeadLetter`, ...sendsTo)];
    const granted = grants(template);
    // Each function writes its logs to its own log group (not AWSLambdaBasicExecutionRole's every log group).
    const withLogs = (byFunction: Record<string, string[]>) =>
      Object.fromEntries(
        Object.entries(byFunction).map(([fn, g]) => [
          fn,
          fn.endsWith('ForwarderRole') ? g : [...g, `logs:CreateLogStream ${fn}Logs`, `logs:PutLogEvents ${fn}Logs`],
        ]),
      );
    expect(granted).toEqual(
      sorted(
        withLogs({
          Heartbeat: table('dynamodb:GetItem', 'dynamodb:PutItem'),
          Router: [
            ...consumer('ProdEvents', 'ProdSyncHistory', 'ProdSyncStorage', 'ProdSyncMap'),
            `secretsmanager:GetSecretValue ${JSON.stringify({ Ref: signingSecretId(template) })}`,
          ],
          History: [
            ...table('dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:DeleteItem'),
            ...consumer('ProdSyncHistory', 'ProdSyncHistory'),
          ],
          HistoryResync: send('ProdSyncHistory'),
          StoragePoll: [
            ...table('dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem'),
            ...send('ProdSyncMigrator'),
          ],
          Storage: [
            ...table('dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem'),
            ...consumer('ProdSyncStorage', 'ProdSyncMigrator'),
          ],
          Migrator: [...table('dynamodb:GetItem', 'dynamodb:UpdateItem'), ...consumer('ProdSyncMigrator', 'ProdSyncMigrator')],
          Map: [
            ...table('dynamodb:GetItem', 'dynamodb:PutItem'),
            ...consumer('ProdSyncMap', 'ProdSyncMap'),
            `secretsmanager:GetSecretValue ${JSON.stringify({ Ref: signingSecretId(template) })}`,
          ],
          MapResync: send('ProdSyncMap'),
          Ingest: send('ProdEvents', 'IngestDeadLetter'),
          ProdForwarderRole: send('ProdEvents', 'ProdEventsDeadLetter'),
        }),
      ),
    );
    // No function role carries a managed policy (AWSLambdaBasicExecutionRole's logs:* on every log group).
    for (const role of Object.values(template.findResources('AWS::IAM::Role'))) expect(role.Properties.ManagedPolicyArns).toBeUndefined();
  });

  const signingSecretId = (t: Template) =>
    Object.keys(t.findResources('AWS::SecretsManager::Secret')).find((id) => id.startsWith('MapHookSigningSecret'));

  test('names no resource by wildcard in any policy', () => {
    for (const type of ['AWS::IAM::Policy', 'AWS::IAM::Role', 'AWS::SQS::QueuePolicy']) {
      for (const r of Object.values(template.findResources(type))) {
        const docs = [
          r.Properties.PolicyDocument,
          ...((r.Properties.Policies as Array<{ PolicyDocument: unknown }> | undefined) ?? []).map((p) => p.PolicyDocument),
        ].filter(Boolean) as Array<{ Statement: Statement[] }>;
        for (const st of docs.flatMap((d) => d.Statement)) expect([st.Resource].flat()).not.toContain('*');
      }
    }
  });

  test('has, per cluster, a FIFO events queue and one FIFO queue per sync target, each with a 14-day FIFO dead-letter queue taking 5 tries, named by cluster and consumer', () => {
    const t = synth([cluster, dr]);
    const queues = byName(t.findResources('AWS::SQS::Queue'));
    const perCluster = (c: ClusterConfig) =>
      ['events', ...targets].map((q) => ({
        id: queueId(c.id, q),
        name: `Test-${c.id}-${q}`,
        consumer: functions.find((f) => (q === 'events' ? f.events : f.sync?.target === q))!,
      }));
    const main = [cluster, dr].flatMap(perCluster);
    expect(Object.keys(queues).sort()).toEqual(
      [...main.map((q) => q.id), ...main.map((q) => `${q.id}DeadLetter`), 'IngestDeadLetter'].sort(),
    );
    for (const q of main) {
      expect(queues[q.id]!.Properties).toEqual({
        QueueName: `${q.name}.fifo`,
        FifoQueue: true,
        // Senders name the deduplication id (derived from the event or request).
        ContentBasedDeduplication: false,
        SqsManagedSseEnabled: true,
        // The consumer's timeout, six times: events go to the router, sync requests to their target's function.
        VisibilityTimeout: 6 * q.consumer.timeoutSeconds,
        RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [queues[`${q.id}DeadLetter`]!.id, 'Arn'] }, maxReceiveCount: 12 },
      });
      // SqsDeadLetterSink names only the message group.
      expect(queues[`${q.id}DeadLetter`]!.Properties).toEqual({
        QueueName: `${q.name}-dlq.fifo`,
        FifoQueue: true,
        ContentBasedDeduplication: true,
        SqsManagedSseEnabled: true,
        MessageRetentionPeriod: 14 * 24 * 3600,
      });
    }
    expect(queues.IngestDeadLetter!.Properties).toEqual({
      QueueName: 'Test-ingest-dlq.fifo',
      FifoQueue: true,
      ContentBasedDeduplication: true,
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 24 * 3600,
    });
    expect(queues.DrEuSyncMigrator!.Properties.VisibilityTimeout).toBe(5400);
    // Every queue refuses requests without TLS: one policy per cluster for all its queues (and one for ingest's).
    const policies = Object.values(t.findResources('AWS::SQS::QueuePolicy'));
    expect(policies).toHaveLength(3);
    const tlsOnly = policies.flatMap((p) => {
      const deny = (p.Properties.PolicyDocument.Statement as Statement[]).find(
        (st) => st.Effect === 'Deny' && JSON.stringify(st.Condition) === JSON.stringify({ Bool: { 'aws:SecureTransport': 'false' } }),
      );
      const urls = (p.Properties.Queues as Array<{ Ref: string }>).map((q) => q.Ref);
      // The statement names the ARNs of the queues the policy is attached to, and only those.
      expect(([deny?.Resource].flat() as Array<{ 'Fn::GetAtt': [string, string] }>).map((r) => r['Fn::GetAtt'][0]).sort()).toEqual(
        [...urls].sort(),
      );
      return deny ? urls : [];
    });
    expect(tlsOnly.sort()).toEqual(
      Object.values(queues)
        .map((q) => q.id)
        .sort(),
    );
  });

  test('gives a cluster whose storage migration is off no storage or migrator queue to poll, and no function a grant on one', () => {
    const off: ClusterConfig = { ...eksCluster('off'), storage: { enabled: false, migrations: 'outrigger' } };
    const t = synth([cluster, off]);
    const queues = Object.keys(byName(t.findResources('AWS::SQS::Queue')));
    expect(queues.filter((q) => q.startsWith('Off')).sort()).toEqual(
      ['OffEvents', 'OffEventsDeadLetter', 'OffSyncHistory', 'OffSyncHistoryDeadLetter', 'OffSyncMap', 'OffSyncMapDeadLetter'].sort(),
    );
    // The cluster whose migration is on keeps its own.
    expect(queues).toEqual(expect.arrayContaining([queueId(cluster.id, 'storage'), queueId(cluster.id, 'migrator')]));
    const named = JSON.stringify(Object.values(t.findResources('AWS::IAM::Policy')));
    expect(named).not.toMatch(/OffSync(Storage|Migrator)/);
    expect(Object.values(t.findResources('AWS::Lambda::EventSourceMapping'))).toHaveLength(
      ['events', ...targets].length + ['events', 'history', 'map'].length,
    );
  });

  test('gives a cluster that serves no Metacontroller APIs no map queue; with storage off too, only its events and history queues', () => {
    const noMeta: ClusterConfig = { ...eksCluster('nometa'), metacontroller: { enabled: false } };
    const bare: ClusterConfig = {
      ...eksCluster('bare'),
      metacontroller: { enabled: false },
      storage: { enabled: false, migrations: 'outrigger' },
    };
    const t = synth([cluster, noMeta, bare]);
    const queues = Object.keys(byName(t.findResources('AWS::SQS::Queue')));
    const of = (prefix: string) => queues.filter((q) => q.startsWith(prefix) && !q.endsWith('DeadLetter')).sort();
    expect({ nometa: of('Nometa'), bare: of('Bare') }).toEqual({
      nometa: ['NometaEvents', 'NometaSyncHistory', 'NometaSyncMigrator', 'NometaSyncStorage'],
      bare: ['BareEvents', 'BareSyncHistory'],
    });
    expect(queues).toEqual(expect.arrayContaining([queueId(cluster.id, 'map')]));
    expect(JSON.stringify(Object.values(t.findResources('AWS::IAM::Policy')))).not.toMatch(/(Nometa|Bare)SyncMap/);
  });

  test('refuses a cluster id that makes a queue name longer than SQS allows, or two ids that name the same resources', () => {
    expect(() => synth([{ ...cluster, id: 'a'.repeat(60) }])).toThrow(
      `queue name Test-${'a'.repeat(60)}-events-dlq.fifo is 81 characters, over SQS's 80: shorten the cluster id or the stack name`,
    );
    expect(() => synth([cluster, eksCluster('a-1'), eksCluster('a1')])).toThrow('clusters a-1 and a1 would share the name A1');
  });

  test("feeds the router and each controller from each cluster's queue in partial batches, at most the cluster's maxConcurrency at once", () => {
    const t = synth([cluster, dr]);
    const consumers = functions.filter((f) => f.events || f.sync);
    const expected = consumers.flatMap((spec) =>
      [cluster, dr].map((c) => ({
        fn: fnName(spec.name),
        queue: queueId(c.id, spec.events ? 'events' : spec.sync!.target),
        maximumConcurrency: c.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY,
      })),
    );
    const got = mappings(t);
    expect(
      got
        .map((m) => ({ fn: m.fn, queue: m.queue, maximumConcurrency: m.mapping.ScalingConfig.MaximumConcurrency }))
        .sort((a, b) => a.queue.localeCompare(b.queue)),
    ).toEqual(expected.sort((a, b) => a.queue.localeCompare(b.queue)));
    for (const { mapping } of got) expect(mapping).toMatchObject({ BatchSize: 10, FunctionResponseTypes: ['ReportBatchItemFailures'] });
    expect(new Set(got.filter((m) => m.queue.startsWith('Prod')).map((m) => m.mapping.ScalingConfig.MaximumConcurrency))).toEqual(
      new Set([5]),
    );
    expect(new Set(got.filter((m) => m.queue.startsWith('DrEu')).map((m) => m.mapping.ScalingConfig.MaximumConcurrency))).toEqual(
      new Set([20]),
    );
  });

  test('names every queue by one prefix in the environment of each function that uses queues, and no queue URL one by one', () => {
    const fns = byName(template.findResources('AWS::Lambda::Function'));
    for (const spec of functions) {
      const env = fns[fnName(spec.name)]!.Properties.Environment.Variables as Record<string, unknown>;
      const usesQueues = Boolean(spec.events || spec.sync || spec.functionUrl || sendTargets(spec, functions).length);
      if (usesQueues)
        expect(urlPrefix(env.OUTRIGGER_QUEUE_URL_PREFIX)).toBe('https://sqs.<AWS::Region>.<AWS::URLSuffix>/<AWS::AccountId>/Test-');
      else expect(env.OUTRIGGER_QUEUE_URL_PREFIX).toBe('');
      expect(env.OUTRIGGER_SYNC_QUEUES).toBeUndefined();
      expect(env.OUTRIGGER_EVENT_QUEUE_URL).toBeUndefined();
      // Only ingest has one dead-letter queue for everything; a consumer's dead letters go beside each message's queue.
      if (spec.functionUrl) expect(refName(env.OUTRIGGER_DEAD_LETTER_QUEUE_URL)).toBe('IngestDeadLetter');
      else expect(env.OUTRIGGER_DEAD_LETTER_QUEUE_URL).toBe('');
    }
  });

  test("with two clusters, the router may send only to the sync queues of both, each forwarder role only to its own cluster's events queues", () => {
    const t = synth([cluster, dr]);
    const granted = grants(t);
    const sends = (who: string) =>
      granted[who]!.filter((g) => g.startsWith('sqs:SendMessage '))
        .map((g) => g.slice('sqs:SendMessage '.length))
        .sort();
    const routerTargets = sendTargets(
      functions.find((f) => f.name === 'router')!,
      functions,
    );
    expect(sends('Router')).toEqual(
      [...[cluster, dr].flatMap((c) => routerTargets.map((q) => queueId(c.id, q))), 'ProdEventsDeadLetter', 'DrEuEventsDeadLetter'].sort(),
    );
    expect(sends('Ingest')).toEqual(['DrEuEvents', 'IngestDeadLetter', 'ProdEvents']);
    expect(granted.ProdForwarderRole).toEqual(['sqs:SendMessage ProdEvents', 'sqs:SendMessage ProdEventsDeadLetter']);
    expect(granted.DrEuForwarderRole).toEqual(['sqs:SendMessage DrEuEvents', 'sqs:SendMessage DrEuEventsDeadLetter']);
    // A controller hands work on to the same cluster's queue of the next target (history: its own, for
    // truncation), for every cluster.
    expect(sends('History')).toEqual(['DrEuSyncHistory', 'DrEuSyncHistoryDeadLetter', 'ProdSyncHistory', 'ProdSyncHistoryDeadLetter']);
  });

  test('serves the ingest function on an IAM-authenticated Function URL, queueing to the events queues, refusing to its own dead-letter queue', () => {
    const fns = byName(template.findResources('AWS::Lambda::Function'));
    const ingest = fns.Ingest!;
    template.resourceCountIs('AWS::Lambda::Url', 1);
    template.hasResourceProperties('AWS::Lambda::Url', { AuthType: 'AWS_IAM', TargetFunctionArn: { 'Fn::GetAtt': [ingest.id, 'Arn'] } });
    const env = ingest.Properties.Environment.Variables as Record<string, unknown>;
    expect(urlPrefix(env.OUTRIGGER_QUEUE_URL_PREFIX)).toMatch(/\/Test-$/);
    expect(refName(env.OUTRIGGER_DEAD_LETTER_QUEUE_URL)).toBe('IngestDeadLetter');
    template.hasOutput('IngestDeadLetterQueueUrl', { Value: { Ref: Match.stringLikeRegexp('^IngestDeadLetter[0-9A-F]{8}$') } });
    // With AWS_IAM no resource policy opens it: callers need lambda:InvokeFunctionUrl (and InvokeFunction) in their own.
    expect(Object.values(template.findResources('AWS::Lambda::Permission')).filter((p) => JSON.stringify(p).includes(ingest.id))).toEqual(
      [],
    );
    template.hasOutput('IngestUrl', { Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^IngestFunctionUrl'), 'FunctionUrl'] } });
  });

  test("gives each EKS cluster's forwarder a role for EKS Pod Identity that only that cluster's pods may assume, and outputs what its forwarder needs", () => {
    const trust = (t: Template, role: string) =>
      Object.values(byName(t.findResources('AWS::IAM::Role'))[role]!.Properties.AssumeRolePolicyDocument.Statement as Statement[]);
    // By the cluster's ARN (region and account included), not its name alone.
    const arn = (region: string, name: string) => ({
      'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:eks:${region}:`, { Ref: 'AWS::AccountId' }, `:cluster/${name}`]],
    });
    // By default, the forwarder's namespace and service account in deploy/forwarder/base.
    const defaults = {
      'aws:RequestTag/kubernetes-namespace': ['outrigger-system'],
      'aws:RequestTag/kubernetes-service-account': ['outrigger-forwarder'],
    };
    expect(trust(template, 'ProdForwarderRole')).toEqual([
      {
        Effect: 'Allow',
        Principal: { Service: 'pods.eks.amazonaws.com' },
        Action: ['sts:AssumeRole', 'sts:TagSession'],
        Condition: { StringEquals: { 'aws:RequestTag/eks-cluster-arn': [arn('eu-west-1', 'prod')], ...defaults } },
      },
    ]);
    const onprem = onpremCluster();
    const narrowed = synth([cluster, dr, onprem], { forwarder: { namespace: 'outrigger', serviceAccount: 'forwarder' } });
    const narrowing = { 'aws:RequestTag/kubernetes-namespace': ['outrigger'], 'aws:RequestTag/kubernetes-service-account': ['forwarder'] };
    expect(trust(narrowed, 'ProdForwarderRole')[0]!.Condition).toEqual({
      StringEquals: { 'aws:RequestTag/eks-cluster-arn': [arn('eu-west-1', 'prod')], ...narrowing },
    });
    expect(trust(narrowed, 'DrEuForwarderRole')[0]!.Condition).toEqual({
      StringEquals: { 'aws:RequestTag/eks-cluster-arn': [arn('eu-west-1', 'prod-dr')], ...narrowing },
    });
    // A cluster outside EKS has no Pod Identity: no role, but its queues' outputs.
    expect(
      Object.keys(byName(narrowed.findResources('AWS::IAM::Role')))
        .filter((r) => r.endsWith('ForwarderRole'))
        .sort(),
    ).toEqual(['DrEuForwarderRole', 'ProdForwarderRole']);
    for (const [id, role] of [
      ['Prod', true],
      ['DrEu', true],
      ['Onprem', false],
    ] as const) {
      narrowed.hasOutput(`${id}EventsQueueUrl`, { Value: { Ref: Match.stringLikeRegexp(`^${id}Events[0-9A-F]{8}$`) } });
      narrowed.hasOutput(`${id}EventsDeadLetterQueueUrl`, { Value: { Ref: Match.stringLikeRegexp(`^${id}EventsDeadLetter[0-9A-F]{8}$`) } });
      expect(Object.keys(narrowed.findOutputs(`${id}ForwarderRoleArn`))).toHaveLength(role ? 1 : 0);
    }
    narrowed.hasOutput('DrEuForwarderRoleArn', { Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^DrEuForwarderRole'), 'Arn'] } });
  });

  test("alarms on each cluster's dead letters and old messages (the worst of its queues), ingest's dead letters and function errors, to one topic, on one dashboard", () => {
    const t = synth([cluster, dr]);
    type Alarm = Record<string, unknown> & {
      Dimensions?: Array<{ Value: { Ref: string } }>;
      Metrics?: Array<{
        Id: string;
        Expression?: string;
        ReturnData?: boolean;
        MetricStat?: { Metric: { MetricName: string; Dimensions: Array<{ Value: unknown }> }; Period: number; Stat: string };
      }>;
    };
    const alarms = byName(t.findResources('AWS::CloudWatch::Alarm'));
    const topic = Object.keys(t.findResources('AWS::SNS::Topic'))[0];
    for (const a of Object.values(alarms)) expect(a.Properties.AlarmActions).toEqual([{ Ref: topic }]);
    const queues = byName(t.findResources('AWS::SQS::Queue'));
    const queueName = (dimension: unknown) => stripHash((dimension as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]);
    const watched = (a: Alarm) => {
      const metrics = a.Metrics!.filter((m) => m.MetricStat);
      return {
        names: [...new Set(metrics.map((m) => m.MetricStat!.Metric.MetricName))],
        queues: metrics.map((m) => queueName(m.MetricStat!.Metric.Dimensions[0]!.Value)).sort(),
        expression: a.Metrics!.find((m) => m.ReturnData !== false && m.Expression)?.Expression,
      };
    };
    for (const c of [cluster, dr]) {
      const id = fnName(c.id);
      const mine = ['events', ...targets].map((q) => queueId(c.id, q));
      const dead = alarms[`${id}DeadLetters`]!.Properties as Alarm;
      expect(watched(dead)).toEqual({
        names: ['ApproximateNumberOfMessagesVisible'],
        queues: mine.map((q) => `${q}DeadLetter`).sort(),
        expression: 'MAX(METRICS())',
      });
      expect(dead).toMatchObject({
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        EvaluationPeriods: 1,
        TreatMissingData: 'notBreaching',
      });
      const old = alarms[`${id}OldestMessage`]!.Properties as Alarm;
      expect(watched(old)).toEqual({ names: ['ApproximateAgeOfOldestMessage'], queues: [...mine].sort(), expression: 'MAX(METRICS())' });
      expect(old).toMatchObject({ Threshold: 300, ComparisonOperator: 'GreaterThanThreshold' });
      expect(old.Metrics!.filter((m) => m.MetricStat).every((m) => m.MetricStat!.Period === 300 && m.MetricStat!.Stat === 'Maximum')).toBe(
        true,
      );
      // The heartbeat's: the apiserver unanswered, the forwarder's Lease unrenewed, each for five minutes.
      for (const [alarm, metric, threshold, operator] of [
        ['ClusterUnreachable', 'ClusterUnreachable', 1, 'GreaterThanOrEqualToThreshold'],
        ['ForwarderSilent', 'ForwarderSilentSeconds', 120, 'GreaterThanThreshold'],
      ] as const) {
        expect(alarms[`${id}${alarm}`]!.Properties).toMatchObject({
          Namespace: 'Outrigger',
          MetricName: metric,
          Dimensions: expect.arrayContaining([
            { Name: 'service', Value: 'outrigger' },
            { Name: 'cluster', Value: c.id },
          ]),
          Statistic: 'Minimum',
          Period: 300,
          Threshold: threshold,
          ComparisonOperator: operator,
          TreatMissingData: 'notBreaching',
        });
      }
      // Storage: a StorageState Unknown, or a migration in its phase, for over an hour; a missed poll; a group
      // version whose discovery fails, on its own alarm (the poll's EMF counts).
      for (const [alarm, metric] of [
        ['StorageUnknown', 'StorageStatesUnknownOverdue'],
        ['StorageMigrationStuck', 'StorageMigrationsOverdue'],
        ['StoragePollMissed', 'StoragePollsMissed'],
        ['StorageDiscoveryFailed', 'StorageStatesUndiscovered'],
      ]) {
        expect(alarms[`${id}${alarm}`]!.Properties).toMatchObject({
          Namespace: 'Outrigger',
          MetricName: metric,
          Dimensions: expect.arrayContaining([
            { Name: 'service', Value: 'outrigger' },
            { Name: 'cluster', Value: c.id },
          ]),
          Statistic: 'Maximum',
          Period: 1800,
          Threshold: 1,
          ComparisonOperator: 'GreaterThanOrEqualToThreshold',
          TreatMissingData: 'notBreaching',
        });
      }
    }
    expect(alarms.IngestDeadLetters!.Properties).toMatchObject({
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Threshold: 1,
      Dimensions: [{ Value: { 'Fn::GetAtt': [queues.IngestDeadLetter!.id, 'QueueName'] } }],
    });
    const fns = byName(t.findResources('AWS::Lambda::Function'));
    const errors = Object.values(alarms)
      .filter((a) => a.Properties.MetricName === 'Errors')
      .map((a) => a.Properties as Alarm);
    expect(errors.map((a) => a.Dimensions![0]!.Value.Ref).sort()).toEqual(
      Object.values(fns)
        .map((f) => f.id)
        .sort(),
    );
    for (const a of errors)
      expect(a).toMatchObject({
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Period: 300,
        Statistic: 'Sum',
        EvaluationPeriods: 1,
      });
    expect(Object.keys(alarms)).toHaveLength(errors.length + 2 * 8 + 1);
    t.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    const body = JSON.stringify(Object.values(t.findResources('AWS::CloudWatch::Dashboard'))[0]!.Properties.DashboardBody);
    for (const text of [
      'ApproximateNumberOfMessagesVisible',
      'ApproximateAgeOfOldestMessage',
      'Errors',
      'prod: dead letters',
      'dr-eu: oldest message age',
      'prod: events and syncs',
      'RevisionsCreated',
      'MetricName=\\\\\\"SyncsFailed',
    ])
      expect(body).toContain(text);
    // Every queue is on the dashboard.
    for (const q of Object.values(queues)) expect(body).toContain(q.id);
  });

  test('names each function, its code and its cluster-configuration layer the way `sam local invoke -t cdk.out/<stack>.template.json <LogicalId>` reads them', async () => {
    await synthesized([cluster], ({ template: t, directory }) => {
      const fns = Object.entries(t.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::Function');
      expect(fns).toHaveLength(functions.length);
      for (const [, r] of fns) expect(r.Metadata).toMatchObject({ 'aws:asset:path': expect.any(String), 'aws:asset:property': 'Code' });
      // sam mounts the layer's directory at /opt, where OUTRIGGER_CLUSTERS_FILE looks.
      const layers = Object.entries(t.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::LayerVersion');
      expect(layers).toHaveLength(1);
      const [id, layer] = layers[0]!;
      expect(layer.Metadata).toMatchObject({ 'aws:asset:path': expect.any(String), 'aws:asset:property': 'Content' });
      for (const [, r] of fns) expect(r.Properties.Layers).toEqual([{ Ref: id }]);
      expect(layerClusters(directory, layer.Metadata!['aws:asset:path'] as string)).toEqual([cluster]);
    });
  });

  test("with 10 EKS clusters (1,500 bytes of CA data each), keeps every function's environment under Lambda's 4 KB, the layer's file holding every cluster", async () => {
    // A certificate behind text PEM readers skip, to 1,125 bytes: an EKS CA's size.
    const pem = Buffer.from(CA_DATA, 'base64').toString('utf8');
    const caData = (i: number) =>
      Buffer.from(`${Buffer.alloc(1125 - pem.length - 1, `cluster ${i} certificate authority `).toString()}\n${pem}`).toString('base64');
    const clusters: ClusterConfig[] = Array.from({ length: 10 }, (_, i) => ({
      id: `cluster-${i}`,
      access: {
        kind: 'eks',
        server: `https://${'0123456789ABCDEF'.repeat(2)}.gr7.eu-west-1.eks.amazonaws.com`,
        caData: caData(i),
        clusterName: `outrigger-cluster-${i}`,
        region: 'eu-west-1',
      },
      storage: {
        enabled: true,
        migrations: 'outrigger',
        reporters: [
          { id: 'apiserver-a', server: 'https://10.0.0.1' },
          { id: 'apiserver-b', server: 'https://10.0.0.2' },
        ],
      },
    }));
    expect(caData(0)).toHaveLength(1500);
    await synthesized(clusters, ({ template: t, directory }) => {
      const sizes = Object.values(t.Resources)
        .filter((r) => r.Type === 'AWS::Lambda::Function')
        .map((r) => environmentBytes(r.Properties.Environment.Variables as Record<string, unknown>));
      expect(sizes).toHaveLength(functions.length);
      expect(Math.max(...sizes)).toBeLessThan(LAMBDA_ENVIRONMENT_BYTES);
      const layer = Object.values(t.Resources).find((r) => r.Type === 'AWS::Lambda::LayerVersion')!;
      const file = join(directory, layer.Metadata!['aws:asset:path'] as string, CLUSTERS_FILE_IN_LAYER);
      // What the file holds would not have fitted in the environment.
      expect(JSON.stringify(clusters).length).toBeGreaterThan(4 * LAMBDA_ENVIRONMENT_BYTES);
      expect(clustersFromEnv({ OUTRIGGER_CLUSTERS_FILE: file })).toEqual(clusters);
      // Each cluster's storage poll has a rule of its own, within EventBridge's limit on a rule's targets.
      const rules = Object.values(t.Resources).filter(
        (r) => r.Type === 'AWS::Events::Rule' && r.Properties.ScheduleExpression === 'rate(10 minutes)',
      );
      expect(rules).toHaveLength(10);
      for (const r of rules) expect((r.Properties.Targets as unknown[]).length).toBeLessThanOrEqual(TARGETS_PER_RULE);
    });
  });

  test('lets the map function invoke the named hook functions (and their versions) only; the example hooks deploy on request', () => {
    const t = synth([cluster], {
      mapHookFunctions: [{ function: 'my-map-hook', callers: [{ cluster: 'prod', namespace: 'team-a' }] }],
      examples: true,
      env: { account: '111122223333', region: 'eu-west-1' },
    });
    const invoke = Object.entries(t.findResources('AWS::IAM::Policy')).flatMap(([id, p]) =>
      (p.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>)
        .filter((st) => st.Action === 'lambda:InvokeFunction')
        .map((st) => [id.replace(/ServiceRoleDefaultPolicy.*$/, ''), st.Resource]),
    );
    const arn = (name: string) => ({
      'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:lambda:eu-west-1:111122223333:function:${name}`]],
    });
    expect(invoke).toEqual([
      [
        'Map',
        [
          'my-map-hook',
          'my-map-hook:*',
          'outrigger-snapshot-schedule-map',
          'outrigger-snapshot-schedule-map:*',
          'outrigger-snapshot-schedule-tombstone',
          'outrigger-snapshot-schedule-tombstone:*',
        ].map(arn),
      ],
    ]);
    t.hasResourceProperties('AWS::Lambda::Function', { FunctionName: 'outrigger-snapshot-schedule-map', Handler: 'index.map' });
    // Each bound to its callers (docs/reference/hooks.md#who-may-call-a-lambda-hook): the example's to its MapController.
    const bindings = Object.values(t.findResources('AWS::Lambda::Function'))
      .map((f) => (f.Properties.Environment?.Variables as Record<string, unknown> | undefined)?.OUTRIGGER_HOOK_BINDINGS)
      .filter((v): v is string => typeof v === 'string' && v !== '');
    expect(bindings).toHaveLength(1);
    expect(JSON.parse(bindings[0]!)).toEqual([
      { functionName: 'my-map-hook', callers: [{ cluster: 'prod', namespace: 'team-a' }] },
      { functionName: 'outrigger-snapshot-schedule-map', callers: [{ kind: 'MapController', name: 'snapshotschedule-controller' }] },
      { functionName: 'outrigger-snapshot-schedule-tombstone', callers: [{ kind: 'MapController', name: 'snapshotschedule-controller' }] },
    ]);
    // A function named with no callers (the bare name of earlier versions) is refused, naming how to bind it.
    expect(() => synth([cluster], { mapHookFunctions: ['my-map-hook'] as never })).toThrow(
      'mapHookFunctions: my-map-hook names no callers: bind it to the definitions that may call it',
    );
    // Without hooks named, no function may invoke any.
    expect(JSON.stringify(template.findResources('AWS::IAM::Policy'))).not.toContain('lambda:InvokeFunction');
  });

  test('the app refuses a context key it does not know, and says where the clusters come from when none are given', () => {
    expect(() => outriggerApp({ context: { 'aws:cdk:bundling-stacks': [], 'outrigger:clusterFile': 'clusters.json' } })).toThrow(
      'unknown context outrigger:clusterFile (known: outrigger:clusters, outrigger:clustersFile,',
    );
    expect(() => outriggerApp({ context: { 'aws:cdk:bundling-stacks': [] } })).toThrow(
      'no clusters: pass -c outrigger:clustersFile=clusters.json',
    );
  });

  test('run as `cdk bootstrap` runs it, with no clusters yet, the app gives the account and region to bootstrap, and an error that fails synth and deploy', async () => {
    // docs/getting-started/deploy.md bootstraps (step 1) before it writes clusters.json (step 2), with no context.
    const outdir = await mkdtemp(join(tmpdir(), 'outrigger-app-'));
    try {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        CDK_OUTDIR: outdir,
        CDK_DEFAULT_ACCOUNT: '111122223333',
        CDK_DEFAULT_REGION: 'eu-west-1',
      };
      delete env.CDK_CONTEXT_JSON;
      const out = await capture(process.execPath, [join(projectRoot, 'infra', 'app.ts')], { env, cwd: projectRoot });
      expect({ code: out.code, stderr: out.stderr }).toEqual({ code: 0, stderr: '' });
      const manifest = JSON.parse(await readFile(join(outdir, 'manifest.json'), 'utf8')) as {
        artifacts: Record<string, { type: string; environment?: string; additionalMetadataFile?: string }>;
      };
      const stack = manifest.artifacts.Outrigger!;
      expect(stack).toMatchObject({ type: 'aws:cloudformation:stack', environment: 'aws://111122223333/eu-west-1' });
      const metadata = JSON.parse(await readFile(join(outdir, stack.additionalMetadataFile!), 'utf8')) as Record<
        string,
        Array<{ type: string; data: unknown }>
      >;
      const errors = Object.values(metadata)
        .flat()
        .filter((m) => m.type === 'aws:cdk:error');
      expect(errors.map((e) => e.data)).toEqual([expect.stringContaining('no clusters: pass -c outrigger:clustersFile=clusters.json')]);
    } finally {
      await rm(outdir, { recursive: true, force: true });
    }
  });

  test("the app builds the forwarder's image for the platforms outrigger:forwarderImage names (true: both), and refuses any other", () => {
    const clusters = JSON.stringify([cluster]);
    const images = (value: unknown) => {
      const { stack } = outriggerApp({
        context: { 'aws:cdk:bundling-stacks': [], 'outrigger:clusters': clusters, 'outrigger:forwarderImage': value },
      });
      const t = Template.fromStack(stack);
      return {
        indexes: Object.keys(t.findResources('Custom::OutriggerImageIndex')).length,
        output: Boolean(t.findOutputs('ForwarderImageUri').ForwarderImageUri),
      };
    };
    expect(images('true')).toEqual({ indexes: 1, output: true });
    expect(images('linux/amd64, linux/arm64')).toEqual({ indexes: 1, output: true });
    expect(images('linux/arm64')).toEqual({ indexes: 0, output: true });
    expect(images(undefined)).toEqual({ indexes: 0, output: false });
    expect(images('false')).toEqual({ indexes: 0, output: false });
    expect(() => images('linux/arm')).toThrow(
      'context outrigger:forwarderImage names "linux/arm": true, false, or linux/amd64 and/or linux/arm64, comma-separated',
    );
  });

  test('the app builds arm64 functions and layer, or x86_64 ones with outrigger:architecture=x86_64, and refuses any other', () => {
    const architectures = (value: unknown) => {
      const { stack } = outriggerApp({
        context: {
          'aws:cdk:bundling-stacks': [],
          'outrigger:clusters': JSON.stringify([cluster]),
          'outrigger:examples': true,
          'outrigger:forwarderImage': true,
          ...(value === undefined ? {} : { 'outrigger:architecture': value }),
        },
      });
      const t = Template.fromStack(stack);
      // Every function of ours: the controllers, the example's hooks and the image index's (not the CDK's own provider framework).
      const ours = Object.values(t.findResources('AWS::Lambda::Function')).filter((fn) => fn.Properties.Runtime === 'nodejs24.x');
      const layers = Object.values(t.findResources('AWS::Lambda::LayerVersion'));
      return [
        ...new Set([...ours.map((fn) => fn.Properties.Architectures), ...layers.map((l) => l.Properties.CompatibleArchitectures)].flat()),
      ];
    };
    expect(architectures(undefined)).toEqual(['arm64']);
    expect(architectures('arm64')).toEqual(['arm64']);
    expect(architectures('x86_64')).toEqual(['x86_64']);
    expect(() => architectures('amd64')).toThrow('context outrigger:architecture is "amd64": arm64 or x86_64');
  });

  test('refuses clusters reached any way but EKS IAM tokens or a token in Secrets Manager', () => {
    expect(() => synth([{ id: 'x', access: { kind: 'kubeconfig', path: '/home/me/.kube/config' } }])).toThrow(
      'a deployed stack reaches clusters through EKS IAM tokens or a token in Secrets Manager',
    );
  });

  test('a cluster outside EKS: every function that talks to clusters may read its token secret, and only that secret; the migrator its own secret alone; ingest neither', () => {
    const arn = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem';
    const migratorArn = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem-migrator-AbCdEf';
    const t = synth([
      cluster,
      {
        id: 'onprem',
        access: { kind: 'secret', server: 'https://k8s.onprem.corp.internal:6443', secretArn: arn, migratorTokenSecretArn: migratorArn },
      },
    ]);
    const reads = Object.entries(t.findResources('AWS::IAM::Policy')).flatMap(([id, p]) =>
      // (The map function's webhook signing key, a secret of the stack's own, is the next test's.)
      (p.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>)
        .filter((st) => st.Action === 'secretsmanager:GetSecretValue' && typeof st.Resource === 'string')
        .map((st) => [id.replace(/ServiceRoleDefaultPolicy.*$/, ''), st.Resource]),
    );
    const readers = Object.fromEntries(reads);
    expect(Object.keys(readers)).toEqual(
      expect.arrayContaining(['Heartbeat', 'History', 'Map', 'MapResync', 'Migrator', 'Router', 'Storage', 'StoragePoll']),
    );
    expect(readers).not.toHaveProperty('Ingest');
    const { Migrator: migratorReads, ...others } = readers;
    for (const resource of Object.values(others)) expect(resource).toBe(`${arn}-??????`);
    // The migrator lists and patches everything: its token is no other function's, and it needs no other.
    expect(reads.filter(([id]) => id === 'Migrator')).toEqual([['Migrator', migratorArn]]);
    expect(migratorReads).toBe(migratorArn);
  });

  test('the signing secret: a generated secret that only the map function and the router may read (GetSecretValue, nothing else), named in their environment', () => {
    const t = synth([cluster]);
    const [secretId] = Object.keys(t.findResources('AWS::SecretsManager::Secret'));
    expect(secretId).toMatch(/^MapHookSigningSecret/);
    const grants = Object.entries(t.findResources('AWS::IAM::Policy')).flatMap(([id, p]) =>
      (p.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>)
        .filter((st) => JSON.stringify(st.Resource).includes(secretId!))
        .map((st) => [id.replace(/ServiceRoleDefaultPolicy.*$/, ''), st.Action, st.Resource]),
    );
    expect(grants.sort()).toEqual([
      ['Map', 'secretsmanager:GetSecretValue', { Ref: secretId }],
      ['Router', 'secretsmanager:GetSecretValue', { Ref: secretId }],
    ]);
    const withKey = Object.entries(t.findResources('AWS::Lambda::Function')).filter(
      ([, f]) => (f.Properties.Environment?.Variables as Record<string, unknown> | undefined)?.OUTRIGGER_HOOK_SECRET_ARN,
    );
    expect(withKey.map(([id]) => id.replace(/[0-9A-F]{8}$/, '')).sort()).toEqual(['Map', 'Router']);
  });
});
