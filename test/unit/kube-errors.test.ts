import fc from 'fast-check';
import { KubeError, kubeErrorFromResponse } from '../../shared/kube/index.ts';
import { kubeErrorFromFailure, parseRetryAfter } from '../../shared/kube/errors.ts';

const status = (code: number, reason: string, message = 'm') =>
  JSON.stringify({ kind: 'Status', status: 'Failure', code, reason, message });

describe('apiserver answers map to error kinds', () => {
  test.each([
    [404, status(404, 'NotFound'), 'NotFound'],
    [409, status(409, 'AlreadyExists'), 'AlreadyExists'],
    [409, status(409, 'Conflict'), 'Conflict'],
    [422, status(422, 'Invalid'), 'Invalid'],
    [403, status(403, 'Forbidden'), 'Forbidden'],
    [401, status(401, 'Unauthorized'), 'Unauthorized'],
    [410, status(410, 'Expired'), 'Gone'],
    [410, status(410, 'Gone'), 'Gone'],
    [429, status(429, 'TooManyRequests'), 'Transient'],
    [500, status(500, 'InternalError'), 'Transient'],
    [503, 'upstream connect error', 'Transient'],
    [504, status(504, 'Timeout'), 'Transient'],
    [400, status(400, 'BadRequest'), 'BadRequest'],
    [418, 'teapot', 'Unknown'],
  ])('%i %s is %s', (code, body, kind) => {
    const err = kubeErrorFromResponse(code, body, 'GET /x');
    expect(err).toBeInstanceOf(KubeError);
    expect(err.kind).toBe(kind);
    expect(err.status).toBe(code);
    expect(err.message).toContain('GET /x');
  });

  test('the reason decides over the code (a 409 on create is AlreadyExists)', () => {
    expect(kubeErrorFromResponse(409, status(409, 'AlreadyExists'), 'POST').kind).toBe('AlreadyExists');
    expect(kubeErrorFromResponse(409, '', 'PUT').kind).toBe('Conflict');
  });

  test('field causes of an Invalid answer are kept', () => {
    const body = JSON.stringify({
      kind: 'Status',
      code: 422,
      reason: 'Invalid',
      message: 'bad',
      details: { causes: [{ field: 'data', message: 'field is immutable' }] },
    });
    expect(kubeErrorFromResponse(422, body, 'PATCH').causes).toEqual([{ field: 'data', message: 'field is immutable' }]);
  });

  test('every 5xx and no answer at all are transient; no 4xx but 429 is', () => {
    fc.assert(
      fc.property(fc.integer({ min: 400, max: 599 }), fc.string(), (code, body) => {
        const kind = kubeErrorFromResponse(code, body, 'X').kind;
        expect(kind === 'Transient').toBe(code >= 500 || code === 429);
      }),
    );
    const refused = Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    const err = kubeErrorFromFailure(refused, 'GET /y');
    expect(err.kind).toBe('Transient');
    expect(err.message).toBe('GET /y: no answer from the apiserver (ECONNREFUSED: fetch failed)');
  });

  test("a 410 to a continued list carries the apiserver's token to go on from; a Status's retryAfterSeconds outranks the header", () => {
    const expired = JSON.stringify({
      kind: 'Status',
      status: 'Failure',
      code: 410,
      reason: 'Expired',
      message: 'too old',
      metadata: { continue: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ' },
    });
    expect(kubeErrorFromResponse(410, expired, 'GET').continueToken).toBe('eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ');
    expect(kubeErrorFromResponse(410, status(410, 'Expired'), 'GET').continueToken).toBeUndefined();
    expect(kubeErrorFromResponse(429, status(429, 'TooManyRequests'), 'GET', '3').retryAfterSeconds).toBe(3);
    const withDetails = JSON.stringify({ kind: 'Status', code: 429, reason: 'TooManyRequests', details: { retryAfterSeconds: 5 } });
    expect(kubeErrorFromResponse(429, withDetails, 'GET', '3').retryAfterSeconds).toBe(5);
  });

  test('Retry-After: delta-seconds, or an HTTP date (never negative); anything else is no advice', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (n) => {
        expect(parseRetryAfter(String(n), now)).toBe(n);
        expect(parseRetryAfter(new Date(now.getTime() + n * 1000).toUTCString(), now)).toBe(n);
        expect(parseRetryAfter(new Date(now.getTime() - n * 1000).toUTCString(), now)).toBe(0);
      }),
    );
    for (const v of [undefined, '', ' ', '-1', '1.5', 'soon']) expect(parseRetryAfter(v, now)).toBeUndefined();
  });
});
