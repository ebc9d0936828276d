// The Outrigger construct as a user's CDK app uses it: in a stack of their own (not the repository's), with two
// clusters, a VPC, an alarm topic of theirs and the other props. Bundling is skipped, as in stack.test.ts.
/* eslint-disable max-lines -- the sections share userApp, logicalId and the two-cluster fixtures below, the construct as one user's app builds it */
import { App, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AwsSolutionsChecks } from 'cdk-nag';
import { functions } from '../../functions/index.ts';
import { Outrigger, type OutriggerProps } from '../../infra/index.ts';
import type { ClusterConfig } from '../../shared/clusters.ts';
import { CA_DATA, eksCluster } from './clusters.ts';

const ACCOUNT = '111122223333';
/** Functions that talk to clusters: all but the ingest, which only queues. */
const clusterFunctions = functions.filter((f) => !f.functionUrl).map((f) => f.name);
const pascal = (name: string) => name.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase());

function userApp(
  props: Partial<OutriggerProps> & Pick<OutriggerProps, 'clusters'>,
  region: string | null = 'eu-west-1',
): { stack: Stack; outrigger: Outrigger; template: Template } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Platform', region ? { env: { account: ACCOUNT, region } } : {});
  const outrigger = new Outrigger(stack, 'Outrigger', props);
  return { stack, outrigger, template: Template.fromStack(stack) };
}

/** The logical id of the resource at `path` (construct ids below the stack). */
function logicalId(stack: Stack, path: string): string {
  const child = stack.node
    .findChild('Outrigger')
    .node.findAll()
    .find((c) => c.node.path === `${stack.node.path}/Outrigger/${path}`);
  if (!child) throw new Error(`no construct at ${path}`);
  return stack.getLogicalId(child.node.defaultChild as never);
}

describe('the Outrigger construct in an app of its own, with two clusters', () => {
  // prod: EKS in the stack's region; dr: EKS in another region.
  const prod = eksCluster('prod');
  const dr = eksCluster('dr', { region: 'us-east-1', clusterName: 'prod-dr' });
  const vpc = (stack: Stack) =>
    ec2.Vpc.fromVpcAttributes(stack, 'Vpc', {
      vpcId: 'vpc-0123456789abcdef0',
      availabilityZones: ['eu-west-1a', 'eu-west-1b'],
      privateSubnetIds: ['subnet-0aaaaaaaaaaaaaaaa', 'subnet-0bbbbbbbbbbbbbbbb'],
    });
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Platform', { env: { account: ACCOUNT, region: 'eu-west-1' } });
  const topic = sns.Topic.fromTopicArn(stack, 'Pager', `arn:aws:sns:eu-west-1:${ACCOUNT}:pager`);
  const outrigger = new Outrigger(stack, 'Outrigger', {
    clusters: [prod, dr],
    vpc: vpc(stack),
    alarmTopic: topic,
    logRetention: logs.RetentionDays.ONE_WEEK,
    memorySize: 1024,
    tracing: lambda.Tracing.ACTIVE,
    removalPolicy: RemovalPolicy.DESTROY,
    forwarder: { namespace: 'platform-outrigger', serviceAccount: 'events-forwarder' },
    webhookAllow: ['hooks.platform.example', '10.20.0.0/16'],
  });
  const template = Template.fromStack(stack);
  const roleOf = (fn: string) => ({ 'Fn::GetAtt': [logicalId(stack, `${pascal(fn)}ServiceRole`), 'Arn'] });

  test('gives each function that talks to clusters an access entry to the in-region EKS cluster: the controllers group, the migrator also the migrators group', () => {
    const entries = Object.values(template.findResources('AWS::EKS::AccessEntry')).map(
      (r) => r.Properties as { ClusterName: string; PrincipalArn: unknown; KubernetesGroups: string[]; Type: string },
    );
    expect(entries).toHaveLength(clusterFunctions.length);
    expect(entries.map((e) => e.ClusterName)).toEqual(clusterFunctions.map(() => 'prod'));
    expect(entries.map((e) => ({ principal: e.PrincipalArn, groups: e.KubernetesGroups, type: e.Type }))).toEqual(
      clusterFunctions.map((fn) => ({
        principal: roleOf(fn),
        groups: fn === 'migrator' ? ['outrigger:controllers', 'outrigger:migrators'] : ['outrigger:controllers'],
        type: 'STANDARD',
      })),
    );
    // Neither the ingest's role nor the forwarder's is let in.
    expect(JSON.stringify(entries)).not.toContain(logicalId(stack, 'IngestServiceRole'));
    expect(JSON.stringify(entries)).not.toContain('ForwarderRole');
  });

  test("associates the in-region cluster's forwarder service account with its forwarder role through Pod Identity, and trusts only that service account", () => {
    template.resourcePropertiesCountIs('AWS::EKS::PodIdentityAssociation', {}, 1);
    template.hasResourceProperties('AWS::EKS::PodIdentityAssociation', {
      ClusterName: 'prod',
      Namespace: 'platform-outrigger',
      ServiceAccount: 'events-forwarder',
      RoleArn: { 'Fn::GetAtt': [logicalId(stack, 'Prod/ForwarderRole'), 'Arn'] },
    });
    const trust =
      template.toJSON().Resources[logicalId(stack, 'Dr/ForwarderRole')].Properties.AssumeRolePolicyDocument.Statement[0].Condition
        .StringEquals;
    expect(trust).toEqual({
      'aws:RequestTag/eks-cluster-arn': [
        { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:eks:us-east-1:${ACCOUNT}:cluster/prod-dr`]] },
      ],
      'aws:RequestTag/kubernetes-namespace': ['platform-outrigger'],
      'aws:RequestTag/kubernetes-service-account': ['events-forwarder'],
    });
  });

  test("outputs, under fixed names, each cluster's queues and forwarder role, and the roles a cluster in another region must be given access to", () => {
    const outputs = template.findOutputs('*');
    for (const name of [
      'ProdEventsQueueUrl',
      'ProdEventsDeadLetterQueueUrl',
      'ProdForwarderRoleArn',
      'DrEventsQueueUrl',
      'DrEventsDeadLetterQueueUrl',
      'DrForwarderRoleArn',
      'ControllerRoleArns',
      'MigratorRoleArn',
      'IngestUrl',
      'AlarmTopicArn',
    ]) {
      expect(Object.keys(outputs)).toContain(name);
    }
    const joined = outputs.ControllerRoleArns!.Value as { 'Fn::Join': [string, unknown[]] };
    expect(joined['Fn::Join'][0]).toBe(' ');
    expect(joined['Fn::Join'][1]).toEqual(clusterFunctions.filter((f) => f !== 'migrator').map(roleOf));
    expect(outputs.MigratorRoleArn!.Value).toEqual(roleOf('migrator'));
    expect(outputs.AlarmTopicArn!.Value).toBe(`arn:aws:sns:eu-west-1:${ACCOUNT}:pager`);
    expect(outrigger.clusters.get('prod')!.access).toBe('stack');
    expect(outrigger.clusters.get('dr')!.access).toBe('manual');
  });

  test('every security group and rule description is one EC2 accepts: at most 255 characters of its set', () => {
    // EC2 refuses any other (CloudFormation's F3031 for a group's): creating the group or rule, the deploy would fail.
    const ec2Text = /^[a-zA-Z0-9. _\-:/()#,@[\]+=&;{}!$*]{0,255}$/;
    const descriptions: string[] = [];
    type Rule = { Description?: string };
    for (const g of Object.values(template.findResources('AWS::EC2::SecurityGroup'))) {
      const p = g.Properties as { GroupDescription: string; SecurityGroupIngress?: Rule[]; SecurityGroupEgress?: Rule[] };
      descriptions.push(p.GroupDescription);
      for (const rule of [...(p.SecurityGroupIngress ?? []), ...(p.SecurityGroupEgress ?? [])])
        if (rule.Description) descriptions.push(rule.Description);
    }
    for (const type of ['AWS::EC2::SecurityGroupIngress', 'AWS::EC2::SecurityGroupEgress'])
      for (const r of Object.values(template.findResources(type)))
        if ((r.Properties as Rule).Description) descriptions.push((r.Properties as Rule).Description!);
    // The group's and its outbound rule's.
    expect(descriptions.length).toBeGreaterThanOrEqual(2);
    expect(descriptions.filter((d) => !ec2Text.test(d))).toEqual([]);
  });

  test("runs every function in the VPC's subnets with one security group, at the memory, tracing and log retention asked for", () => {
    const fns = Object.values(template.findResources('AWS::Lambda::Function'));
    expect(fns).toHaveLength(functions.length);
    const group = { 'Fn::GetAtt': [logicalId(stack, 'FunctionsSecurityGroup'), 'GroupId'] };
    for (const fn of fns) {
      expect(fn.Properties.VpcConfig).toEqual({
        SubnetIds: ['subnet-0aaaaaaaaaaaaaaaa', 'subnet-0bbbbbbbbbbbbbbbb'],
        SecurityGroupIds: [group],
      });
      expect(fn.Properties).toMatchObject({ MemorySize: 1024, TracingConfig: { Mode: 'Active' } });
    }
    template.resourcePropertiesCountIs('AWS::EC2::SecurityGroup', {}, 1);
    template.hasResourceProperties('AWS::EC2::SecurityGroup', {
      VpcId: 'vpc-0123456789abcdef0',
      SecurityGroupEgress: [{ CidrIp: '0.0.0.0/0', IpProtocol: '-1' }],
    });
    const logGroups = Object.values(template.findResources('AWS::Logs::LogGroup'));
    expect(logGroups).toHaveLength(functions.length);
    for (const g of logGroups) expect(g).toMatchObject({ Properties: { RetentionInDays: 7 }, DeletionPolicy: 'Delete' });
    template.hasResource('AWS::DynamoDB::GlobalTable', { DeletionPolicy: 'Delete' });
    // The alarms go to the user's topic; the construct makes none of its own.
    template.resourceCountIs('AWS::SNS::Topic', 0);
    for (const a of Object.values(template.findResources('AWS::CloudWatch::Alarm')))
      expect(a.Properties.AlarmActions).toEqual([`arn:aws:sns:eu-west-1:${ACCOUNT}:pager`]);
  });

  test("passes cdk-nag's AwsSolutions checks, each acknowledged rule with its reason in the construct", () => {
    const report = new AwsSolutionsChecks().validateScope(app);
    expect(report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.constructPath).join(', ')}`)).toEqual([]);
  });

  test('gives the map function the webhook allow-list, and no other function; refuses an entry it cannot read at synth', () => {
    const withList = Object.entries(template.findResources('AWS::Lambda::Function')).filter(
      ([, f]) => (f.Properties.Environment?.Variables as Record<string, unknown> | undefined)?.OUTRIGGER_WEBHOOK_ALLOW,
    );
    expect(withList.map(([id]) => id)).toEqual([logicalId(stack, pascal(functions.find((f) => f.callsHooks)!.name))]);
    expect(withList[0]![1].Properties.Environment.Variables.OUTRIGGER_WEBHOOK_ALLOW).toBe('["hooks.platform.example","10.20.0.0/16"]');
    expect(() => userApp({ clusters: [prod], webhookAllow: ['https://hooks.platform.example/'] })).toThrow(/neither a host name/);
  });

  test('with security groups given, uses those and makes none', () => {
    const app2 = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack2 = new Stack(app2, 'Platform', { env: { account: ACCOUNT, region: 'eu-west-1' } });
    const sg = ec2.SecurityGroup.fromSecurityGroupId(stack2, 'Sg', 'sg-0123456789abcdef0');
    new Outrigger(stack2, 'Outrigger', {
      clusters: [prod],
      vpc: vpc(stack2),
      securityGroups: [sg],
      vpcSubnets: { subnets: [ec2.Subnet.fromSubnetId(stack2, 'S', 'subnet-0cccccccccccccccc')] },
    });
    const t = Template.fromStack(stack2);
    t.resourceCountIs('AWS::EC2::SecurityGroup', 0);
    for (const fn of Object.values(t.findResources('AWS::Lambda::Function')))
      expect(fn.Properties.VpcConfig).toEqual({ SubnetIds: ['subnet-0cccccccccccccccc'], SecurityGroupIds: ['sg-0123456789abcdef0'] });
  });
});

describe('where the stack cannot give access', () => {
  test("a stack whose region is known only at deploy makes each cluster's access entries and association under a condition on its region", () => {
    const { template } = userApp({ clusters: [eksCluster('prod'), eksCluster('dr', { region: 'us-east-1' })] }, null);
    const conditions = template.toJSON().Conditions as Record<string, unknown>;
    expect(Object.values(conditions)).toEqual(
      expect.arrayContaining([
        { 'Fn::Equals': [{ Ref: 'AWS::Region' }, 'eu-west-1'] },
        { 'Fn::Equals': [{ Ref: 'AWS::Region' }, 'us-east-1'] },
      ]),
    );
    const byRegion = (region: string) => Object.entries(conditions).find(([, c]) => JSON.stringify(c).includes(region))![0];
    const entries = Object.values(template.findResources('AWS::EKS::AccessEntry'));
    expect(entries).toHaveLength(2 * clusterFunctions.length);
    for (const e of entries) expect(e.Condition).toBe(byRegion(e.Properties.ClusterName === 'prod' ? 'eu-west-1' : 'us-east-1'));
    for (const a of Object.values(template.findResources('AWS::EKS::PodIdentityAssociation')))
      expect(a.Condition).toBe(byRegion(a.Properties.ClusterName === 'prod' ? 'eu-west-1' : 'us-east-1'));
    template.hasOutput('ControllerRoleArns', {});
  });

  test('a cluster outside EKS gets no access entry and no forwarder role, and the role ARNs are outputs; all in-region, there are no such outputs', () => {
    const onprem: ClusterConfig = {
      id: 'onprem',
      access: {
        kind: 'secret',
        server: 'https://k8s.onprem.corp.internal:6443',
        caData: CA_DATA,
        secretArn: `arn:aws:secretsmanager:eu-west-1:${ACCOUNT}:secret:onprem`,
        migratorTokenSecretArn: `arn:aws:secretsmanager:eu-west-1:${ACCOUNT}:secret:onprem-migrator`,
      },
    };
    const { template } = userApp({ clusters: [onprem] });
    template.resourceCountIs('AWS::EKS::AccessEntry', 0);
    template.resourceCountIs('AWS::EKS::PodIdentityAssociation', 0);
    template.hasOutput('ControllerRoleArns', {});
    template.hasOutput('MigratorRoleArn', {});
    expect(Object.keys(template.findOutputs('OnpremForwarderRoleArn'))).toEqual([]);
    const inRegion = userApp({ clusters: [eksCluster('a'), eksCluster('b')] }).template;
    expect(Object.keys(inRegion.findOutputs('ControllerRoleArns'))).toEqual([]);
    expect(Object.keys(inRegion.findOutputs('MigratorRoleArn'))).toEqual([]);
    inRegion.resourceCountIs('AWS::EKS::AccessEntry', 2 * clusterFunctions.length);
    inRegion.resourceCountIs('AWS::EKS::PodIdentityAssociation', 2);
  });

  test('lets the map function invoke hook functions given as functions, with their versions', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Platform', { env: { account: ACCOUNT, region: 'eu-west-1' } });
    const hook = lambda.Function.fromFunctionArn(stack, 'Hook', `arn:aws:lambda:eu-west-1:${ACCOUNT}:function:team-hook`);
    new Outrigger(stack, 'Outrigger', {
      clusters: [eksCluster('prod')],
      mapHookFunctions: [
        { function: hook, callers: [{ namespace: 'team-a' }] },
        { function: 'named-hook', callers: [{ kind: 'MapController', name: 'backups' }] },
      ],
    });
    const invoke = Object.values(Template.fromStack(stack).findResources('AWS::IAM::Policy')).flatMap((p) =>
      (p.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>).filter(
        (st) => st.Action === 'lambda:InvokeFunction',
      ),
    );
    expect(invoke).toHaveLength(1);
    expect(invoke[0]!.Resource).toEqual([
      `arn:aws:lambda:eu-west-1:${ACCOUNT}:function:team-hook`,
      `arn:aws:lambda:eu-west-1:${ACCOUNT}:function:team-hook:*`,
      { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:lambda:eu-west-1:${ACCOUNT}:function:named-hook`]] },
      { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:lambda:eu-west-1:${ACCOUNT}:function:named-hook:*`]] },
    ]);
  });
});

describe('configuration refused at synth, naming the cluster and the field', () => {
  const refused = (clusters: unknown[]) => () => userApp({ clusters: clusters as ClusterConfig[] });
  const prod = eksCluster('prod');

  test.each<[string, unknown[], string]>([
    [
      'the placeholder cluster cdk.json used to hold',
      [
        {
          id: 'example',
          access: {
            kind: 'eks',
            server: 'https://EXAMPLE0123456789.gr7.eu-west-1.eks.amazonaws.com',
            caData: 'UkVQTEFDRSBXSVRIIFRIRSBDTFVTVEVSIENB',
            clusterName: 'example',
            region: 'eu-west-1',
          },
        },
      ],
      'cluster configuration: cluster example: access.server: https://EXAMPLE0123456789.gr7.eu-west-1.eks.amazonaws.com is not an EKS endpoint',
    ],
    [
      'CA data that is no certificate',
      [{ ...prod, access: { ...prod.access, caData: 'UkVQTEFDRSBXSVRIIFRIRSBDTFVTVEVSIENB' } }],
      'cluster configuration: cluster prod: access.caData: is not a base64-encoded PEM certificate',
    ],
    [
      'an endpoint in another region than the one named',
      [{ ...prod, access: { ...prod.access, region: 'eu-central-1' } }],
      'cluster configuration: cluster prod: access.region: is eu-central-1, but the endpoint',
    ],
    [
      'a field the configuration does not have',
      [prod, { ...eksCluster('dr'), maxConcurency: 10 }],
      'cluster configuration: cluster dr: maxConcurency: Unrecognized key',
    ],
    [
      'a field of the access the configuration does not have',
      [{ ...prod, access: { ...prod.access, roleArn: 'arn:aws:iam::111122223333:role/x' } }],
      'cluster configuration: cluster prod: access.roleArn: Unrecognized key',
    ],
    [
      'a server in a domain reserved for examples',
      [
        {
          id: 'onprem',
          access: {
            kind: 'secret',
            server: 'https://k8s.example.com:6443',
            secretArn: `arn:aws:secretsmanager:eu-west-1:${ACCOUNT}:secret:t`,
            migratorTokenSecretArn: `arn:aws:secretsmanager:eu-west-1:${ACCOUNT}:secret:m`,
          },
        },
      ],
      'cluster configuration: cluster onprem: access.server: https://k8s.example.com:6443 is in a domain reserved for examples',
    ],
    [
      'a kubeconfig',
      [{ id: 'laptop', access: { kind: 'kubeconfig' } }],
      'cluster configuration: cluster laptop: access.kind: a deployed stack reaches clusters through EKS IAM tokens or a token in Secrets Manager, not kubeconfig',
    ],
    [
      'one EKS cluster twice',
      [prod, { ...prod, id: 'prod-again' }],
      'cluster configuration: cluster prod-again: access.clusterName: cluster prod is EKS cluster prod in eu-west-1 too',
    ],
    ['no cluster', [], 'cluster configuration: (top): names no cluster'],
  ])('%s', (_, clusters, message) => {
    expect(refused(clusters)).toThrow(message);
  });
});

test('is the package entry outrigger/infra (package.json "exports")', async () => {
  const entry: { Outrigger: unknown } = await import('outrigger/infra');
  expect(entry.Outrigger).toBe(Outrigger);
});

test("builds the forwarder's image for one platform, when asked for one, as an asset, and outputs its URI; synth needs no Docker", () => {
  const docker = process.env.CDK_DOCKER;
  // Any call to Docker at synth would fail: the CDK runs this instead of `docker`.
  process.env.CDK_DOCKER = '/nonexistent/docker';
  try {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, outdir: mkdtempSync(join(tmpdir(), 'outrigger-image-')) });
    const stack = new Stack(app, 'Platform', { env: { account: ACCOUNT, region: 'eu-west-1' } });
    new Outrigger(stack, 'Outrigger', { clusters: [eksCluster('prod')], forwarderImage: { platforms: [Platform.LINUX_ARM64] } });
    const assembly = app.synth();
    const images = Object.values(
      (
        JSON.parse(readFileSync(join(assembly.directory, 'Platform.assets.json'), 'utf8')) as {
          dockerImages: Record<string, { source: { directory: string; dockerFile: string; platform: string } }>;
        }
      ).dockerImages,
    );
    expect(images.map((i) => ({ dockerFile: i.source.dockerFile, platform: i.source.platform }))).toEqual([
      { dockerFile: 'forwarder/Dockerfile', platform: 'linux/arm64' },
    ]);
    // Staged: what the Dockerfile copies, not the whole project.
    expect(readdirSync(join(assembly.directory, images[0]!.source.directory)).sort()).toEqual([
      'forwarder',
      'functions',
      'package-lock.json',
      'package.json',
      'shared',
    ]);
    const uri = Template.fromStack(stack).findOutputs('ForwarderImageUri').ForwarderImageUri!.Value as { 'Fn::Sub': string };
    expect(uri['Fn::Sub']).toMatch(
      new RegExp(
        `^${ACCOUNT}\\.dkr\\.ecr\\.eu-west-1\\.\\$\\{AWS::URLSuffix\\}/cdk-[a-z0-9]+-container-assets-${ACCOUNT}-eu-west-1:[0-9a-f]{64}$`,
      ),
    );
  } finally {
    if (docker === undefined) delete process.env.CDK_DOCKER;
    else process.env.CDK_DOCKER = docker;
  }
});

describe("the forwarder's image for x86 and Graviton nodes (the default)", () => {
  const docker = process.env.CDK_DOCKER;
  // Any call to Docker at synth would fail: the CDK runs this instead of `docker`.
  beforeAll(() => (process.env.CDK_DOCKER = '/nonexistent/docker'));
  afterAll(() => {
    if (docker === undefined) delete process.env.CDK_DOCKER;
    else process.env.CDK_DOCKER = docker;
  });
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, outdir: mkdtempSync(join(tmpdir(), 'outrigger-image-')) });
  const stack = new Stack(app, 'Platform', { env: { account: ACCOUNT, region: 'eu-west-1' } });
  const vpc = ec2.Vpc.fromVpcAttributes(stack, 'Vpc', {
    vpcId: 'vpc-0123456789abcdef0',
    availabilityZones: ['eu-west-1a'],
    privateSubnetIds: ['subnet-0aaaaaaaaaaaaaaaa'],
  });
  new Outrigger(stack, 'Outrigger', { clusters: [eksCluster('prod')], vpc, tracing: lambda.Tracing.ACTIVE, forwarderImage: {} });
  const template = Template.fromStack(stack);
  const assets = () =>
    (
      JSON.parse(readFileSync(join(app.synth().directory, 'Platform.assets.json'), 'utf8')) as {
        dockerImages: Record<string, { source: { dockerFile: string; platform: string } }>;
      }
    ).dockerImages;

  test('is an asset per platform, and an index over them written by a custom resource, output by digest', () => {
    const images = assets();
    expect(Object.values(images).map((i) => i.source)).toEqual([
      expect.objectContaining({ dockerFile: 'forwarder/Dockerfile', platform: 'linux/amd64' }),
      expect.objectContaining({ dockerFile: 'forwarder/Dockerfile', platform: 'linux/arm64' }),
    ]);
    const [amd, arm] = Object.keys(images);
    const index = Object.entries(template.findResources('Custom::OutriggerImageIndex'));
    expect(index).toHaveLength(1);
    const props = index[0]![1].Properties as { RepositoryUri: unknown; Tag: string; Images: unknown };
    expect(props.RepositoryUri).toEqual({
      'Fn::Join': [
        '',
        [
          `${ACCOUNT}.dkr.ecr.eu-west-1.`,
          { Ref: 'AWS::URLSuffix' },
          expect.stringMatching(/^\/cdk-[a-z0-9]+-container-assets-111122223333-eu-west-1$/),
        ],
      ],
    });
    expect(props.Images).toEqual([
      { Platform: 'linux/amd64', Tag: amd },
      { Platform: 'linux/arm64', Tag: arm },
    ]);
    // Fixed by the two assets, so in the template: a change of either names another index.
    expect(props.Tag).toMatch(/^index-[0-9a-f]{64}$/);
    expect(template.findOutputs('ForwarderImageUri').ForwarderImageUri!.Value).toEqual({ 'Fn::GetAtt': [index[0]![0], 'ImageUri'] });
  });

  test('the index function reads the images and writes the index in the asset repository only, outside the VPC and untraced', () => {
    const fn = Object.values(template.findResources('AWS::Lambda::Function')).find((f) =>
      String(f.Properties.Description).startsWith("Writes the index over the forwarder image's platforms"),
    )!;
    expect(fn.Properties.VpcConfig).toBeUndefined();
    expect(fn.Properties.TracingConfig).toBeUndefined();
    const roleId = (fn.Properties.Role as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0];
    const statements = Object.values(template.findResources('AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[]);
    const repositoryArn = {
      'Fn::Join': [
        '',
        [
          'arn:',
          { Ref: 'AWS::Partition' },
          expect.stringMatching(/^:ecr:eu-west-1:111122223333:repository\/cdk-[a-z0-9]+-container-assets-111122223333-eu-west-1$/),
        ],
      ],
    };
    expect(statements.map((s) => ({ actions: s.Action, resource: s.Resource }))).toEqual([
      { actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resource: expect.anything() },
      { actions: ['ecr:BatchGetImage', 'ecr:GetDownloadUrlForLayer', 'ecr:PutImage'], resource: repositoryArn },
      { actions: 'ecr:GetAuthorizationToken', resource: '*' },
    ]);
    // Its role has none of the controllers' grants: no managed policy (the VPC's), no table, no secret.
    const role = template.toJSON().Resources[roleId];
    expect(role.Properties.ManagedPolicyArns).toBeUndefined();
  });

  test("passes cdk-nag's AwsSolutions checks, each acknowledged rule with its reason in the construct", () => {
    const report = new AwsSolutionsChecks().validateScope(app);
    expect(report.violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.constructPath).join(', ')}`)).toEqual([]);
  });

  test('refuses a platform named twice, and the single `platform` prop it replaced, by name', () => {
    const again = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Again', {
      env: { account: ACCOUNT, region: 'eu-west-1' },
    });
    expect(
      () =>
        new Outrigger(again, 'Outrigger', {
          clusters: [eksCluster('prod')],
          forwarderImage: { platforms: [Platform.LINUX_ARM64, Platform.LINUX_ARM64] },
        }),
    ).toThrow('forwarderImage.platforms: names linux/arm64 twice');
    const old = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Old', {
      env: { account: ACCOUNT, region: 'eu-west-1' },
    });
    // As a JavaScript app written for the earlier prop passes it, unchecked by TypeScript.
    const legacy = { platform: Platform.LINUX_ARM64 } as unknown as OutriggerProps['forwarderImage'];
    expect(() => new Outrigger(old, 'Outrigger', { clusters: [eksCluster('prod')], forwarderImage: legacy })).toThrow(
      'forwarderImage.platform is now forwarderImage.platforms: a list',
    );
  });
});
