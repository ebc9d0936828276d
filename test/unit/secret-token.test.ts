import { migratorAccess, parseClusters } from '../../shared/clusters.ts';
import { secretTokenSource } from '../../shared/kube/secret-token.ts';

describe('a cluster token in Secrets Manager', () => {
  const arn = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem-AbCdEf';

  test('is read once, kept for the TTL, and read again after it (a rotated token is picked up)', async () => {
    let now = 0;
    const values = ['first', 'second'];
    const reads: string[] = [];
    const source = secretTokenSource(arn, {
      ttlMs: 1000,
      now: () => now,
      read: async (id) => (reads.push(id), { SecretString: values[reads.length - 1] }),
    });
    expect(await Promise.all([source(), source()])).toEqual(['first', 'first']);
    now = 999;
    expect(await source()).toBe('first');
    now = 1000;
    expect(await source()).toBe('second');
    expect(reads).toEqual([arn, arn]);
  });

  test('may be the token itself or JSON with a token field; anything else names the secret and what to store', async () => {
    const from = (SecretString: string | undefined) => secretTokenSource(arn, { read: async () => ({ SecretString }) })();
    expect(await from('  abc.def  ')).toBe('abc.def');
    expect(await from('{"token": "xyz"}')).toBe('xyz');
    await expect(from(undefined)).rejects.toThrow(`secret ${arn} has no string value`);
    await expect(from('{"user": "x"}')).rejects.toThrow('is JSON without a "token" string field');
    await expect(from('{not json')).rejects.toThrow('looks like JSON but does not parse');
  });

  test('the cluster configuration names the secret by ARN, never the token', () => {
    const base = {
      id: 'onprem',
      access: { kind: 'secret', server: 'https://k8s.onprem.example:6443', secretArn: arn, migratorTokenSecretArn: `${arn}-migrator` },
    };
    expect(parseClusters(JSON.stringify([base]))[0]!.access).toEqual(base.access);
    expect(() => parseClusters(JSON.stringify([{ ...base, access: { ...base.access, secretArn: 'outrigger/onprem' } }]))).toThrow(
      'must be a Secrets Manager secret ARN',
    );
    expect(() => parseClusters(JSON.stringify([{ ...base, access: { ...base.access, token: 'abc' } }]))).toThrow(/token/);
    expect(() => parseClusters(JSON.stringify([{ ...base, access: { ...base.access, server: 'http://k8s' } }]))).toThrow(
      'must be an https URL',
    );
  });

  test('the migrator has a token of its own: required with storage migration on, and the one its client uses', () => {
    const migratorArn = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:outrigger/onprem-migrator';
    const access = { kind: 'secret', server: 'https://k8s.onprem.example:6443', secretArn: arn };
    expect(() => parseClusters(JSON.stringify([{ id: 'onprem', access }]))).toThrow(
      /cluster onprem: access\.migratorTokenSecretArn: .*storage migration/,
    );
    expect(() => parseClusters(JSON.stringify([{ id: 'onprem', access, storage: { migrations: 'in-tree' } }]))).toThrow(
      'access.migratorTokenSecretArn',
    );
    expect(() =>
      parseClusters(JSON.stringify([{ id: 'onprem', access: { ...access, migratorTokenSecretArn: 'onprem-migrator' } }])),
    ).toThrow('must be a Secrets Manager secret ARN');
    // Storage off: no migrator runs for the cluster, and none may act with the controllers' token.
    const [off] = parseClusters(JSON.stringify([{ id: 'onprem', access, storage: { enabled: false } }]));
    expect(() => migratorAccess(off!)).toThrow(/cluster onprem.*migratorTokenSecretArn/);
    const [on] = parseClusters(JSON.stringify([{ id: 'onprem', access: { ...access, migratorTokenSecretArn: migratorArn } }]));
    expect(migratorAccess(on!)).toEqual({ kind: 'secret', server: access.server, secretArn: migratorArn });
    // Other access kinds: the migrator's own access where configured (the local runtime), else the cluster's.
    const eks = {
      kind: 'eks',
      server: 'https://abc.gr7.eu-west-1.eks.amazonaws.com',
      caData: 'Q0E=',
      clusterName: 'prod',
      region: 'eu-west-1',
    };
    const [prod] = parseClusters(JSON.stringify([{ id: 'prod', access: eks }]));
    expect(migratorAccess(prod!)).toEqual(eks);
  });
});
