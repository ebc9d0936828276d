// Which definitions may call a Lambda hook (shared/hooks/bindings.ts; docs/reference/hooks.md#who-may-call-a-lambda-hook).
import fc from 'fast-check';
import { lambdaBindings } from '../../functions/metacontroller/environment.ts';
import {
  bindingRefusal,
  functionNameOf,
  parseLambdaBindings,
  type CallerRule,
  type HookCallerIdentity,
} from '../../shared/hooks/bindings.ts';

const snap = [{ functionName: 'snap', callers: [{ cluster: 'prod', kind: 'MapController' as const, name: 'backups' }] }];
const caller = (extra: Partial<HookCallerIdentity> = {}): HookCallerIdentity => ({
  cluster: 'prod',
  kind: 'MapController',
  name: 'backups',
  namespace: 'team-a',
  ...extra,
});

describe('trust boundary: a Lambda hook is called only for the definitions it is bound to', () => {
  test('a caller its binding names is let through, by name, name:qualifier or ARN', () => {
    for (const name of ['snap', 'snap:live', 'arn:aws:lambda:eu-west-1:111122223333:function:snap:3'])
      expect(bindingRefusal(snap, name, caller())).toBeUndefined();
  });

  test("another cluster's, kind's or name's definition is refused, naming the binding; a function bound to nobody is refused", () => {
    for (const other of [caller({ cluster: 'dev' }), caller({ kind: 'CompositeController' }), caller({ name: 'stranger' }), undefined])
      expect(bindingRefusal(snap, 'snap', other)).toBe(
        `Lambda function snap is bound to MapController backups in cluster prod, not to this ${other?.kind ?? 'definition'}`,
      );
    expect(bindingRefusal(snap, 'other', caller())).toBe('Lambda function other is bound to no definition by this deployment');
    expect(bindingRefusal([{ functionName: 'snap', callers: [] }], 'snap', caller())).toMatch(/bound to no definition/);
  });

  test('a rule matches exactly the definitions that agree on every field it gives (property)', () => {
    const value = (xs: string[]) => fc.option(fc.constantFrom(...xs), { nil: undefined });
    const rule = fc.record({
      cluster: value(['prod', 'dev']),
      kind: value(['MapController', 'CompositeController', 'DecoratorController']),
      name: value(['a', 'b']),
      namespace: value(['team-a', 'team-b']),
    }) as fc.Arbitrary<CallerRule>;
    const who = fc.record({
      cluster: fc.constantFrom('prod', 'dev'),
      kind: fc.constantFrom('MapController', 'CompositeController', 'DecoratorController'),
      name: fc.constantFrom('a', 'b'),
      namespace: fc.constantFrom('team-a', 'team-b'),
    }) as fc.Arbitrary<HookCallerIdentity>;
    fc.assert(
      fc.property(fc.array(rule, { maxLength: 3 }), who, (callers, c) => {
        const agrees = (r: CallerRule) => (Object.keys(r) as Array<keyof CallerRule>).every((k) => r[k] === undefined || r[k] === c[k]);
        expect(bindingRefusal([{ functionName: 'f', callers }], 'f', c) === undefined).toBe(callers.some(agrees));
      }),
    );
  });

  test('in AWS, without OUTRIGGER_HOOK_BINDINGS, no function is bound; the local runtime checks none unless it is set', () => {
    expect(lambdaBindings({})).toEqual([]);
    expect(lambdaBindings({ OUTRIGGER_LAMBDA_ENDPOINT: 'http://127.0.0.1:1' })).toBeUndefined();
    expect(lambdaBindings({ OUTRIGGER_HOOK_BINDINGS: JSON.stringify(snap) })).toEqual(snap);
    expect(() => lambdaBindings({ OUTRIGGER_HOOK_BINDINGS: '[{"functionName":"f","callers":[{"team":"a"}]}]' })).toThrow(
      'Lambda hook bindings: 0.callers.0.team: is not a known field',
    );
    expect(() => parseLambdaBindings([{ functionName: '', callers: [] }])).toThrow(/functionName/);
    expect(functionNameOf('arn:aws:lambda:eu-west-1:1:function:f')).toBe('f');
  });
});
