// goJson writes what Go's encoding/json writes, so a ControllerRevision's data survives the apiserver's own
// re-encoding (the integration tests show the garbage collector's patch accepted; these pin the encoding).
import fc from 'fast-check';
import { goJson } from '../../shared/json.ts';

describe('goJson', () => {
  test('sorts keys, writes no spaces, and escapes as Go does (<, >, &, U+2028, U+2029; control characters)', () => {
    expect(goJson({ name: 'c', image: 'a&b<c>', args: ['x && y'], n: 1, f: 0.5, t: true, z: null })).toBe(
      '{"args":["x \\u0026\\u0026 y"],"f":0.5,"image":"a\\u0026b\\u003cc\\u003e","n":1,"name":"c","t":true,"z":null}',
    );
    expect(goJson('\u2028\u2029\b\f\n\r\t\u0001"\\')).toBe('"\\u2028\\u2029\\b\\f\\n\\r\\t\\u0001\\"\\\\"');
    expect(goJson([1e21, 1e-7, 123456789012, -0.25])).toBe('[1e+21,1e-7,123456789012,-0.25]');
    // Keys JavaScript would put first (integer-like) and keys whose UTF-16 and UTF-8 orders differ.
    expect(goJson({ b: 1, 10: 2, 2: 3, '\u{1F600}': 4, '\uFF21': 5 })).toBe('{"10":2,"2":3,"b":1,"\uFF21":5,"\u{1F600}":4}');
    expect(goJson({ a: undefined, b: [undefined] })).toBe('{"b":[null]}');
    expect(() => goJson(Number.NaN)).toThrow(/not a JSON number/);
  });

  test('reads back as the same value, and writing that again gives the same bytes', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = goJson(value);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(text).not.toMatch(/[<>&\u2028\u2029]/);
        expect(goJson(JSON.parse(text))).toBe(text);
      }),
      { numRuns: 500 },
    );
  });
});
