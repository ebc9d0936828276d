import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clustersFromEnv, parseClusters } from '../../shared/clusters.ts';
import { connect } from '../../shared/kube/index.ts';
import { itemKey } from '../../shared/state/index.ts';

describe('cluster configuration', () => {
  const eks = {
    id: 'prod',
    access: {
      kind: 'eks',
      server: 'https://abc.gr7.eu-west-1.eks.amazonaws.com',
      caData: 'Q0E=',
      clusterName: 'prod',
      region: 'eu-west-1',
    },
  };

  test('accepts an EKS cluster in a region of any partition', () => {
    for (const region of ['eu-west-1', 'cn-north-1', 'us-gov-west-1', 'us-isob-east-1', 'eusc-de-east-1', 'ap-southeast-5']) {
      expect(parseClusters(JSON.stringify([{ ...eks, access: { ...eks.access, region } }]))[0]!.access).toMatchObject({ region });
    }
  });

  test('accepts EKS and kubeconfig access', () => {
    expect(parseClusters(JSON.stringify([eks, { id: 'local', access: { kind: 'kubeconfig' } }])).map((c) => c.id)).toEqual([
      'prod',
      'local',
    ]);
  });

  test.each([
    ['not json', 'cluster configuration is not JSON'],
    ['[]', 'cluster configuration: (top): names no cluster'],
    [JSON.stringify([{ ...eks, id: 'Prod' }]), 'cluster configuration: cluster Prod: id: must be a DNS label'],
    [
      JSON.stringify([{ ...eks, access: { ...eks.access, region: 'europe' } }]),
      'cluster configuration: cluster prod: access.region: must be an AWS region',
    ],
    [JSON.stringify([eks, eks]), 'cluster id prod appears twice'],
    // A bearer token in the function's environment would be a plain-text secret: not accepted.
    [
      JSON.stringify([{ id: 'x', access: { kind: 'token', server: 'https://x', token: 'secret' } }]),
      'cluster configuration: cluster x: access.kind',
    ],
  ])('rejects %s', (json, message) => {
    expect(() => parseClusters(json)).toThrow(message);
  });

  test('an explicit server must be https and a token must not be empty', async () => {
    expect(() => connect({ kind: 'token', server: 'http://10.0.0.1', token: 't' })).toThrow('must use https');
    expect(() => connect({ kind: 'token', server: 'https://10.0.0.1', token: ' ' })).toThrow('the bearer token is empty');
    await expect(connect({ kind: 'token', server: 'https://10.0.0.1:6443/', token: 't' }).endpoint()).resolves.toEqual({
      server: 'https://10.0.0.1:6443',
      defaultNamespace: undefined,
    });
  });
});

describe('the cluster configuration a process is given', () => {
  const json = JSON.stringify([{ id: 'prod', access: { kind: 'kubeconfig' } }]);
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-clusters-'));
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };

  test('is read from OUTRIGGER_CLUSTERS, or from the file OUTRIGGER_CLUSTERS_FILE names', () => {
    expect(clustersFromEnv({ OUTRIGGER_CLUSTERS: json }).map((c) => c.id)).toEqual(['prod']);
    expect(clustersFromEnv({ OUTRIGGER_CLUSTERS_FILE: file('clusters.json', json) }).map((c) => c.id)).toEqual(['prod']);
  });

  test.each([
    [
      'neither is set',
      {},
      'neither OUTRIGGER_CLUSTERS (the cluster configuration as JSON) nor OUTRIGGER_CLUSTERS_FILE (a file holding it) is set',
    ],
    [
      'both are set',
      { OUTRIGGER_CLUSTERS: json, OUTRIGGER_CLUSTERS_FILE: '/opt/outrigger/clusters.json' },
      'OUTRIGGER_CLUSTERS and OUTRIGGER_CLUSTERS_FILE (/opt/outrigger/clusters.json) are both set: set one',
    ],
    [
      'the variable is not a configuration',
      { OUTRIGGER_CLUSTERS: '[]' },
      'OUTRIGGER_CLUSTERS: cluster configuration: (top): names no cluster',
    ],
    [
      'the file is missing',
      { OUTRIGGER_CLUSTERS_FILE: '/nonexistent/clusters.json' },
      'OUTRIGGER_CLUSTERS_FILE /nonexistent/clusters.json: cannot read it: ENOENT',
    ],
  ])('is refused, naming the variable, when %s', (_, env, message) => {
    expect(() => clustersFromEnv(env)).toThrow(message);
  });

  test('is refused, naming the variable and the file, when the file holds no configuration', () => {
    const bad = file('bad.json', '{"id":');
    expect(() => clustersFromEnv({ OUTRIGGER_CLUSTERS_FILE: bad })).toThrow(
      `OUTRIGGER_CLUSTERS_FILE ${bad}: cluster configuration is not JSON`,
    );
    const wrong = file('wrong.json', JSON.stringify([{ id: 'Prod', access: { kind: 'kubeconfig' } }]));
    expect(() => clustersFromEnv({ OUTRIGGER_CLUSTERS_FILE: wrong })).toThrow(
      `OUTRIGGER_CLUSTERS_FILE ${wrong}: cluster configuration: cluster Prod: id: must be a DNS label`,
    );
  });
});

describe('state keys', () => {
  test('are scoped by cluster and refuse ambiguous ids', () => {
    expect(itemKey({ cluster: 'c1', kind: 'lease', name: 'poller' })).toEqual({ pk: { S: 'c1#lease' }, sk: { S: 'poller' } });
    expect(() => itemKey({ cluster: 'a#b', kind: 'lease', name: 'x' })).toThrow("must not contain '#'");
    expect(() => itemKey({ cluster: 'c', kind: '', name: 'x' })).toThrow('state key: kind is empty');
  });
});

describe('a configuration error', () => {
  test('fails at once instead of being retried as if the apiserver had not answered', async () => {
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const path = join(mkdtempSync(join(tmpdir(), 'kc-')), 'config');
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'c',
        clusters: [{ name: 'c', cluster: { server: 'http://127.0.0.1:1' } }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      }),
    );
    // A retry would wait 10 s; the first request also loads client-node (kubeconfig access loads it on first use),
    // which takes a second or so under jest.
    const kube = connect({ kind: 'kubeconfig', path }, { retry: { retries: 5, minDelayMs: 10_000 } });
    const started = Date.now();
    await expect(kube.getPath('/version')).rejects.toThrow(/HTTP protocol is not allowed/);
    expect(kube.stats.total).toBe(1);
    expect(Date.now() - started).toBeLessThan(8_000);
  });
});

describe('kubeconfig access in a Lambda bundle', () => {
  test('fails with an error that says why: the package that reads kubeconfigs is not deployed', async () => {
    const { execFileSync } = await import('node:child_process');
    const { mkdtempSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const { build } = await import('esbuild');
    const { projectRoot } = await import('../../local/paths.ts');
    const { lambdaBuildOptions } = await import('../../scripts/bundle.ts');
    // Outside the project, as in Lambda: nothing but the bundle.
    const dir = mkdtempSync(join(tmpdir(), 'outrigger-lambda-'));
    const bundle = join(dir, 'index.js');
    await build(lambdaBuildOptions('shared/kube/index.ts', dir));
    const script = `const { connect } = await import(${JSON.stringify(bundle)}); const kube = connect({ kind: 'kubeconfig' });
      await kube.getPath('/version').then(() => console.log('answered'), (err) => console.log(JSON.stringify({ message: err.message, requests: kube.stats.total })));`;
    const out = execFileSync(join(projectRoot, 'node_modules', 'node', 'bin', 'node'), ['--input-type=module', '-e', script], {
      cwd: dir,
      encoding: 'utf8',
    });
    const { message, requests } = JSON.parse(out) as { message: string; requests: number };
    expect(message).toMatch(
      /^kubeconfig access is for local use .*: a deployed function reaches its clusters with `eks` or `secret` access$/,
    );
    expect(requests).toBe(1);
  });
});
