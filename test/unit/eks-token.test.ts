import { EKS_TOKEN_PREFIX, eksToken, eksTokenSource, stsHostname } from '../../shared/kube/index.ts';

const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', sessionToken: 'session' };

describe('EKS IAM tokens', () => {
  test('are a presigned STS GetCallerIdentity URL bound to the cluster by a signed x-k8s-aws-id header', async () => {
    const token = await eksToken({ clusterName: 'prod', region: 'eu-west-1', credentials, now: () => new Date('2026-11-22T10:00:00Z') });
    expect(token.startsWith(EKS_TOKEN_PREFIX)).toBe(true);
    const encoded = token.slice(EKS_TOKEN_PREFIX.length);
    expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/); // base64url, unpadded
    const url = new URL(Buffer.from(encoded, 'base64url').toString('utf8'));
    expect(url.origin).toBe('https://sts.eu-west-1.amazonaws.com');
    const q = url.searchParams;
    expect(q.get('Action')).toBe('GetCallerIdentity');
    expect(q.get('Version')).toBe('2011-06-15');
    expect(q.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(q.get('X-Amz-Credential')).toBe('AKIDEXAMPLE/20261122/eu-west-1/sts/aws4_request');
    expect(q.get('X-Amz-Date')).toBe('20261122T100000Z');
    expect(q.get('X-Amz-Expires')).toBe('60');
    expect(q.get('X-Amz-SignedHeaders')).toBe('host;x-k8s-aws-id');
    expect(q.get('X-Amz-Security-Token')).toBe('session');
    expect(q.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
  });

  test('differ per cluster, and a source reuses one token instead of signing per request', async () => {
    const at = () => new Date('2026-11-22T10:00:00Z');
    const a = await eksToken({ clusterName: 'a', region: 'us-east-1', credentials, now: at });
    const b = await eksToken({ clusterName: 'b', region: 'us-east-1', credentials, now: at });
    expect(a).not.toBe(b);
    let calls = 0;
    const source = eksTokenSource({ clusterName: 'a', region: 'us-east-1', credentials: async () => (calls++, credentials) });
    const [t1, t2] = await Promise.all([source(), source()]);
    expect(t1).toBe(t2);
    expect(await source()).toBe(t1);
    expect(calls).toBe(1);
  });

  test("are signed for the STS host of the cluster's partition: China regions answer on amazonaws.com.cn", async () => {
    expect(stsHostname('eu-west-1')).toBe('sts.eu-west-1.amazonaws.com');
    expect(stsHostname('us-gov-west-1')).toBe('sts.us-gov-west-1.amazonaws.com');
    expect(stsHostname('cn-north-1')).toBe('sts.cn-north-1.amazonaws.com.cn');
    expect(stsHostname('cn-northwest-1')).toBe('sts.cn-northwest-1.amazonaws.com.cn');
    const token = await eksToken({ clusterName: 'prod', region: 'cn-north-1', credentials, now: () => new Date('2026-11-22T10:00:00Z') });
    const url = new URL(Buffer.from(token.slice(EKS_TOKEN_PREFIX.length), 'base64url').toString('utf8'));
    expect(url.origin).toBe('https://sts.cn-north-1.amazonaws.com.cn');
    expect(url.searchParams.get('X-Amz-Credential')).toBe('AKIDEXAMPLE/20261122/cn-north-1/sts/aws4_request');
  });
});
