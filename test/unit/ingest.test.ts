// The ingest function's pure core: HTTP request in, envelopes to queue or a refusal (status, problem, dead letters) out.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { projectRoot } from '../../local/paths.ts';
import { MAX_ENVELOPE_BYTES, deduplicationId, makeEnvelope, messageGroupId, parseEnvelope, type Envelope } from '../../shared/envelope/index.ts';
import { DEAD_LETTER_BODY_BYTES, fitDeadLetter, planIngest, type IngestPlan, type IngestRequest } from '../../shared/ingest/index.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

const clusters = new Set(['prod', 'staging']);
const now = new Date('2026-11-22T10:00:00Z');

const pod = (extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'web-0', namespace: 'shop', uid: 'pod-uid', resourceVersion: '7', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'web', uid: 'sts-uid', controller: true }], ...extra },
  spec: { containers: [{ name: 'c', image: 'registry.example/web:1' }] },
});

const envelope = (cluster = 'prod', object = pod()): Envelope => makeEnvelope({ cluster, type: 'modified', object, source: 'outrigger://prod/forwarder', time: now });

function post(body: string, opts: { headers?: Record<string, string>; query?: Record<string, string> } = {}): IngestRequest {
  return { method: 'POST', headers: { 'content-type': 'application/json', ...opts.headers }, query: opts.query ?? {}, body };
}

/** A binary-mode ApiServerSource event (mode: Resource), as Knative sends it; `headers` overrides (undefined drops one). */
function knative(type: string, object: unknown, opts: { query?: Record<string, string>; headers?: Record<string, string | undefined> } = {}): IngestRequest {
  const headers: Record<string, string | undefined> = { 'content-type': 'application/json', 'ce-specversion': '1.0', 'ce-id': 'a1b2', 'ce-source': 'https://10.96.0.1:443', 'ce-type': type, 'ce-time': '2026-11-22T09:59:00Z', 'ce-subject': '/api/v1/namespaces/shop/pods/web-0', ...opts.headers };
  return { method: 'POST', headers, query: opts.query ?? { cluster: 'prod' }, body: JSON.stringify(object) };
}

function refused(plan: IngestPlan): Extract<IngestPlan, { ok: false }> {
  if (plan.ok) throw new Error(`expected a refusal, got ${JSON.stringify(plan.counts)}`);
  return plan;
}

describe('the ingest', () => {
  test('passes our envelopes through unchanged, one or a batch, with the ids the router relies on', () => {
    const one = planIngest(post(JSON.stringify(envelope())), clusters, now);
    expect(one).toEqual({ ok: true, envelopes: [envelope()], counts: { accepted: 1, envelopes: 1, knative: 0 } });

    const batch = [envelope(), envelope('staging', pod({ uid: 'other', ownerReferences: [] }))];
    const plan = planIngest(post(JSON.stringify(batch), { headers: { 'content-type': 'application/cloudevents-batch+json' } }), clusters, now);
    if (!plan.ok) throw new Error(plan.problem);
    expect(plan.envelopes).toEqual(batch);
    expect(plan.envelopes.map(messageGroupId)).toEqual(['prod/sts-uid', 'staging/other']);
    expect(plan.envelopes.map(deduplicationId)).toEqual(batch.map(deduplicationId));
    // An empty batch is nothing to do, not an error.
    expect(planIngest(post('[]'), clusters, now)).toMatchObject({ ok: true, counts: { accepted: 0 } });
  });

  test.each([
    ['dev.knative.apiserver.resource.add', 'added'],
    ['dev.knative.apiserver.resource.update', 'modified'],
    ['dev.knative.apiserver.resource.delete', 'deleted'],
  ])('makes a Knative %s event (binary mode, mode: Resource) our %s envelope for the ?cluster', (type, ours) => {
    const plan = planIngest(knative(type, pod()), clusters, now);
    if (!plan.ok) throw new Error(plan.problem);
    expect(plan.counts).toEqual({ accepted: 1, envelopes: 0, knative: 1 });
    const e = plan.envelopes[0]!;
    expect(e).toEqual(makeEnvelope({ cluster: 'prod', type: ours as 'added', object: pod(), source: 'https://10.96.0.1:443', time: new Date('2026-11-22T09:59:00Z') }));
    expect(e.id).toBe(`prod/pod-uid/7/${ours}`);
    expect(parseEnvelope(JSON.stringify(e))).toEqual(e);
    expect(messageGroupId(e)).toBe('prod/sts-uid');
  });

  test('takes Knative events in structured mode too, so a refused one can be posted again as the dead-letter queue kept it', () => {
    const plan = refused(planIngest(knative('dev.knative.apiserver.resource.add', pod({ uid: undefined })), clusters, now));
    const letter = plan.deadLetters[0]!;
    expect(JSON.parse(letter.body)).toMatchObject({ specversion: '1.0', id: 'a1b2', type: 'dev.knative.apiserver.resource.add', datacontenttype: 'application/json', data: { kind: 'Pod' } });
    const fixed = { ...(JSON.parse(letter.body) as Record<string, unknown>), data: pod() };
    expect(planIngest(post(JSON.stringify(fixed), { query: { cluster: 'prod' } }), clusters, now)).toMatchObject({ ok: true, counts: { knative: 1 } });
  });

  test('refuses Reference-mode events, which carry no object, saying how to fix the source', () => {
    const plan = refused(planIngest(knative('dev.knative.apiserver.ref.update', { apiVersion: 'v1', kind: 'Pod', name: 'web-0', namespace: 'shop' }), clusters, now));
    expect(plan.status).toBe(422);
    expect(plan.problem).toBe("invalid ingest request: type: is dev.knative.apiserver.ref.update, an ApiServerSource event in mode Reference, which carries no object: set the ApiServerSource's spec.mode to Resource");
    expect(plan.deadLetters).toEqual([{ body: expect.stringContaining('"type":"dev.knative.apiserver.ref.update"'), reason: plan.problem }]);
  });

  test.each<[string, IngestRequest, number, RegExp]>([
    ['an unknown type', post(JSON.stringify({ ...envelope(), type: 'com.example.other' })), 422, /^invalid ingest request: type: is com\.example\.other, not a type the ingest takes \(dev\.outrigger\.watch\.added, .*dev\.knative\.apiserver\.resource\.delete\)$/],
    ['a bookmark', post(JSON.stringify({ ...envelope(), type: 'dev.outrigger.watch.bookmark' })), 400, /^invalid ingest request: type: /],
    ['no type at all', post(JSON.stringify(pod())), 400, /^invalid ingest request: type: is required \(a CloudEvent attribute; in binary mode the ce-type header\)$/],
    ['a body that is not JSON', post('{"specversion":'), 400, /^invalid ingest request: \(body\): is not JSON/],
    ['binary data that is not JSON', { ...knative('dev.knative.apiserver.resource.add', {}), body: 'web-0' }, 400, /^invalid ingest request: data: is not JSON/],
    ['binary data of another content type', knative('dev.knative.apiserver.resource.add', pod(), { headers: { 'content-type': 'text/plain' } }), 415, /^invalid ingest request: datacontenttype: is text\/plain/],
    ['an object without a uid', knative('dev.knative.apiserver.resource.add', pod({ uid: undefined })), 400, /^invalid ingest request: data\.metadata\.uid: /],
    ['data that is not an object', knative('dev.knative.apiserver.resource.add', 'web-0'), 400, /^invalid ingest request: data: is not a Kubernetes object/],
    ['a missing ce-source', knative('dev.knative.apiserver.resource.add', pod(), { headers: { 'ce-source': undefined } }), 400, /^invalid ingest request: source: is required/],
    ['a bad ce-time', knative('dev.knative.apiserver.resource.add', pod(), { headers: { 'ce-time': 'yesterday' } }), 400, /^invalid ingest request: time: is "yesterday", not an RFC 3339 time$/],
    ['a Knative event without ?cluster', knative('dev.knative.apiserver.resource.add', pod(), { query: {} }), 400, /^invalid ingest request: \?cluster: is required for Knative events/],
    ['an unknown ?cluster', knative('dev.knative.apiserver.resource.add', pod(), { query: { cluster: 'dev' } }), 422, /^invalid ingest request: \?cluster: "dev" is not a cluster this deployment serves \(prod, staging\)$/],
    ['an envelope of an unknown cluster', post(JSON.stringify(envelope('dev'))), 422, /^invalid ingest request: cluster: "dev" is not a cluster this deployment serves/],
    ['an envelope of another cluster than ?cluster', post(JSON.stringify(envelope('staging')), { query: { cluster: 'prod' } }), 422, /^invalid ingest request: cluster: is "staging", but the request is for \?cluster=prod$/],
    ['a GET', { ...post(''), method: 'GET' }, 405, /^invalid ingest request: \(method\): is GET/],
    ['an empty body', post(''), 400, /^invalid ingest request: \(body\): is empty$/],
  ])('refuses %s, naming the problem', (_, request, status, problem) => {
    const plan = refused(planIngest(request, clusters, now));
    expect(plan.status).toBe(status);
    expect(plan.problem).toMatch(problem);
    // Every refusal with a body is kept in the dead-letter queue with its reason; SQS takes no empty message.
    expect(plan.deadLetters).toHaveLength(request.body ? 1 : 0);
    if (request.body) expect(plan.deadLetters[0]!.reason).toBe(plan.problem);
  });

  test('refuses an event whose envelope would exceed an SQS message, and dead-letters it cut to fit', () => {
    const big = pod();
    big.spec = { padding: 'x'.repeat(MAX_ENVELOPE_BYTES) };
    const plan = refused(planIngest(knative('dev.knative.apiserver.resource.add', big), clusters, now));
    expect(plan.status).toBe(413);
    expect(plan.problem).toMatch(/^invalid ingest request: \(body\): makes an envelope of \d+ bytes, over the 262144-byte limit of an SQS message$/);
    const letter = plan.deadLetters[0]!;
    expect(Buffer.byteLength(letter.body)).toBe(DEAD_LETTER_BODY_BYTES);
    expect(letter.reason).toMatch(/\[the dead letter holds the first 258048 of \d+ bytes\]$/);
    // Cutting never splits a character.
    const cut = fitDeadLetter({ body: 'é'.repeat(DEAD_LETTER_BODY_BYTES), reason: 'r' });
    expect(Buffer.byteLength(cut.body)).toBeLessThanOrEqual(DEAD_LETTER_BODY_BYTES);
    expect(cut.body).not.toContain('\uFFFD');
  });

  test('refuses a batch whole when one member is bad: one dead letter per event, each with its own reason', () => {
    const good = envelope();
    const bad = { ...envelope('prod', pod({ uid: 'x' })), type: 'dev.knative.apiserver.ref.add' };
    const plan = refused(planIngest(post(JSON.stringify([good, bad, 42])), clusters, now));
    expect(plan.status).toBe(422);
    expect(plan.problem).toMatch(/^invalid ingest request: \[1\]\.type: is dev\.knative\.apiserver\.ref\.add, .* \(and 1 more refused event\(s\)\)$/);
    expect(plan.deadLetters.map((l) => l.body)).toEqual([JSON.stringify(good), JSON.stringify(bad), '42']);
    expect(plan.deadLetters[0]!.reason).toMatch(/^not queued: refused with the rest of its request \(invalid ingest request: \[1\]\.type: /);
    expect(plan.deadLetters[2]!.reason).toBe('invalid ingest request: [2]: is not a CloudEvent (a JSON object)');
  });

  test('names the field of a bad envelope as the router would, under its place in the batch', () => {
    const e = envelope() as unknown as { data: { object: { metadata: Record<string, unknown> } } };
    delete e.data.object.metadata.resourceVersion;
    const plan = refused(planIngest(post(JSON.stringify([envelope(), e])), clusters, now));
    expect(plan.problem).toMatch(/^invalid ingest request: \[1\]\.data\.object\.metadata\.resourceVersion: /);
  });

  test.each([
    ['ingest-knative.json', { ok: true, counts: { accepted: 1, envelopes: 0, knative: 1 } }],
    ['ingest-envelopes.json', { ok: true, counts: { accepted: 1, envelopes: 1, knative: 0 } }],
    ['ingest-reference.json', { ok: false, status: 422 }],
  ])('reads the sample Function URL event events/%s', (file, outcome) => {
    const event = JSON.parse(readFileSync(join(projectRoot, 'events', file), 'utf8')) as APIGatewayProxyEventV2;
    const request = { method: event.requestContext.http.method, headers: event.headers, query: event.queryStringParameters ?? {}, body: event.body ?? '' };
    expect(planIngest(request, new Set(['local']), now)).toMatchObject(outcome);
  });
});
