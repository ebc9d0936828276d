import { parseClusters } from '../../shared/clusters.ts';
import { connect } from '../../shared/kube/index.ts';
import { itemKey } from '../../shared/state/index.ts';

describe('cluster configuration', () => {
  const eks = { id: 'prod', access: { kind: 'eks', server: 'https://abc.gr7.eu-west-1.eks.amazonaws.com', caData: 'Q0E=', clusterName: 'prod', region: 'eu-west-1' } };

  test('accepts EKS and kubeconfig access', () => {
    expect(parseClusters(JSON.stringify([eks, { id: 'local', access: { kind: 'kubeconfig' } }])).map((c) => c.id)).toEqual(['prod', 'local']);
  });

  test.each([
    ['not json', 'cluster configuration is not JSON'],
    ['[]', 'cluster configuration: (top): names no cluster'],
    [JSON.stringify([{ ...eks, id: 'Prod' }]), 'cluster configuration: 0.id: must be a DNS label'],
    [JSON.stringify([{ ...eks, access: { ...eks.access, region: 'europe' } }]), 'cluster configuration: 0.access.region: must be an AWS region'],
    [JSON.stringify([eks, eks]), 'cluster id prod appears twice'],
    // A bearer token in the function's environment would be a plain-text secret: not accepted.
    [JSON.stringify([{ id: 'x', access: { kind: 'token', server: 'https://x', token: 'secret' } }]), 'cluster configuration: 0.access.kind'],
  ])('rejects %s', (json, message) => {
    expect(() => parseClusters(json)).toThrow(message);
  });

  test('an explicit server must be https and a token must not be empty', () => {
    expect(() => connect({ kind: 'token', server: 'http://10.0.0.1', token: 't' })).toThrow('must use https');
    expect(() => connect({ kind: 'token', server: 'https://10.0.0.1', token: ' ' })).toThrow('the bearer token is empty');
    expect(connect({ kind: 'token', server: 'https://10.0.0.1:6443/', token: 't' }).server).toBe('https://10.0.0.1:6443');
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
    const kube = connect({ kind: 'kubeconfig', path }, { retry: { retries: 5, minDelayMs: 1000 } });
    const started = Date.now();
    await expect(kube.getPath('/version')).rejects.toThrow(/HTTP protocol is not allowed/);
    expect(kube.stats.total).toBe(1);
    expect(Date.now() - started).toBeLessThan(900);
  });
});
