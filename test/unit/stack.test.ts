// The synthesized CloudFormation template, checked with CDK's assertions (bundling skipped: the bundle
// itself is measured by bench/bundle).
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { functions } from '../../functions/index.ts';
import { OutriggerStack, type OutriggerStackProps } from '../../infra/stack.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';

const cluster: ClusterConfig = {
  id: 'prod',
  access: { kind: 'eks', server: 'https://x.gr7.eu-west-1.eks.amazonaws.com', caData: 'Q0E=', clusterName: 'prod', region: 'eu-west-1' },
};

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

  test('grants each function only the table actions its code performs, on the table alone', () => {
    const policies = template.findResources('AWS::IAM::Policy');
    const byFunction = Object.fromEntries(
      Object.entries(policies).map(([id, p]) => [id.replace(/ServiceRoleDefaultPolicy.*$/, ''), p.Properties.PolicyDocument.Statement as Array<{ Action: string | string[]; Resource: unknown }>]),
    );
    const onTable = (actions: string[]) => [{ Action: actions, Effect: 'Allow', Resource: { 'Fn::GetAtt': [expect.stringMatching(/^State/), 'Arn'] } }];
    expect(byFunction).toEqual({
      Heartbeat: onTable(['dynamodb:GetItem', 'dynamodb:PutItem']),
      History: onTable(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:ConditionCheckItem']),
      Truncate: onTable(['dynamodb:GetItem', 'dynamodb:UpdateItem']),
      StoragePoll: onTable(['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem']),
      Storage: onTable(['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:ConditionCheckItem']),
      Migrator: [{ ...onTable([])[0]!, Action: 'dynamodb:UpdateItem' }],
      Map: onTable(['dynamodb:GetItem', 'dynamodb:PutItem']),
    });
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

  test('refuses clusters reached any way but EKS IAM tokens', () => {
    expect(() => synth([{ id: 'x', access: { kind: 'kubeconfig', path: '/home/me/.kube/config' } }])).toThrow('a deployed stack reaches clusters through EKS IAM tokens');
  });
});
