import fc from 'fast-check';
import { EnvelopeError, MAX_ENVELOPE_BYTES, deduplicationId, makeEnvelope, messageGroupId, parseEnvelope, watchEventType } from '../../shared/envelope/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const object = (extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 'web', namespace: 'prod', uid: 'u-1', resourceVersion: '42', ...extra },
  spec: { replicas: 3 },
});

const valid = () => makeEnvelope({ cluster: 'east-1', type: 'modified', object: object(), oldObject: object({ resourceVersion: '41' }), source: 'outrigger://east-1/forwarder', time: new Date('2026-11-22T00:00:00Z') });

describe('the CloudEvents envelope', () => {
  test('is CloudEvents 1.0 structured JSON with the cluster as an extension attribute', () => {
    expect(valid()).toEqual({
      specversion: '1.0',
      id: 'east-1/u-1/42/modified',
      source: 'outrigger://east-1/forwarder',
      type: 'dev.outrigger.watch.modified',
      time: '2026-11-22T00:00:00.000Z',
      subject: 'apps/v1/StatefulSet/prod/web',
      datacontenttype: 'application/json',
      cluster: 'east-1',
      data: { object: object(), oldObject: object({ resourceVersion: '41' }) },
    });
    expect(watchEventType(valid())).toBe('modified');
  });

  test.each([
    ['data.object.metadata.uid', (e: Record<string, any>) => delete e.data.object.metadata.uid], // eslint-disable-line @typescript-eslint/no-explicit-any -- mutating arbitrary JSON
    ['data.object.kind', (e: Record<string, any>) => delete e.data.object.kind], // eslint-disable-line @typescript-eslint/no-explicit-any -- mutating arbitrary JSON
    ['cluster', (e: Record<string, any>) => (e.cluster = 'East_1')], // eslint-disable-line @typescript-eslint/no-explicit-any -- mutating arbitrary JSON
    ['type', (e: Record<string, any>) => (e.type = 'dev.outrigger.watch.bookmark')], // eslint-disable-line @typescript-eslint/no-explicit-any -- mutating arbitrary JSON
    ['specversion', (e: Record<string, any>) => (e.specversion = '0.3')], // eslint-disable-line @typescript-eslint/no-explicit-any -- mutating arbitrary JSON
    ['data.extra', (e: Record<string, any>) => (e.data.extra = 1)], // eslint-disable-line @typescript-eslint/no-explicit-any -- mutating arbitrary JSON
  ])('names the bad field %s', (field, mutate) => {
    const e = structuredClone(valid()) as unknown as Record<string, unknown>;
    mutate(e);
    expect(() => parseEnvelope(JSON.stringify(e))).toThrow(EnvelopeError);
    try {
      parseEnvelope(JSON.stringify(e));
    } catch (err) {
      expect((err as EnvelopeError).field).toBe(field);
      expect((err as EnvelopeError).message).toMatch(new RegExp(`^invalid event envelope: ${field.replace(/\./g, '\\.')}: `));
    }
  });

  test('rejects what is not JSON, and what is too large, before looking inside', () => {
    expect(() => parseEnvelope('{"specversion":')).toThrow(/^invalid event envelope: \(envelope\): is not JSON/);
    const big = JSON.stringify({ ...valid(), padding: 'x'.repeat(MAX_ENVELOPE_BYTES) });
    expect(() => parseEnvelope(big)).toThrow(/over the 262144-byte limit/);
  });

  test('every envelope made from a valid object parses back unchanged', () => {
    const name = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/);
    fc.assert(
      fc.property(name, fc.option(name, { nil: undefined }), fc.uuid(), fc.nat(), fc.constantFrom('added', 'modified', 'deleted' as const), (n, ns, uid, rv, type) => {
        const obj: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: n, ...(ns ? { namespace: ns } : {}), uid, resourceVersion: String(rv + 1) } };
        const e = makeEnvelope({ cluster: 'c1', type, object: obj, source: 's' });
        expect(parseEnvelope(JSON.stringify(e))).toEqual(e);
      }),
    );
  });

  test('message groups follow the ControllerRef, and deduplication ids the change', () => {
    const owned = makeEnvelope({
      cluster: 'c1',
      type: 'added',
      object: object({ ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'p', uid: 'owner-uid', controller: true }] }),
      source: 's',
    });
    expect(messageGroupId(owned)).toBe('c1/owner-uid');
    expect(messageGroupId(valid())).toBe('east-1/u-1');
    expect(deduplicationId(valid())).toMatch(/^[0-9a-f]{64}$/);
    expect(deduplicationId(valid())).toBe(deduplicationId(valid()));
    expect(deduplicationId(owned)).not.toBe(deduplicationId(valid()));
  });
});

describe('sync requests', () => {
  test('round-trip, and a malformed one names its bad field', async () => {
    const { makeSyncRequest, parseSyncRequest } = await import('../../shared/lambda/sync-request.ts');
    const key = { cluster: 'c1', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name: 'web', uid: 'u' };
    const request = makeSyncRequest(key, ['StatefulSet/c1/u/1/added']);
    expect(parseSyncRequest(JSON.stringify(request))).toEqual(request);
    expect(() => parseSyncRequest(JSON.stringify({ ...request, key: { ...key, uid: '' } }))).toThrow('invalid sync request: key.uid: ');
    expect(() => parseSyncRequest(JSON.stringify({ ...request, extra: 1 }))).toThrow('invalid sync request: extra: is not a known field');
    expect(() => parseSyncRequest('nope')).toThrow(/^invalid sync request: \(message\): is not JSON/);
  });
});
