// The synthesized template, checked by cfn-lint against CloudFormation's resource specification (property
// names, value ranges, ARN and attribute shapes) beyond what CDK's types catch. The first run installs
// cfn-lint from PyPI into .cache/cfn-lint (about 40 s); later runs take a few seconds.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { outriggerApp } from '../../infra/app.ts';
import { cfnLint, formatFinding } from '../../local/cfn-lint.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';
import { eksCluster, onpremCluster } from './clusters.ts';

const eks = (id: string, region?: string): ClusterConfig => ({
  ...eksCluster(id, region ? { region } : {}),
  // Each reporter at its apiserver's own endpoint: reporters on EKS's balanced endpoint are refused.
  storage: {
    enabled: true,
    migrations: 'outrigger',
    reporters: [
      { id: 'apiserver-a', server: 'https://10.0.1.10' },
      { id: 'apiserver-b', server: 'https://10.0.2.10' },
    ],
  },
});

// Every error fails the test, and every warning but the project's IGNORED_CHECKS (see local/cfn-lint.ts).
test('cfn-lint finds no error and no warning in the synthesized template', async () => {
  const outdir = await mkdtemp(join(tmpdir(), 'outrigger-cfn-lint-'));
  try {
    // Everything the stack can hold: EKS clusters in the stack's region and another and one outside EKS (its token
    // in Secrets Manager), storage reporters, named hooks, the example's hooks, a forwarder elsewhere than the
    // default. The stack's region is the deploy's (no env), so access entries are made under a region condition.
    const { app, stack } = outriggerApp({
      outdir,
      context: {
        'aws:cdk:bundling-stacks': [],
        'outrigger:clusters': [eks('prod'), eks('dr', 'us-east-1'), onpremCluster()],
        'outrigger:mapHookFunctions': [{ function: 'my-map-hook', callers: [{ cluster: 'prod', kind: 'MapController', name: 'backups' }] }],
        'outrigger:examples': true,
        'outrigger:forwarderNamespace': 'outrigger',
        'outrigger:forwarderServiceAccount': 'forwarder',
        'outrigger:forwarderImage': true,
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
