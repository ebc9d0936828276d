// Generators of envelopes as a hostile sender writes them (the text itself, so duplicate keys and nesting too deep
// for JSON.stringify survive), beside valid ones whose data holds whatever Kubernetes allows (any Unicode,
// characters SQS refuses included). Shared by the ingest's unit test and the ElasticMQ test of ingest and router.
import fc from 'fast-check';
import { makeEnvelope, type Envelope, type WatchEventType } from '../../shared/envelope/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

export interface ValidCase {
  kind: 'valid';
  envelope: Envelope;
  text: string;
}

export interface HostileCase {
  kind: 'hostile';
  /** What is wrong with it, for a failing run's report. */
  why: string;
  /** The field its dead letter's reason must name (a regex source, after the event's place). */
  field: string;
  text: string;
}

export type Case = ValidCase | HostileCase;

const dnsLabel = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);
/** Strings as a cluster's objects may hold them in data: any Unicode, and what SQS refuses in a message. */
const anyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('\uFFFF', '\uFFFE', '\uD800', '\u0000\u0001', 'e\u0301', '\u{1F600}'),
);

export interface ValidOptions {
  cluster: string;
  /** Every object in this namespace, owned (controller) by this uid, when given. */
  namespace?: string;
  owner?: { apiVersion: string; kind: string; name: string; uid: string };
}

export function validCase(opts: ValidOptions): fc.Arbitrary<ValidCase> {
  return fc
    .record({
      name: fc.tuple(dnsLabel, fc.option(dnsLabel, { nil: undefined })).map(([a, b]) => (b ? `${a}.${b}` : a)),
      namespace: opts.namespace ? fc.constant(opts.namespace) : dnsLabel,
      uid: fc.uuid(),
      rv: fc.nat().map((n) => String(n + 1)),
      type: fc.constantFrom<WatchEventType>('added', 'modified', 'deleted'),
      labels: fc.dictionary(dnsLabel, anyText, { maxKeys: 3 }),
      data: fc.dictionary(anyText, fc.oneof(anyText, fc.integer(), fc.array(anyText, { maxLength: 3 })), { maxKeys: 4 }),
    })
    .map(({ name, namespace, uid, rv, type, labels, data }) => {
      const object: KubeObject = {
        apiVersion: 'apps/v1',
        kind: 'ControllerRevision',
        metadata: {
          name,
          namespace,
          uid,
          resourceVersion: rv,
          labels,
          ...(opts.owner ? { ownerReferences: [{ ...opts.owner, controller: true }] } : {}),
        },
        data,
        revision: 1,
      };
      const envelope = makeEnvelope({ cluster: opts.cluster, type, object, source: `outrigger://${opts.cluster}/forwarder` });
      return { kind: 'valid' as const, envelope, text: JSON.stringify(envelope) };
    });
}

type Json = Record<string, unknown>;
const meta = (e: Json) => (e.data as { object: { metadata: Json } }).object.metadata;

/** A valid envelope's object form, changed by `change`. */
const mutated = (base: ValidCase, why: string, field: string, change: (e: Json) => void): HostileCase => {
  const e = structuredClone(base.envelope) as unknown as Json;
  change(e);
  return { kind: 'hostile', why, field, text: JSON.stringify(e) };
};

const badId = fc.oneof(
  fc.string({ minLength: 257, maxLength: 600 }),
  fc.constant('x'.repeat(100_000)),
  fc.constantFrom('a b', 'prod/\u00e9', ''),
);
const badUid = fc.oneof(
  fc.string({ maxLength: 60 }).filter((s) => !/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(s)),
  fc.constant('\u{1F600}'.repeat(64)),
  fc.constant('u'.repeat(5000)),
);
// Names no kind may have (a path segment's limits), and what the envelope holds them to besides (printable ASCII, no spaces).
const badName = fc.oneof(fc.constantFrom('a/b', '50%', '..', 'with space', 'caf\u00e9', '', '.', 'a\tb'), fc.constant('a'.repeat(254)));
const badNamespace = fc.oneof(fc.constantFrom('Shop', 'a.b', 'a_b', ''), fc.constant('n'.repeat(64)));
const badSource = fc.oneof(fc.constantFrom('', 'has space', 'caf\u00e9', '\uFFFF'), fc.constant('s'.repeat(1025)));
const badKind = fc.constantFrom('', 'Pod\u00e9', 'Pod/x', '1Pod', 'P'.repeat(64));
const badApiVersion = fc.constantFrom('', 'Apps/v1', 'apps/v1/x', 'apps/V1', '\uFFFFv1');
const badRv = fc.oneof(fc.constantFrom('', '1/2', '1 2', '\u00e9'), fc.constant('9'.repeat(65)));

/** A hostile variant of a valid case from `valid`; `otherCluster` is one the sender may not speak for. */
export function hostileCase(valid: fc.Arbitrary<ValidCase>, otherCluster: string): fc.Arbitrary<HostileCase> {
  return fc
    .tuple(
      valid,
      fc.nat(12),
      badId,
      badUid,
      badName,
      badNamespace,
      badSource,
      fc.tuple(badKind, badApiVersion, badRv),
      fc.integer({ min: 101, max: 50_000 }),
    )
    .map(([base, which, id, uid, name, ns, source, [kind, apiVersion, rv], depth]) => {
      switch (which) {
        case 0:
          return mutated(base, `id of ${id.length} chars`, 'id: ', (e) => (e.id = id));
        case 1:
          return mutated(base, `uid ${JSON.stringify(uid.slice(0, 40))}`, 'data\\.object\\.metadata\\.uid: ', (e) => (meta(e).uid = uid));
        case 2:
          // Its message group would be `<cluster>/<this>`: beyond SQS's MessageGroupId alphabet and length.
          return mutated(
            base,
            `owner uid ${JSON.stringify(uid.slice(0, 40))}`,
            'data\\.object\\.metadata\\.ownerReferences\\.0\\.uid: ',
            (e) => (meta(e).ownerReferences = [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'x', uid, controller: true }]),
          );
        case 3:
          return mutated(
            base,
            `name ${JSON.stringify(name.slice(0, 40))}`,
            'data\\.object\\.metadata\\.name: ',
            (e) => (meta(e).name = name),
          );
        case 4:
          return mutated(
            base,
            `namespace ${JSON.stringify(ns.slice(0, 40))}`,
            'data\\.object\\.metadata\\.namespace: ',
            (e) => (meta(e).namespace = ns),
          );
        case 5:
          return mutated(base, `source ${JSON.stringify(source.slice(0, 40))}`, 'source: ', (e) => (e.source = source));
        case 6:
          return mutated(
            base,
            `kind ${JSON.stringify(kind)}`,
            'data\\.object\\.kind: ',
            (e) => ((e.data as { object: Json }).object.kind = kind),
          );
        case 7:
          return mutated(
            base,
            `apiVersion ${JSON.stringify(apiVersion)}`,
            'data\\.object\\.apiVersion: ',
            (e) => ((e.data as { object: Json }).object.apiVersion = apiVersion),
          );
        case 8:
          return mutated(
            base,
            `resourceVersion ${JSON.stringify(rv.slice(0, 40))}`,
            'data\\.object\\.metadata\\.resourceVersion: ',
            (e) => (meta(e).resourceVersion = rv),
          );
        case 9:
          return mutated(base, `cluster ${otherCluster}`, 'cluster: ', (e) => (e.cluster = otherCluster));
        case 10: {
          // Nested beyond what JSON.stringify's recursion survives: written as text.
          const text = base.text.replace('"data":{"object":{', `"data":{"object":{"spec":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)},`);
          return { kind: 'hostile', why: `nested ${depth} deep`, field: ': is nested deeper than 100 levels', text };
        }
        case 11:
          // JSON.parse keeps the last: a reader keeping the first would see another cluster.
          return {
            kind: 'hostile',
            why: 'cluster given twice',
            field: ': has the key "cluster" twice',
            text: `{"cluster":${JSON.stringify(otherCluster)},${base.text.slice(1)}`,
          };
        default:
          return {
            kind: 'hostile',
            why: 'uid given twice',
            field: ': has the key "uid" twice',
            // A function, not a string: a string replacement reads `$&` and its kin in the generated uid as patterns.
            text: base.text.replace('"uid":', () => `"uid":${JSON.stringify(uid)},"uid":`),
          };
      }
    });
}

/** A batch of cases, valid and hostile mixed, with at least one of each. */
export function mixedBatch(valid: fc.Arbitrary<ValidCase>, hostile: fc.Arbitrary<HostileCase>, maxLength = 10): fc.Arbitrary<Case[]> {
  return fc
    .tuple(valid, hostile, fc.array(fc.oneof(valid, hostile), { maxLength: maxLength - 2 }))
    .chain(([v, h, rest]) => fc.shuffledSubarray([v, h, ...rest], { minLength: rest.length + 2, maxLength: rest.length + 2 }));
}
