// The forwarder's envelope signatures (docs/operations/security.md#events-are-triggers-not-state): the router takes
// an envelope's object for the parent's state only when it verifies under the key of the cluster whose queue it
// came from. Any change to what is signed, another cluster's key, or a cluster other than the queue's fails.
import fc from 'fast-check';
import { forwarderKeyCommand } from '../../cli/forwarder-key.ts';
import { makeEnvelope, parseEnvelope, type Envelope } from '../../shared/envelope/index.ts';
import { canonicalText, forwarderKey, signEnvelope, verifyEnvelope } from '../../shared/envelope/signature.ts';
import { controllerKey } from '../../shared/hooks/signature.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const SECRET = 'the deployment secret';
const keyA = forwarderKey(SECRET, 'a');
const keyB = forwarderKey(SECRET, 'b');

const statefulSet = (image: string, rv = '42'): KubeObject =>
  ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: 'team', uid: '0b6f8f8e-3c35-4d7a-9d0c-1b2a3c4d5e6f', resourceVersion: rv, labels: { app: 'web' } },
    spec: { replicas: 1, template: { spec: { containers: [{ name: 'c', image }] } } },
  }) as KubeObject;

const envelope = (object = statefulSet('app:1'), cluster = 'a'): Envelope =>
  makeEnvelope({ cluster, type: 'modified', object, oldObject: statefulSet('app:0', '41'), source: 'outrigger://a/forwarder' });

/** Through SQS: the body as sent, parsed again as the router does. */
const received = (e: Envelope) => parseEnvelope(JSON.stringify(e));

describe('the forwarder signature boundary', () => {
  test('keys: one per cluster, none a webhook key', () => {
    expect(keyA).toMatch(/^[0-9a-f]{64}$/);
    expect(keyA).not.toBe(keyB);
    expect(forwarderKey('another secret', 'a')).not.toBe(keyA);
    // A MapController key's info is `<cluster>/<uid>`: a cluster named "forwarder" gets no forwarder key from it.
    expect(controllerKey(SECRET, 'forwarder', 'a')).not.toBe(keyA);
    expect(() => forwarderKey('', 'a')).toThrow(/secret is empty/);
  });

  test('outrigger forwarder-key prints the key the router verifies with', async () => {
    expect(await forwarderKeyCommand({ cluster: 'a', secret: () => Promise.resolve(SECRET) })).toBe(`${keyA}\n`);
  });

  test("the forwarder's own signed envelope verifies after a trip through the queue, in any key order", () => {
    const signed = received(signEnvelope(keyA, envelope()));
    expect(verifyEnvelope([keyA], 'a', signed)).toBe(true);
    const reordered = JSON.parse(JSON.stringify(signed), (_k, v: unknown) =>
      v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
    ) as Envelope;
    expect(verifyEnvelope([keyA], 'a', received(reordered))).toBe(true);
    // Two keys during a rotation: either verifies.
    expect(verifyEnvelope([keyB, keyA], 'a', signed)).toBe(true);
  });

  test("an envelope signed with another cluster's key, or for another cluster, or unsigned, does not verify", () => {
    expect(verifyEnvelope([keyA], 'a', received(signEnvelope(keyB, envelope())))).toBe(false);
    // Cluster b's forwarder signs an envelope that names cluster a, and it lands on a's queue.
    expect(verifyEnvelope([keyA], 'a', received(signEnvelope(keyB, envelope(undefined, 'a'))))).toBe(false);
    // Signed by a's key for a, then checked as though it came from b's queue.
    expect(verifyEnvelope([keyB], 'b', received(signEnvelope(keyA, envelope())))).toBe(false);
    expect(verifyEnvelope([keyA], 'a', received(envelope()))).toBe(false);
  });

  test('a malformed signature attribute is refused with the envelope', () => {
    expect(() => received({ ...envelope(), outriggersignature: 'v1=xyz' })).toThrow(/outriggersignature/);
  });

  test('the object swapped after signing does not verify', () => {
    const signed = signEnvelope(keyA, envelope());
    const swapped = { ...signed, data: { ...signed.data, object: statefulSet('attacker.example/backdoor:1') } };
    expect(verifyEnvelope([keyA], 'a', received(swapped))).toBe(false);
  });

  // Every path of a JSON value, and a change at it: a new value, a removed key, or an added key.
  const json = fc.jsonValue({ maxDepth: 3 });
  test('any change to a signed field breaks verification (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('type', 'object', 'oldObject', 'resourceVersion', 'name', 'namespace', 'uid', 'kind', 'apiVersion'),
        fc.string({ minLength: 1, maxLength: 8 }),
        json,
        (field, word, value) => {
          const signed = received(signEnvelope(keyA, envelope()));
          const changed = structuredClone(signed) as Envelope & {
            data: { object: Record<string, unknown>; oldObject: Record<string, unknown> };
          };
          const m = changed.data.object.metadata as Record<string, unknown>;
          const word1 = word.toLowerCase().replace(/[^a-z0-9]/g, '') || 'x';
          switch (field) {
            case 'type':
              changed.type = signed.type.endsWith('added') ? 'dev.outrigger.watch.modified' : 'dev.outrigger.watch.added';
              break;
            case 'object':
              (changed.data.object as Record<string, unknown>)[`extra${word1}`] = value;
              break;
            case 'oldObject':
              (changed.data.oldObject as Record<string, unknown>).spec = value;
              fc.pre(canonicalText(value) !== canonicalText(signed.data.oldObject!.spec));
              break;
            case 'resourceVersion':
              m.resourceVersion = `${String(m.resourceVersion)}${word1}`;
              break;
            case 'name':
            case 'namespace':
              m[field] = `${String(m[field])}${word1}`;
              break;
            case 'uid':
              m.uid = '0b6f8f8e-3c35-4d7a-9d0c-1b2a3c4d5e60';
              break;
            case 'kind':
              changed.data.object.kind = `${String(changed.data.object.kind)}${word1}`;
              break;
            case 'apiVersion':
              changed.data.object.apiVersion = `apps/v${word1.length + 1}`;
              break;
          }
          expect(verifyEnvelope([keyA], 'a', changed)).toBe(false);
        },
      ),
    );
  });

  test('canonicalText: key order does not matter, any value does (property)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), (o) => {
        const reversed = Object.fromEntries(Object.entries(o).reverse());
        expect(canonicalText(reversed)).toBe(canonicalText(o));
        expect(canonicalText({ ...o, ['\u0000added']: 1 })).not.toBe(canonicalText(o));
      }),
    );
  });
});
