// The synthesized template, checked by cfn-lint against CloudFormation's resource specification (property
// names, value ranges, ARN and attribute shapes) beyond what CDK's types catch. The first run installs
// cfn-lint from PyPI into .cache/cfn-lint (about 40 s); later runs take a few seconds.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { outriggerApp } from '../../infra/app.ts';
import { cfnLint, formatFinding } from '../../local/cfn-lint.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';

const eks = (id: string): ClusterConfig => ({
  id,
  access: { kind: 'eks', server: `https://${id}.gr7.eu-west-1.eks.amazonaws.com`, caData: 'Q0E=', clusterName: id, region: 'eu-west-1' },
  storage: { enabled: true, migrations: 'outrigger', reporters: [{ id: 'apiserver-a' }, { id: 'apiserver-b' }] },
});

// Every error fails the test, and every warning but the project's IGNORED_CHECKS (see local/cfn-lint.ts).
test('cfn-lint finds no error and no warning in the synthesized template', async () => {
  const outdir = await mkdtemp(join(tmpdir(), 'outrigger-cfn-lint-'));
  try {
    // Everything the stack can hold: two EKS clusters and one outside EKS (its token in Secrets Manager), storage
    // reporters, named hooks, the example's hooks, a narrowed forwarder.
    const { app, stack } = outriggerApp({
      outdir,
      context: {
        'aws:cdk:bundling-stacks': [],
        'outrigger:clusters': [eks('prod'), eks('dr'), { id: 'onprem', access: { kind: 'secret', server: 'https://k8s.onprem.example:6443', secretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem', migratorTokenSecretArn: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem-migrator' } }],
        'outrigger:mapHookFunctions': ['my-map-hook'],
        'outrigger:examples': true,
        'outrigger:forwarderNamespace': 'outrigger',
        'outrigger:forwarderServiceAccount': 'forwarder',
      },
    });
    app.synth();
    const result = await cfnLint([join(outdir, `${stack.stackName}.template.json`)]);
    expect(result.findings.map(formatFinding)).toEqual([]);
    expect(result.code).toBe(0);
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}, 300_000);
