import fc from 'fast-check';
import {
  compileSelector,
  matches,
  parseSelector,
  selectorAt,
  selectorString,
  SelectorError,
  type LabelSelector,
} from '../../shared/ownership/index.ts';

describe('parseSelector', () => {
  test.each([
    ['', {}],
    ['a=b', { matchLabels: { a: 'b' } }],
    [' a == b , c != d ', { matchLabels: { a: 'b' }, matchExpressions: [{ key: 'c', operator: 'NotIn', values: ['d'] }] }],
    [
      'e in (x, y),f notin (z),g,!h',
      {
        matchExpressions: [
          { key: 'e', operator: 'In', values: ['x', 'y'] },
          { key: 'f', operator: 'NotIn', values: ['z'] },
          { key: 'g', operator: 'Exists' },
          { key: 'h', operator: 'DoesNotExist' },
        ],
      },
    ],
    ['a=b,a=c', { matchLabels: { a: 'b' }, matchExpressions: [{ key: 'a', operator: 'In', values: ['c'] }] }],
    [
      'a=,b in (),c in (x,)',
      {
        matchLabels: { a: '' },
        matchExpressions: [
          { key: 'b', operator: 'In', values: [''] },
          { key: 'c', operator: 'In', values: ['x', ''] },
        ],
      },
    ],
    ['a=in,in=a', { matchLabels: { a: 'in', in: 'a' } }],
    [
      'leaderworkerset.sigs.k8s.io/name=web,leaderworkerset.sigs.k8s.io/worker-index=0',
      { matchLabels: { 'leaderworkerset.sigs.k8s.io/name': 'web', 'leaderworkerset.sigs.k8s.io/worker-index': '0' } },
    ],
  ] as Array<[string, LabelSelector]>)('%j', (input, expected) => {
    expect(parseSelector(input)).toEqual(expected);
  });

  test.each([
    ['a=b,', /trailing comma/],
    [',a', /expected a key, found ','/],
    ['a b', /expected an operator .* after key "a", found 'b'|expected ',' between requirements/],
    ['a=b c', /expected ',' between requirements, found 'c'/],
    ['a in x', /expected '\(' after the operator, found 'x'/],
    ['a in (x', /expected ',' or '\)' in the value list, found the end/],
    ['a notin', /expected '\(' after the operator, found the end/],
    ['!a=b', /expected ',' between requirements, found '='/],
    ['!', /expected a key after !, found the end/],
    ['a>1', /operator '>' \(Gt\/Lt\) cannot be held by a LabelSelector/],
    ['a=b)', /expected ',' between requirements, found '\)'/],
    ['-a=b', /key "-a" is not a valid label key/],
    ['a=b/c', /value "b\/c" is not a valid label value/],
    ['a=b,c in (x,-y)', /requirement 2: .*value "-y"/],
  ])('%j is refused, naming the problem', (input, problem) => {
    let error: unknown;
    try {
      parseSelector(input);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SelectorError);
    expect((error as Error).message).toMatch(problem);
    expect((error as Error).message).toContain(JSON.stringify(input));
  });

  test('the string form of any selector parses back to a selector that matches the same labels', () => {
    const keys = ['a', 'b', 'example.com/c'];
    const values = ['x', 'y', ''];
    const requirement = fc.oneof(
      fc.record({
        key: fc.constantFrom(...keys),
        operator: fc.constantFrom('In' as const, 'NotIn' as const),
        values: fc.uniqueArray(fc.constantFrom(...values), { minLength: 1, maxLength: 3 }),
      }),
      fc.record({ key: fc.constantFrom(...keys), operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const) }),
    );
    const selector: fc.Arbitrary<LabelSelector> = fc.record(
      {
        matchLabels: fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 2 }),
        matchExpressions: fc.array(requirement, { maxLength: 4 }),
      },
      { requiredKeys: [] },
    );
    const labels = fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 3 });
    fc.assert(
      fc.property(selector, fc.array(labels, { minLength: 1, maxLength: 10 }), (sel, objects) => {
        const compiled = compileSelector(sel);
        const reparsed = compileSelector(parseSelector(selectorString(compiled)!));
        expect(objects.map((l) => matches(reparsed, l))).toEqual(objects.map((l) => matches(compiled, l)));
      }),
      { numRuns: 500, seed: 11 },
    );
  });
});

describe('selectorAt', () => {
  test('reads either form; absent matches nothing; anything else is refused', () => {
    expect(matches(selectorAt('a=b'), { a: 'b' })).toBe(true);
    expect(matches(selectorAt('a=b'), { a: 'c' })).toBe(false);
    expect(matches(selectorAt({ matchLabels: { a: 'b' } }), { a: 'b' })).toBe(true);
    expect(selectorAt(undefined)).toEqual({ kind: 'none' });
    expect(selectorAt(null)).toEqual({ kind: 'none' });
    expect(() => selectorAt(7)).toThrow(/expected a LabelSelector or its string form, found number/);
    expect(() => selectorAt(['a'])).toThrow(/found an array/);
    expect(() => selectorAt('a b c')).toThrow(SelectorError);
  });
});
