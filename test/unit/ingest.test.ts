// The ingest function's pure core: HTTP request in, envelopes to queue or a refusal (status, problem, dead letters) out.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { projectRoot } from '../../local/paths.ts';
import {
  MAX_ENVELOPE_BYTES,
  deduplicationId,
  makeEnvelope,
  messageGroupId,
  parseEnvelope,
  type Envelope,
} from '../../shared/envelope/index.ts';
import {
  DEAD_LETTER_BODY_BYTES,
  MAX_INGEST_EVENTS,
  fitDeadLetter,
  planIngest,
  type IngestPlan,
  type IngestRequest,
} from '../../shared/ingest/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';
import fc from 'fast-check';
import { ingestClustersOf, isPrincipal, parseClusters } from '../../shared/clusters.ts';
import { hostileCase, mixedBatch, validCase } from './hostile.ts';

const clusters = new Set(['prod', 'staging']);
const now = new Date('2026-11-22T10:00:00Z');
const POD_UID = '5f0c7d2e-3b1a-4c9e-8f6d-2a7b9c1e4d30';
const STS_UID = '9a8b7c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d';
const OTHER_UID = '0e1d2c3b-4a59-4687-a5b4-c3d2e1f0a9b8';

const pod = (extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name: 'web-0',
    namespace: 'shop',
    uid: POD_UID,
    resourceVersion: '7',
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: STS_UID, controller: true }],
    ...extra,
  },
  spec: { containers: [{ name: 'c', image: 'registry.example/web:1' }] },
});

const envelope = (cluster = 'prod', object = pod()): Envelope =>
  makeEnvelope({ cluster, type: 'modified', object, source: 'outrigger://prod/forwarder', time: now });

function post(body: string, opts: { headers?: Record<string, string>; query?: Record<string, string> } = {}): IngestRequest {
  return { method: 'POST', headers: { 'content-type': 'application/json', ...opts.headers }, query: opts.query ?? {}, body };
}

/** A binary-mode ApiServerSource event (mode: Resource), as Knative sends it; `headers` overrides (undefined drops one). */
function knative(
  type: string,
  object: unknown,
  opts: { query?: Record<string, string>; headers?: Record<string, string | undefined> } = {},
): IngestRequest {
  const headers: Record<string, string | undefined> = {
    'content-type': 'application/json',
    'ce-specversion': '1.0',
    'ce-id': 'a1b2',
    'ce-source': 'https://10.96.0.1:443',
    'ce-type': type,
    'ce-time': '2026-11-22T09:59:00Z',
    'ce-subject': '/api/v1/namespaces/shop/pods/web-0',
    ...opts.headers,
  };
  return { method: 'POST', headers, query: opts.query ?? { cluster: 'prod' }, body: JSON.stringify(object) };
}

function refused(plan: IngestPlan): Extract<IngestPlan, { ok: false }> {
  if (plan.ok) throw new Error(`expected a refusal, got ${JSON.stringify(plan.counts)}`);
  return plan;
}

describe('the ingest', () => {
  test('passes our envelopes through unchanged, one or a batch, with the ids the router relies on', () => {
    const one = planIngest(post(JSON.stringify(envelope())), clusters, clusters, now);
    expect(one).toEqual({
      ok: true,
      envelopes: [envelope()],
      deadLetters: [],
      counts: { accepted: 1, envelopes: 1, knative: 0, refused: 0 },
    });

    const batch = [envelope(), envelope('staging', pod({ uid: OTHER_UID, ownerReferences: [] }))];
    const plan = planIngest(
      post(JSON.stringify(batch), { headers: { 'content-type': 'application/cloudevents-batch+json' } }),
      clusters,
      clusters,
      now,
    );
    if (!plan.ok) throw new Error(plan.problem);
    expect(plan.envelopes).toEqual(batch);
    expect(plan.envelopes.map(messageGroupId)).toEqual([`prod/${STS_UID}`, `staging/${OTHER_UID}`]);
    expect(plan.envelopes.map((e) => deduplicationId(e, 'ingest'))).toEqual(batch.map((e) => deduplicationId(e, 'ingest')));
    // An empty batch is nothing to do, not an error.
    expect(planIngest(post('[]'), clusters, clusters, now)).toMatchObject({ ok: true, counts: { accepted: 0 } });
  });

  test.each([
    ['dev.knative.apiserver.resource.add', 'added'],
    ['dev.knative.apiserver.resource.update', 'modified'],
    ['dev.knative.apiserver.resource.delete', 'deleted'],
  ])('makes a Knative %s event (binary mode, mode: Resource) our %s envelope for the ?cluster', (type, ours) => {
    const plan = planIngest(knative(type, pod()), clusters, clusters, now);
    if (!plan.ok) throw new Error(plan.problem);
    expect(plan.counts).toEqual({ accepted: 1, envelopes: 0, knative: 1, refused: 0 });
    const e = plan.envelopes[0]!;
    expect(e).toEqual(
      makeEnvelope({
        cluster: 'prod',
        type: ours as 'added',
        object: pod(),
        source: 'https://10.96.0.1:443',
        time: new Date('2026-11-22T09:59:00Z'),
      }),
    );
    expect(e.id).toBe(`prod/${POD_UID}/7/${ours}`);
    expect(parseEnvelope(JSON.stringify(e))).toEqual(e);
    expect(messageGroupId(e)).toBe(`prod/${STS_UID}`);
  });

  test('takes Knative events in structured mode too, so a refused one can be posted again as the dead-letter queue kept it', () => {
    const plan = refused(planIngest(knative('dev.knative.apiserver.resource.add', pod({ uid: undefined })), clusters, clusters, now));
    const letter = plan.deadLetters[0]!;
    expect(JSON.parse(letter.body)).toMatchObject({
      specversion: '1.0',
      id: 'a1b2',
      type: 'dev.knative.apiserver.resource.add',
      datacontenttype: 'application/json',
      data: { kind: 'Pod' },
    });
    const fixed = { ...(JSON.parse(letter.body) as Record<string, unknown>), data: pod() };
    expect(planIngest(post(JSON.stringify(fixed), { query: { cluster: 'prod' } }), clusters, clusters, now)).toMatchObject({
      ok: true,
      counts: { knative: 1 },
    });
  });

  test('refuses Reference-mode events, which carry no object, saying how to fix the source', () => {
    const plan = refused(
      planIngest(
        knative('dev.knative.apiserver.ref.update', { apiVersion: 'v1', kind: 'Pod', name: 'web-0', namespace: 'shop' }),
        clusters,
        clusters,
        now,
      ),
    );
    expect(plan.status).toBe(422);
    expect(plan.problem).toBe(
      "invalid ingest request: type: is dev.knative.apiserver.ref.update, an ApiServerSource event in mode Reference, which carries no object: set the ApiServerSource's spec.mode to Resource",
    );
    expect(plan.deadLetters).toEqual([
      { body: expect.stringContaining('"type":"dev.knative.apiserver.ref.update"'), reason: plan.problem },
    ]);
  });

  test.each<[string, IngestRequest, number, RegExp]>([
    [
      'an unknown type',
      post(JSON.stringify({ ...envelope(), type: 'com.example.other' })),
      422,
      /^invalid ingest request: type: is com\.example\.other, not a type the ingest takes \(dev\.outrigger\.watch\.added, .*dev\.knative\.apiserver\.resource\.delete\)$/,
    ],
    ['a bookmark', post(JSON.stringify({ ...envelope(), type: 'dev.outrigger.watch.bookmark' })), 400, /^invalid ingest request: type: /],
    [
      'no type at all',
      post(JSON.stringify(pod())),
      400,
      /^invalid ingest request: type: is required \(a CloudEvent attribute; in binary mode the ce-type header\)$/,
    ],
    ['a body that is not JSON', post('{"specversion":'), 400, /^invalid ingest request: \(body\): is not JSON/],
    [
      'binary data that is not JSON',
      { ...knative('dev.knative.apiserver.resource.add', {}), body: 'web-0' },
      400,
      /^invalid ingest request: data: is not JSON/,
    ],
    [
      'binary data of another content type',
      knative('dev.knative.apiserver.resource.add', pod(), { headers: { 'content-type': 'text/plain' } }),
      415,
      /^invalid ingest request: datacontenttype: is text\/plain/,
    ],
    [
      'an object without a uid',
      knative('dev.knative.apiserver.resource.add', pod({ uid: undefined })),
      400,
      /^invalid ingest request: data\.metadata\.uid: /,
    ],
    [
      'data that is not an object',
      knative('dev.knative.apiserver.resource.add', 'web-0'),
      400,
      /^invalid ingest request: data: is not a Kubernetes object/,
    ],
    [
      'a missing ce-source',
      knative('dev.knative.apiserver.resource.add', pod(), { headers: { 'ce-source': undefined } }),
      400,
      /^invalid ingest request: source: is required/,
    ],
    [
      'a bad ce-time',
      knative('dev.knative.apiserver.resource.add', pod(), { headers: { 'ce-time': 'yesterday' } }),
      400,
      /^invalid ingest request: time: is "yesterday", not an RFC 3339 time$/,
    ],
    [
      'a Knative event without ?cluster',
      knative('dev.knative.apiserver.resource.add', pod(), { query: {} }),
      400,
      /^invalid ingest request: \?cluster: is required for Knative events/,
    ],
    [
      'an unknown ?cluster',
      knative('dev.knative.apiserver.resource.add', pod(), { query: { cluster: 'dev' } }),
      422,
      /^invalid ingest request: \?cluster: "dev" is not a cluster this deployment serves \(prod, staging\)$/,
    ],
    [
      'an envelope of an unknown cluster',
      post(JSON.stringify(envelope('dev'))),
      422,
      /^invalid ingest request: cluster: "dev" is not a cluster this deployment serves/,
    ],
    [
      'an envelope of another cluster than ?cluster',
      post(JSON.stringify(envelope('staging')), { query: { cluster: 'prod' } }),
      422,
      /^invalid ingest request: cluster: is "staging", but the request is for \?cluster=prod$/,
    ],
    ['a GET', { ...post(''), method: 'GET' }, 405, /^invalid ingest request: \(method\): is GET/],
    ['an empty body', post(''), 400, /^invalid ingest request: \(body\): is empty$/],
  ])('refuses %s, naming the problem', (_, request, status, problem) => {
    const plan = refused(planIngest(request, clusters, clusters, now));
    expect(plan.status).toBe(status);
    expect(plan.problem).toMatch(problem);
    // Every refusal with a body is kept in the dead-letter queue with its reason; SQS takes no empty message.
    expect(plan.deadLetters).toHaveLength(request.body ? 1 : 0);
    if (request.body) expect(plan.deadLetters[0]!.reason).toBe(plan.problem);
  });

  test('refuses an event whose envelope would exceed an SQS message, and dead-letters it cut to fit', () => {
    const big = pod();
    big.spec = { padding: 'x'.repeat(MAX_ENVELOPE_BYTES) };
    const plan = refused(planIngest(knative('dev.knative.apiserver.resource.add', big), clusters, clusters, now));
    expect(plan.status).toBe(413);
    expect(plan.problem).toMatch(
      /^invalid ingest request: \(body\): makes an envelope of \d+ bytes, over the 262144-byte limit of an SQS message$/,
    );
    const letter = plan.deadLetters[0]!;
    expect(Buffer.byteLength(letter.body)).toBe(DEAD_LETTER_BODY_BYTES);
    expect(letter.reason).toMatch(/\[the dead letter holds the first 258048 of \d+ bytes\]$/);
    // Cutting never splits a character.
    const cut = fitDeadLetter({ body: 'é'.repeat(DEAD_LETTER_BODY_BYTES), reason: 'r' });
    expect(Buffer.byteLength(cut.body)).toBeLessThanOrEqual(DEAD_LETTER_BODY_BYTES);
    expect(cut.body).not.toContain('\uFFFD');
  });

  test('queues the good members of a batch and dead-letters each bad one with its own reason', () => {
    const good = envelope();
    const bad = { ...envelope('prod', pod({ uid: OTHER_UID })), type: 'dev.knative.apiserver.ref.add' };
    const plan = planIngest(post(JSON.stringify([good, bad, 42])), clusters, clusters, now);
    if (!plan.ok) throw new Error(plan.problem);
    expect(plan.envelopes).toEqual([good]);
    expect(plan.counts).toEqual({ accepted: 1, envelopes: 1, knative: 0, refused: 2 });
    expect(plan.problem).toMatch(
      /^invalid ingest request: \[1\]\.type: is dev\.knative\.apiserver\.ref\.add, .* \(and 1 more refused event\(s\)\)$/,
    );
    expect(plan.deadLetters.map((l) => l.body)).toEqual([JSON.stringify(bad), '42']);
    expect(plan.deadLetters[1]!.reason).toBe('invalid ingest request: [2]: is not a CloudEvent (a JSON object)');
  });

  test('names the field of a bad envelope as the router would, under its place in the batch', () => {
    const e = envelope() as unknown as { data: { object: { metadata: Record<string, unknown> } } };
    delete e.data.object.metadata.resourceVersion;
    const plan = planIngest(post(JSON.stringify([envelope(), e])), clusters, clusters, now);
    expect(plan.problem).toMatch(/^invalid ingest request: \[1\]\.data\.object\.metadata\.resourceVersion: /);
  });

  test.each([
    ['ingest-knative.json', { ok: true, counts: { accepted: 1, envelopes: 0, knative: 1, refused: 0 } }],
    ['ingest-envelopes.json', { ok: true, counts: { accepted: 1, envelopes: 1, knative: 0, refused: 0 } }],
    ['ingest-reference.json', { ok: false, status: 422 }],
  ])('reads the sample Function URL event events/%s', (file, outcome) => {
    const event = JSON.parse(readFileSync(join(projectRoot, 'events', file), 'utf8')) as APIGatewayProxyEventV2;
    const request = {
      method: event.requestContext.http.method,
      headers: event.headers,
      query: event.queryStringParameters ?? {},
      body: event.body ?? '',
    };
    expect(planIngest(request, new Set(['local']), new Set(['local']), now)).toMatchObject(outcome);
  });
});

describe('who may speak for a cluster', () => {
  const ROLE = 'arn:aws:iam::111122223333:role/outrigger/prod-ingest-signer';
  const SESSION = 'arn:aws:sts::111122223333:assumed-role/prod-ingest-signer/eks-prod-ingest-si-1a2b';

  test('the cluster configuration names the IAM principals whose requests speak for each cluster', () => {
    const configs = parseClusters(
      JSON.stringify([
        { id: 'prod', access: { kind: 'kubeconfig' }, ingestPrincipals: [ROLE] },
        { id: 'staging', access: { kind: 'kubeconfig' }, ingestPrincipals: ['arn:aws:iam::111122223333:user/ci'] },
        { id: 'dev', access: { kind: 'kubeconfig' } },
      ]),
    );
    // A session of the role (the Function URL's userArn) is the role, whatever its path; another account's is not.
    expect([...ingestClustersOf(configs, SESSION)]).toEqual(['prod']);
    expect([...ingestClustersOf(configs, ROLE)]).toEqual(['prod']);
    expect([...ingestClustersOf(configs, 'arn:aws:iam::111122223333:user/ci')]).toEqual(['staging']);
    expect([...ingestClustersOf(configs, SESSION.replace('111122223333', '444455556666'))]).toEqual([]);
    expect([...ingestClustersOf(configs, 'arn:aws:sts::111122223333:assumed-role/prod-ingest-signer-2/s')]).toEqual([]);
    expect([...ingestClustersOf(configs, undefined)]).toEqual([]);
    expect(isPrincipal('arn:aws:iam::111122223333:role/a', 'arn:aws:sts::111122223333:assumed-role/a/s')).toBe(true);
    expect(() =>
      parseClusters(JSON.stringify([{ id: 'prod', access: { kind: 'kubeconfig' }, ingestPrincipals: ['prod-ingest-signer'] }])),
    ).toThrow(
      'cluster configuration: cluster prod: ingestPrincipals.0: must be an IAM role or user ARN (arn:aws:iam::<account>:role/<name>)',
    );
  });

  test('refuses (403) every event for a cluster the caller may not speak for, and queues its own beside them', () => {
    const caller = { ...post(JSON.stringify([envelope('prod'), envelope('staging')])), caller: SESSION };
    const plan = planIngest(caller, clusters, new Set(['prod']), now);
    if (!plan.ok) throw new Error(plan.problem);
    expect(plan.envelopes.map((e) => e.cluster)).toEqual(['prod']);
    expect(plan.problem).toBe(
      `invalid ingest request: [1].cluster: is "staging", a cluster whose ingestPrincipals do not name the caller ${SESSION} (it may for prod)`,
    );
    expect(plan.deadLetters).toEqual([{ body: JSON.stringify(envelope('staging')), reason: plan.problem }]);
    const knativeForStaging = refused(
      planIngest(
        { ...knative('dev.knative.apiserver.resource.add', pod(), { query: { cluster: 'staging' } }), caller: SESSION },
        clusters,
        new Set(['prod']),
        now,
      ),
    );
    expect(knativeForStaging).toMatchObject({
      status: 403,
      problem: expect.stringMatching(/^invalid ingest request: \?cluster: is "staging", a cluster whose ingestPrincipals do not name/),
    });
    expect(refused(planIngest(post(JSON.stringify(envelope('prod'))), clusters, new Set(), now)).status).toBe(403);
  });

  test("recomputes each envelope's id from (cluster, uid, resourceVersion, type): a sender cannot pick the deduplication id of events yet to come", () => {
    const future = { ...envelope('prod'), id: `prod/${POD_UID}/8/modified` };
    const plan = planIngest(post(JSON.stringify(future)), clusters, clusters, now);
    if (!plan.ok) throw new Error(plan.problem);
    expect(plan.envelopes[0]!.id).toBe(`prod/${POD_UID}/7/modified`);
    expect(deduplicationId(plan.envelopes[0]!, 'ingest')).toBe(deduplicationId(envelope('prod'), 'ingest'));
  });
});

describe('hostile envelopes', () => {
  test('each is dead-lettered with a reason naming its problem, and every valid event of its batch is queued', () => {
    let hostile = 0;
    let valid = 0;
    const good = validCase({ cluster: 'prod' });
    fc.assert(
      fc.property(mixedBatch(good, hostileCase(good, 'staging')), (batch) => {
        const body = `[${batch.map((c) => c.text).join(',')}]`;
        const plan = planIngest(
          { ...post(body), caller: 'arn:aws:sts::111122223333:assumed-role/prod/s' },
          clusters,
          new Set(['prod']),
          now,
        );
        if (!plan.ok) throw new Error(`refused whole: ${plan.problem}`);
        const expected = batch.flatMap((c) => (c.kind === 'valid' ? [c.envelope] : []));
        expect(plan.envelopes).toEqual(expected);
        // Every envelope queued fits SQS: its message group and deduplication id within 128 allowed characters.
        for (const e of plan.envelopes) {
          expect(messageGroupId(e)).toMatch(/^[!-~]{1,128}$/);
          expect(deduplicationId(e, 'ingest')).toMatch(/^[!-~]{1,128}$/);
        }
        const bad = batch.map((c, i) => [c, i] as const).filter(([c]) => c.kind === 'hostile');
        expect(plan.deadLetters).toHaveLength(bad.length);
        bad.forEach(([c, i], n) => {
          if (c.kind !== 'hostile') return;
          const letter = plan.deadLetters[n]!;
          expect(letter.reason).toMatch(new RegExp(`^invalid ingest request: \\[${i}\\]\\.?${c.field}`));
          // Kept as sent (cut to fit only when over SQS's limit).
          if (Buffer.byteLength(c.text) <= DEAD_LETTER_BODY_BYTES) expect(letter.body).toBe(c.text);
        });
        hostile += bad.length;
        valid += expected.length;
      }),
      { numRuns: 300 },
    );
    console.log(`hostile envelopes tried at the ingest: ${hostile}, beside ${valid} valid ones`);
    expect(hostile).toBeGreaterThanOrEqual(300);
  });
});

describe('the ingest bounds who and how much it hears before it dead-letters anything', () => {
  test('refuses a caller no cluster names, whole (403) and with no dead letter: an outsider cannot fill the dead-letter queue', () => {
    const junk = post(JSON.stringify([{}, { type: 'x' }, 42]));
    const plan = refused(
      planIngest({ ...junk, caller: 'arn:aws:sts::111122223333:assumed-role/someone-else/x' }, clusters, new Set(), now),
    );
    expect(plan).toEqual({
      ok: false,
      status: 403,
      problem:
        "invalid ingest request: (caller): arn:aws:sts::111122223333:assumed-role/someone-else/x is named by no served cluster's ingestPrincipals, so it may send no events",
      deadLetters: [],
    });
  });

  test(`refuses a request of more than ${MAX_INGEST_EVENTS} events whole (413), as one dead letter of the request`, () => {
    const body = JSON.stringify(Array.from({ length: MAX_INGEST_EVENTS + 1 }, () => ({})));
    const plan = refused(planIngest(post(body), clusters, clusters, now));
    expect(plan.status).toBe(413);
    expect(plan.problem).toBe(
      `invalid ingest request: (body): holds ${MAX_INGEST_EVENTS + 1} events, over the ${MAX_INGEST_EVENTS} a request may carry; send them in smaller batches`,
    );
    expect(plan.deadLetters).toEqual([{ body, reason: plan.problem }]);
    // At the limit, each event is read (and these, refused, each dead-lettered).
    const atLimit = JSON.stringify(Array.from({ length: MAX_INGEST_EVENTS }, () => ({})));
    expect(refused(planIngest(post(atLimit), clusters, clusters, now)).deadLetters).toHaveLength(MAX_INGEST_EVENTS);
  });
});
