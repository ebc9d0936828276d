import fc from 'fast-check';
import {
  EnvelopeError,
  MAX_ENVELOPE_BYTES,
  deduplicationId,
  makeEnvelope,
  messageGroupId,
  parseEnvelope,
  watchEventType,
} from '../../shared/envelope/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const U1 = '3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b';
const OWNER = '7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918';

const object = (extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 'web', namespace: 'prod', uid: U1, resourceVersion: '42', ...extra },
  spec: { replicas: 3 },
});

const valid = () =>
  makeEnvelope({
    cluster: 'east-1',
    type: 'modified',
    object: object(),
    oldObject: object({ resourceVersion: '41' }),
    source: 'outrigger://east-1/forwarder',
    time: new Date('2026-11-22T00:00:00Z'),
  });

describe('the CloudEvents envelope', () => {
  test('is CloudEvents 1.0 structured JSON with the cluster as an extension attribute', () => {
    expect(valid()).toEqual({
      specversion: '1.0',
      id: `east-1/${U1}/42/modified`,
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

  test('carries objects whose kinds take path-segment names (RBAC), and refuses names no kind may have', () => {
    for (const name of ['system:controller:job-controller', 'system:aggregate-to-edit', 'Web_1', '..x'])
      expect(
        parseEnvelope(
          JSON.stringify(
            makeEnvelope({ cluster: 'east-1', type: 'added', object: object({ name }), source: 'outrigger://east-1/forwarder' }),
          ),
        ).data.object.metadata.name,
      ).toBe(name);
    for (const name of ['.', '..', 'a/b', '50%', 'with space', '', 'x'.repeat(254)]) {
      const e = structuredClone(valid()) as unknown as { data: { object: KubeObject } };
      e.data.object.metadata.name = name;
      expect(() => parseEnvelope(JSON.stringify(e))).toThrow('data.object.metadata.name: must be an object name');
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
      fc.property(
        name,
        fc.option(name, { nil: undefined }),
        fc.uuid(),
        fc.nat(),
        fc.constantFrom('added', 'modified', 'deleted' as const),
        (n, ns, uid, rv, type) => {
          const obj: KubeObject = {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: n, ...(ns ? { namespace: ns } : {}), uid, resourceVersion: String(rv + 1) },
          };
          const e = makeEnvelope({ cluster: 'c1', type, object: obj, source: 's' });
          expect(parseEnvelope(JSON.stringify(e))).toEqual(e);
        },
      ),
    );
  });

  test('message groups follow the ControllerRef, and deduplication ids the change', () => {
    const owned = makeEnvelope({
      cluster: 'c1',
      type: 'added',
      object: object({ ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'p', uid: OWNER, controller: true }] }),
      source: 's',
    });
    expect(messageGroupId(owned)).toBe(`c1/${OWNER}`);
    expect(messageGroupId(valid())).toBe(`east-1/${U1}`);
    expect(deduplicationId(valid(), 'forwarder')).toMatch(/^[0-9a-f]{64}$/);
    expect(deduplicationId(valid(), 'forwarder')).toBe(deduplicationId(valid(), 'forwarder'));
    expect(deduplicationId(owned, 'forwarder')).not.toBe(deduplicationId(valid(), 'forwarder'));
  });

  test("the ingest trust boundary: an ingest caller's envelope never shares a deduplication id with the forwarder's", () => {
    // A caller who guesses an object's next resourceVersion sends its envelope first: SQS would drop the
    // forwarder's genuine one as a copy for five minutes if the two ids could be equal.
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 256 }), fc.string({ minLength: 1, maxLength: 256 }), (a, b) => {
        expect(deduplicationId({ id: a }, 'ingest')).not.toBe(deduplicationId({ id: b }, 'forwarder'));
      }),
    );
    expect(deduplicationId(valid(), 'ingest')).not.toBe(deduplicationId(valid(), 'forwarder'));
    expect(deduplicationId(valid(), 'ingest')).toBe(deduplicationId(valid(), 'ingest'));
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

  test("a parent's truncation shares its history queue: it round-trips, and SQS never drops it as a copy of the sync it follows", async () => {
    const { makeSyncRequest, truncationRequest, parseSyncRequest } = await import('../../shared/lambda/sync-request.ts');
    const { syncDeduplicationId } = await import('../../shared/lambda/sync-sink.ts');
    const key = { cluster: 'c1', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name: 'web', uid: 'u' };
    const causes = ['StatefulSet/c1/u/1/modified'];
    const sync = makeSyncRequest(key, causes);
    const truncation = truncationRequest(key, causes);
    expect(truncation.truncate).toBe(true);
    expect(parseSyncRequest(JSON.stringify(truncation))).toEqual(truncation);
    // Same key, same causes, same queue: one deduplication id would make SQS drop the truncation for 5 minutes.
    expect(syncDeduplicationId(truncation)).not.toBe(syncDeduplicationId(sync));
    expect(syncDeduplicationId(truncation)).toBe(syncDeduplicationId(truncationRequest(key, causes)));
    expect(() => parseSyncRequest(JSON.stringify({ ...sync, truncate: false }))).toThrow('invalid sync request: truncate: ');
  });

  test("carry the parent's event object only when it is this parent's, has a resourceVersion and is small", async () => {
    const { MAX_OBSERVED_BYTES, makeSyncRequest, observedParent, parseSyncRequest } = await import('../../shared/lambda/sync-request.ts');
    const key = { cluster: 'c1', group: 'apps', kind: 'StatefulSet', namespace: 'ns', name: 'web', uid: 'u' };
    const parent = {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'web', namespace: 'ns', uid: 'u', resourceVersion: '7' },
      spec: { replicas: 0 },
    };
    const request = makeSyncRequest(key, ['StatefulSet/c1/u/7/modified'], parent);
    expect(observedParent(parseSyncRequest(JSON.stringify(request)))).toEqual(parent);
    expect(makeSyncRequest(key, [], { ...parent, metadata: { ...parent.metadata, uid: 'other' } })).not.toHaveProperty('observed');
    expect(makeSyncRequest(key, [], { ...parent, metadata: { name: 'web', uid: 'u' } })).not.toHaveProperty('observed');
    expect(makeSyncRequest(key, [], { ...parent, spec: { big: 'x'.repeat(MAX_OBSERVED_BYTES) } })).not.toHaveProperty('observed');
    expect(() => parseSyncRequest(JSON.stringify({ ...request, observed: { metadata: { uid: 'u' } } }))).toThrow(
      /^invalid sync request: observed\.metadata\./,
    );
  });
});

describe('what JSON.parse does not say', () => {
  test('a key given twice in one object, and nesting past the limit, are named; escapes are read as the key they spell', async () => {
    const { scanJson } = await import('../../shared/json-scan.ts');
    expect([...scanJson('{"a":1,"b":{"a":2},"\\u0061":3}', 100).problems]).toEqual([[-1, 'has the key "a" twice in one object']]);
    expect([...scanJson('[{"a":1},{"a":1,"a":2},[{"x":"\\"a\\"","a":1}]]', 100).problems]).toEqual([
      [1, 'has the key "a" twice in one object'],
    ]);
    const text = '[ 1 ,{"a":[[2]]} , "x,]" ]';
    expect(scanJson(text, 100).elements.map(([s, e]) => text.slice(s, e))).toEqual(['1', '{"a":[[2]]}', '"x,]"']);
    expect([...scanJson(`[${'['.repeat(100)}${']'.repeat(100)},${'['.repeat(101)}${']'.repeat(101)}]`, 100).problems]).toEqual([
      [1, 'is nested deeper than 100 levels'],
    ]);
    // Deeper than JSON.stringify's recursion survives: refused, not a crash.
    expect(() => parseEnvelope(`${'{"a":'.repeat(40_000)}1${'}'.repeat(40_000)}`)).toThrow(
      'invalid event envelope: (envelope): is nested deeper than 100 levels',
    );
  });

  test('any JSON, made SQS-safe, reads back the same and holds only what SQS takes', async () => {
    const { sqsText } = await import('../../shared/lambda/sqs.ts');
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: 'binary' }), (value, s) => {
        const text = sqsText(JSON.stringify({ value, s }));
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify({ value, s })));
        expect(text).toMatch(/^[\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]*$/u);
      }),
    );
  });
});
