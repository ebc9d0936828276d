// cdk-nag's AwsSolutions pack over the repository's stack with everything it can hold (EKS clusters in and out of
// its region, one outside EKS, the example hooks): no finding may remain. Each rule the construct acknowledges
// says why where infra/ acknowledges it (Validations.of(...).acknowledge, which cdk-nag reads). The construct in
// a VPC with tracing is checked in outrigger-construct.test.ts.
import { App } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { OutriggerStack } from '../../infra/stack.ts';
import { eksCluster } from './clusters.ts';

test('AwsSolutions finds nothing unacknowledged', () => {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const onprem = {
    id: 'onprem',
    access: {
      kind: 'secret' as const,
      server: 'https://k8s.onprem.corp.internal:6443',
      secretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:onprem',
      migratorTokenSecretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:onprem-migrator',
    },
  };
  new OutriggerStack(app, 'Nag', {
    clusters: [eksCluster('prod'), eksCluster('dr', { region: 'us-east-1' }), onprem],
    examples: true,
    mapHookFunctions: [{ function: 'my-hook', callers: [{ cluster: 'prod', kind: 'MapController', name: 'backups' }] }],
    env: { account: '111122223333', region: 'eu-west-1' },
  });
  const report = new AwsSolutionsChecks().validateScope(app);
  expect(report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.constructPath).join(', ')}`)).toEqual([]);
});
