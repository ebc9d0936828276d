// The string form of label selectors (parseSelector) against the real apiserver: for random strings in every
// spelling the syntax allows, our parse selects exactly what the apiserver's own filtering selects; what the
// apiserver refuses, parseSelector refuses too (and Gt/Lt, which it takes, by name).
import fc from 'fast-check';
import { gvr, isKubeError } from '../../shared/kube/index.ts';
import { compileSelector, matches, parseSelector, SelectorError } from '../../shared/ownership/index.ts';
import { adminClient, createNamespace } from '../testbed/index.ts';

const configMaps = gvr('', 'v1', 'configmaps');
const keys = ['a', 'b', 'example.com/c'];
const values = ['x', 'y', ''];

const space = fc.constantFrom('', ' ', '  ');
const value = fc.constantFrom(...values);
const valueList = fc.array(value, { minLength: 1, maxLength: 3 });
// One requirement, in any of its spellings, spaced at random wherever the syntax allows.
const requirement: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom(...keys), fc.constantFrom('=', '==', '!=', 'in', 'notin', 'exists', '!'), value, valueList, space, space, space)
  .map(([key, op, v, vs, s1, s2, s3]) => {
    switch (op) {
      case 'exists':
        return `${s1}${key}${s2}`;
      case '!':
        return `${s1}!${s2}${key}${s3}`;
      case 'in':
      case 'notin':
        return `${s1}${key} ${op}${s2}(${vs.join(`${s3},`)})${s3}`;
      default:
        return `${s1}${key}${s2}${op}${s3}${v}`;
    }
  });
const selector = fc.array(requirement, { maxLength: 4 }).map((rs) => rs.join(','));

test('parseSelector selects what the apiserver selects, for random strings', async () => {
  const ns = await createNamespace('selstr');
  const admin = adminClient();
  const labelSets = fc.sample(fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 3 }), {
    numRuns: 40,
    seed: 42,
  });
  const objects = await Promise.all(
    labelSets.map((labels, i) =>
      admin.create(configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `o-${i}`, namespace: ns, labels } }),
    ),
  );
  let compared = 0;
  await fc.assert(
    fc.asyncProperty(selector, async (s) => {
      const compiled = compileSelector(parseSelector(s));
      const ours = objects
        .filter((o) => matches(compiled, o.metadata.labels))
        .map((o) => o.metadata.name)
        .sort();
      const server = await admin.list(configMaps, { namespace: ns, labelSelector: s });
      expect(ours).toEqual(server.items.map((o) => o.metadata.name).sort());
      compared += 1;
    }),
    { numRuns: 200, seed: 7 },
  );
  expect(compared).toBe(200);
});

test.each(['a=b,', ',a', 'a b', 'a=b c', 'a in x', 'a in (x', 'a notin', '!a=b', '!', 'a=b)', '-a=b', 'a=b/c', 'a in (x,-y)'])(
  '%j: the apiserver refuses it, and so does parseSelector',
  async (s) => {
    const ns = await createNamespace('selbad');
    const refused = await adminClient()
      .list(configMaps, { namespace: ns, labelSelector: s })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(isKubeError(refused) && refused.status).toBe(400);
    expect(() => parseSelector(s)).toThrow(SelectorError);
  },
);

test('Gt and Lt, which the apiserver takes but a LabelSelector cannot hold, are refused by name', async () => {
  const ns = await createNamespace('selgt');
  await expect(adminClient().list(configMaps, { namespace: ns, labelSelector: 'a>1,b' })).resolves.toBeDefined();
  expect(() => parseSelector('a>1,b')).toThrow(/operator '>' \(Gt\/Lt\) cannot be held by a LabelSelector/);
});
