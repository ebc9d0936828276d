// The synthesized CloudFormation template, checked with CDK's assertions (bundling skipped: the bundle
// itself is measured by bench/bundle).
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { functions } from '../../functions/index.ts';
import { sendTargets } from '../../functions/spec.ts';
import { outriggerApp } from '../../infra/app.ts';
import { OutriggerStack, type OutriggerStackProps } from '../../infra/stack.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';

const cluster: ClusterConfig = {
  id: 'prod',
  access: { kind: 'eks', server: 'https://x.gr7.eu-west-1.eks.amazonaws.com', caData: 'Q0E=', clusterName: 'prod', region: 'eu-west-1' },
};

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

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- template JSON, as findResources types it
type Resource = Record<string, any>;

/** Resources by construct name, each with its logical id. */
function byName(resources: Record<string, Resource>): Record<string, { id: string; Properties: Resource }> {
  return Object.fromEntries(Object.entries(resources).map(([id, r]) => [stripHash(id), { id, Properties: r.Properties as Resource }]));
}

function refName(value: unknown): string {
  return stripHash((value as { Ref: string }).Ref);
}

/** A JSON environment value built with Fn::Join, read back with each Ref as the referenced construct's name. */
function joined(value: unknown): unknown {
  const parts = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
  return JSON.parse(parts.map((p) => (typeof p === 'string' ? p : refName(p))).join(''));
}

/** Every (action, resource) each role may do, as `action Resource` lines, per role (named by its function). */
function grants(t: Template): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [id, p] of Object.entries(t.findResources('AWS::IAM::Policy'))) {
    const who = stripHash(id).replace(/(ServiceRole)?DefaultPolicy$/, '');
    for (const st of p.Properties.PolicyDocument.Statement as Statement[]) {
      for (const action of [st.Action].flat()) {
        for (const r of [st.Resource].flat()) {
          const name = typeof r === 'object' && r && 'Fn::GetAtt' in r ? stripHash((r as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0]) : JSON.stringify(r);
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

  test('runs every registered function on arm64 Node 24', () => {
    const fns = template.findResources('AWS::Lambda::Function', { Properties: { Runtime: 'nodejs24.x' } });
    expect(Object.keys(fns)).toHaveLength(functions.length);
    for (const fn of Object.values(fns)) {
      expect(fn.Properties.Architectures).toEqual(['arm64']);
      expect(JSON.parse(fn.Properties.Environment.Variables.OUTRIGGER_CLUSTERS)).toEqual([cluster]);
    }
  });

  test('schedules the heartbeat every minute', () => {
    template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 minute)' });
  });

  test('polls storage every 10 minutes, one invocation per cluster and reporter', () => {
    const ha = synth([{ ...cluster, storage: { enabled: true, migrations: 'outrigger', reporters: [{ id: 'apiserver-a' }, { id: 'apiserver-b' }] } }]);
    const rules = Object.values(ha.findResources('AWS::Events::Rule', { Properties: { ScheduleExpression: 'rate(10 minutes)' } }));
    expect(rules).toHaveLength(1);
    const inputs = (rules[0]!.Properties.Targets as Array<{ Input: string }>).map((t) => JSON.parse(t.Input) as unknown);
    expect(inputs).toEqual([
      { cluster: 'prod', reporter: 'apiserver-a' },
      { cluster: 'prod', reporter: 'apiserver-b' },
    ]);
  });

  test('grants each function only what its code does: its table actions, its queue, its dead letters, the queues it sends to', () => {
    const table = (...actions: string[]) => actions.map((a) => `${a} State`);
    const consume = (queue: string) => ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'].map((a) => `${a} ${queue}`);
    const send = (...queues: string[]) => queues.map((q) => `sqs:SendMessage ${q}`);
    const consumer = (queue: string, ...sendsTo: string[]) => [...consume(queue), ...send(`${queue}DeadLetter`, ...sendsTo)];
    const granted = grants(template);
    expect(granted).toEqual(
      sorted({
        Heartbeat: table('dynamodb:GetItem', 'dynamodb:PutItem'),
        Router: consumer('Events', 'SyncHistory', 'SyncStorage', 'SyncMap'),
        History: [...table('dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:ConditionCheckItem'), ...consumer('SyncHistory', 'SyncTruncate')],
        Truncate: [...table('dynamodb:GetItem', 'dynamodb:UpdateItem'), ...consumer('SyncTruncate')],
        StoragePoll: table('dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem'),
        Storage: [...table('dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem'), ...consumer('SyncStorage', 'SyncMigrator')],
        Migrator: [...table('dynamodb:UpdateItem'), ...consumer('SyncMigrator', 'SyncMigrator')],
        Map: [...table('dynamodb:GetItem', 'dynamodb:PutItem'), ...consumer('SyncMap', 'SyncMap')],
        MapResync: send('SyncMap'),
        Ingest: send('Events', 'EventsDeadLetter'),
        ForwarderRole: send('Events', 'EventsDeadLetter'),
      }),
    );
  });

  test('names no resource by wildcard in any policy', () => {
    for (const type of ['AWS::IAM::Policy', 'AWS::IAM::Role', 'AWS::SQS::QueuePolicy']) {
      for (const r of Object.values(template.findResources(type))) {
        const docs = [r.Properties.PolicyDocument, ...((r.Properties.Policies as Array<{ PolicyDocument: unknown }> | undefined) ?? []).map((p) => p.PolicyDocument)].filter(Boolean) as Array<{ Statement: Statement[] }>;
        for (const st of docs.flatMap((d) => d.Statement)) expect([st.Resource].flat()).not.toContain('*');
      }
    }
  });

  test('has a FIFO events queue and one FIFO queue per sync target, each with a 14-day FIFO dead-letter queue taking 5 tries', () => {
    const queues = byName(template.findResources('AWS::SQS::Queue'));
    const targets = functions.flatMap((f) => (f.sync ? [f.sync.target] : []));
    const main = ['Events', ...targets.map((t) => `Sync${t[0]!.toUpperCase()}${t.slice(1)}`)];
    expect(Object.keys(queues).sort()).toEqual([...main, ...main.map((q) => `${q}DeadLetter`)].sort());
    // The consumer's timeout, six times: events go to the router, sync requests to their target's function.
    const timeoutOf = (name: string) => functions.find((f) => (name === 'Events' ? f.events : f.sync && `Sync${f.sync.target[0]!.toUpperCase()}${f.sync.target.slice(1)}` === name))!.timeoutSeconds;
    for (const q of main) {
      expect(queues[q]!.Properties).toEqual({
        FifoQueue: true,
        // Senders name the deduplication id (derived from the event or request).
        ContentBasedDeduplication: false,
        SqsManagedSseEnabled: true,
        VisibilityTimeout: 6 * timeoutOf(q),
        RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [queues[`${q}DeadLetter`]!.id, 'Arn'] }, maxReceiveCount: 5 },
      });
      // SqsDeadLetterSink names only the message group.
      expect(queues[`${q}DeadLetter`]!.Properties).toEqual({ FifoQueue: true, ContentBasedDeduplication: true, SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 24 * 3600 });
    }
    expect(queues.SyncMigrator!.Properties.VisibilityTimeout).toBe(5400);
  });

  test('feeds the router and each controller from its queue in partial batches, with its own dead-letter queue and the sync queues it sends to', () => {
    const fns = byName(template.findResources('AWS::Lambda::Function'));
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping')).map((m) => m.Properties as { FunctionName: { Ref: string }; EventSourceArn: { 'Fn::GetAtt': [string, string] } });
    const consumers = functions.filter((f) => f.events || f.sync);
    expect(mappings).toHaveLength(consumers.length);
    for (const spec of consumers) {
      const queue = spec.events ? 'Events' : `Sync${fnName(spec.sync!.target)}`;
      const fn = fns[fnName(spec.name)]!;
      expect(mappings.filter((m) => m.FunctionName.Ref === fn.id)).toEqual([{ FunctionName: { Ref: fn.id }, EventSourceArn: { 'Fn::GetAtt': [expect.stringMatching(new RegExp(`^${queue}[0-9A-F]{8}$`)), 'Arn'] }, BatchSize: 10, FunctionResponseTypes: ['ReportBatchItemFailures'] }]);
      expect(refName(fn.Properties.Environment.Variables.OUTRIGGER_DEAD_LETTER_QUEUE_URL)).toBe(`${queue}DeadLetter`);
    }
    for (const spec of functions) {
      const env = fns[fnName(spec.name)]!.Properties.Environment.Variables as Record<string, unknown>;
      const sends = sendTargets(spec, functions);
      if (!sends.length) expect(env.OUTRIGGER_SYNC_QUEUES).toBeUndefined();
      else expect(joined(env.OUTRIGGER_SYNC_QUEUES)).toEqual(Object.fromEntries(sends.map((t) => [t, `Sync${fnName(t)}`])));
    }
    expect(joined(fns.Router!.Properties.Environment.Variables.OUTRIGGER_SYNC_QUEUES)).toEqual({ history: 'SyncHistory', storage: 'SyncStorage', map: 'SyncMap' });
    expect(joined(fns.History!.Properties.Environment.Variables.OUTRIGGER_SYNC_QUEUES)).toEqual({ truncate: 'SyncTruncate' });
  });

  test('serves the ingest function on an IAM-authenticated Function URL, queueing to the events queue', () => {
    const fns = byName(template.findResources('AWS::Lambda::Function'));
    const ingest = fns.Ingest!;
    template.resourceCountIs('AWS::Lambda::Url', 1);
    template.hasResourceProperties('AWS::Lambda::Url', { AuthType: 'AWS_IAM', TargetFunctionArn: { 'Fn::GetAtt': [ingest.id, 'Arn'] } });
    const env = ingest.Properties.Environment.Variables as Record<string, unknown>;
    expect(refName(env.OUTRIGGER_EVENT_QUEUE_URL)).toBe('Events');
    expect(refName(env.OUTRIGGER_DEAD_LETTER_QUEUE_URL)).toBe('EventsDeadLetter');
    // With AWS_IAM no resource policy opens it: callers need lambda:InvokeFunctionUrl (and InvokeFunction) in their own.
    expect(Object.values(template.findResources('AWS::Lambda::Permission')).filter((p) => JSON.stringify(p).includes(ingest.id))).toEqual([]);
    template.hasOutput('IngestUrl', { Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^IngestFunctionUrl'), 'FunctionUrl'] } });
  });

  test('gives the in-cluster forwarder a role for EKS Pod Identity from the configured clusters only', () => {
    const trust = (t: Template) => Object.values(byName(t.findResources('AWS::IAM::Role')).ForwarderRole!.Properties.AssumeRolePolicyDocument.Statement as Statement[]);
    expect(trust(template)).toEqual([{ Effect: 'Allow', Principal: { Service: 'pods.eks.amazonaws.com' }, Action: ['sts:AssumeRole', 'sts:TagSession'], Condition: { StringEquals: { 'aws:RequestTag/eks-cluster-name': ['prod'] } } }]);
    const narrowed = synth([cluster, { ...cluster, id: 'dr', access: { ...(cluster.access as Extract<ClusterConfig['access'], { kind: 'eks' }>), clusterName: 'prod-dr' } }], { forwarder: { namespace: 'outrigger', serviceAccount: 'forwarder' } });
    expect(trust(narrowed)[0]!.Condition).toEqual({
      StringEquals: { 'aws:RequestTag/eks-cluster-name': ['prod', 'prod-dr'], 'aws:RequestTag/kubernetes-namespace': ['outrigger'], 'aws:RequestTag/kubernetes-service-account': ['forwarder'] },
    });
    template.hasOutput('ForwarderRoleArn', { Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^ForwarderRole'), 'Arn'] } });
    template.hasOutput('EventsQueueUrl', { Value: { Ref: Match.stringLikeRegexp('^Events[0-9A-F]{8}$') } });
  });

  test('alarms on dead letters, function errors and old messages, to one topic, on one dashboard', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map((a) => a.Properties as Record<string, unknown> & { Dimensions: Array<{ Value: { Ref: string } }> });
    const topic = Object.keys(template.findResources('AWS::SNS::Topic'))[0];
    for (const a of alarms) expect(a.AlarmActions).toEqual([{ Ref: topic }]);
    const on = (metric: string) => alarms.filter((a) => a.MetricName === metric);
    const queues = byName(template.findResources('AWS::SQS::Queue'));
    const deadLetters = Object.entries(queues).filter(([n]) => n.endsWith('DeadLetter'));
    expect(on('ApproximateNumberOfMessagesVisible').map((a) => a.Dimensions[0]!.Value)).toEqual(deadLetters.map(([, q]) => ({ 'Fn::GetAtt': [q.id, 'QueueName'] })));
    for (const a of on('ApproximateNumberOfMessagesVisible')) expect(a).toMatchObject({ Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold' });
    const fns = byName(template.findResources('AWS::Lambda::Function'));
    expect(on('Errors').map((a) => a.Dimensions[0]!.Value.Ref).sort()).toEqual(Object.values(fns).map((f) => f.id).sort());
    for (const a of on('Errors')) expect(a).toMatchObject({ Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold', Period: 300, Statistic: 'Sum', EvaluationPeriods: 1 });
    expect(on('ApproximateAgeOfOldestMessage')).toHaveLength(Object.keys(queues).length - deadLetters.length);
    for (const a of on('ApproximateAgeOfOldestMessage')) expect(a).toMatchObject({ Threshold: 300, ComparisonOperator: 'GreaterThanThreshold' });
    expect(alarms).toHaveLength(on('ApproximateNumberOfMessagesVisible').length + on('Errors').length + on('ApproximateAgeOfOldestMessage').length);
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    const body = JSON.stringify(Object.values(template.findResources('AWS::CloudWatch::Dashboard'))[0]!.Properties.DashboardBody);
    for (const metric of ['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage', 'Errors']) expect(body).toContain(metric);
  });

  test('names each function and its code the way `sam local invoke -t cdk.out/<stack>.template.json <LogicalId>` reads them', async () => {
    const outdir = await mkdtemp(join(tmpdir(), 'outrigger-sam-'));
    try {
      // The app as `cdk synth` builds it (its own default context), without the CLI's context: it must not rely on it.
      const { app, stack } = outriggerApp({ outdir, context: { 'aws:cdk:bundling-stacks': [], 'outrigger:clusters': [cluster] } });
      app.synth();
      const t = JSON.parse(await readFile(join(outdir, `${stack.stackName}.template.json`), 'utf8')) as { Resources: Record<string, { Type: string; Metadata?: Record<string, unknown> }> };
      const fns = Object.entries(t.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::Function');
      expect(fns).toHaveLength(functions.length);
      for (const [, r] of fns) expect(r.Metadata).toMatchObject({ 'aws:asset:path': expect.any(String), 'aws:asset:property': 'Code' });
    } finally {
      await rm(outdir, { recursive: true, force: true });
    }
  });

  test('lets the map function invoke the named hook functions (and their versions) only; the example hooks deploy on request', () => {
    const t = synth([cluster], { mapHookFunctions: ['my-map-hook'], examples: true, env: { account: '111122223333', region: 'eu-west-1' } });
    const invoke = Object.entries(t.findResources('AWS::IAM::Policy')).flatMap(([id, p]) =>
      (p.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>).filter((st) => st.Action === 'lambda:InvokeFunction').map((st) => [id.replace(/ServiceRoleDefaultPolicy.*$/, ''), st.Resource]),
    );
    const arn = (name: string) => ({ 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:lambda:eu-west-1:111122223333:function:${name}`]] });
    expect(invoke).toEqual([['Map', ['my-map-hook', 'my-map-hook:*', 'outrigger-snapshot-schedule-map', 'outrigger-snapshot-schedule-map:*', 'outrigger-snapshot-schedule-tombstone', 'outrigger-snapshot-schedule-tombstone:*'].map(arn)]]);
    t.hasResourceProperties('AWS::Lambda::Function', { FunctionName: 'outrigger-snapshot-schedule-map', Handler: 'index.map' });
    // Without hooks named, no function may invoke any.
    expect(JSON.stringify(template.findResources('AWS::IAM::Policy'))).not.toContain('lambda:InvokeFunction');
  });

  test('refuses clusters reached any way but EKS IAM tokens or a token in Secrets Manager', () => {
    expect(() => synth([{ id: 'x', access: { kind: 'kubeconfig', path: '/home/me/.kube/config' } }])).toThrow('a deployed stack reaches clusters through EKS IAM tokens or a token in Secrets Manager');
  });

  test('a cluster outside EKS: every function that talks to clusters may read its token secret, and only that secret; ingest may not', () => {
    const arn = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem';
    const t = synth([cluster, { id: 'onprem', access: { kind: 'secret', server: 'https://k8s.onprem.example:6443', secretArn: arn } }]);
    const reads = Object.entries(t.findResources('AWS::IAM::Policy')).flatMap(([id, p]) =>
      (p.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>).filter((st) => st.Action === 'secretsmanager:GetSecretValue').map((st) => [id.replace(/ServiceRoleDefaultPolicy.*$/, ''), st.Resource]),
    );
    const readers = Object.fromEntries(reads);
    expect(Object.keys(readers).sort()).toEqual(['Heartbeat', 'History', 'Map', 'MapResync', 'Migrator', 'Router', 'Storage', 'StoragePoll', 'Truncate']);
    for (const resource of Object.values(readers)) expect(resource).toBe(`${arn}-??????`);
  });
});
