// The MapController hooks the map function may call: the Lambda functions the deployment names, each bound to the
// definitions that may call it, the example's hooks on request, and the secret each MapController's webhook signing
// key is derived from.
import { ArnFormat, Duration, Stack, Validations, type RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { functions } from '../functions/index.ts';
import { parseLambdaBindings, type CallerRule } from '../shared/hooks/bindings.ts';
import { parseWebhookAllowList } from '../shared/hooks/egress.ts';
import { acknowledgeWildcard } from './acknowledge.ts';
import { bundled } from './bundling.ts';
import { roleAndLogs, type FunctionSettings } from './functions.ts';
import { output, pascal } from './names.ts';

/** The example hooks: function name -> export of examples/snapshot-schedule/hooks.ts. */
export const EXAMPLE_HOOKS: Record<string, string> = {
  'outrigger-snapshot-schedule-map': 'map',
  'outrigger-snapshot-schedule-tombstone': 'tombstone',
};

/**
 * A Lambda function the map function may invoke as a hook, and the definitions that may name it: each rule matches
 * a definition by every field it gives (cluster, kind, name, the namespace of its ServiceAccount;
 * docs/reference/hooks.md#who-may-call-a-lambda-hook).
 */
export interface BoundHookFunction {
  /** By name, in this account and region, or the function. */
  function: string | lambda.IFunction;
  callers: CallerRule[];
}

/** The example's MapController, the only caller of its hooks. */
const EXAMPLE_CALLER: CallerRule = { kind: 'MapController', name: 'snapshotschedule-controller' };

/** What of the deployment's props (OutriggerProps) names hooks. */
export interface HookSettings {
  mapHookFunctions?: readonly BoundHookFunction[] | undefined;
  examples?: boolean | undefined;
  webhookAllow?: readonly string[] | undefined;
}

/** The hooks the map function may invoke, the example's hooks on request, and the webhook signing secret. */
export function addMapHooks(
  scope: Construct,
  fns: ReadonlyMap<string, NodejsFunction>,
  hooks: HookSettings,
  settings: FunctionSettings,
  removalPolicy: RemovalPolicy,
): void {
  const stack = Stack.of(scope);
  const callers = functions.filter((f) => f.callsHooks);
  if (callers.length !== 1) throw new Error(`one function calls MapController hooks, not ${callers.length}`);
  const map = fns.get(callers[0]!.name)!;
  const arns: string[] = [];
  const byName = (name: string) => [
    stack.formatArn({ service: 'lambda', resource: 'function', resourceName: name, arnFormat: ArnFormat.COLON_RESOURCE_NAME }),
    stack.formatArn({ service: 'lambda', resource: 'function', resourceName: `${name}:*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME }),
  ];
  const bindings: Array<{ functionName: string; callers: CallerRule[] }> = [];
  // A hook may be called through an alias or version (hooks.<x>.lambda.qualifier).
  for (const [i, hook] of (hooks.mapHookFunctions ?? []).entries()) {
    const fn = boundHook(hook, i);
    arns.push(...(typeof fn.function === 'string' ? byName(fn.function) : [fn.function.functionArn, `${fn.function.functionArn}:*`]));
    bindings.push({ functionName: typeof fn.function === 'string' ? fn.function : fn.function.functionName, callers: fn.callers });
  }
  if (hooks.examples) {
    for (const [functionName, handler] of Object.entries(EXAMPLE_HOOKS)) {
      new NodejsFunction(scope, pascal(functionName), {
        ...bundled('examples/snapshot-schedule/hooks.ts', settings.architecture),
        ...roleAndLogs(scope, settings, pascal(functionName), removalPolicy),
        functionName,
        handler,
        description: `SnapshotSchedule example: the ${handler} hook`,
        timeout: Duration.seconds(10),
        memorySize: 256,
      });
      arns.push(...byName(functionName));
      bindings.push({ functionName, callers: [EXAMPLE_CALLER] });
    }
  }
  // Always set, so that a function bound to nobody is invoked for nobody (functions/metacontroller/environment.ts).
  map.addEnvironment('OUTRIGGER_HOOK_BINDINGS', stack.toJsonString(bindings));
  if (arns.length) {
    map.addToRolePolicy(new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: arns }));
    for (const arn of arns.filter((a) => a.endsWith(':*')))
      acknowledgeWildcard(
        map.role!,
        arn,
        "A hook may be called through one of its versions or aliases (hooks.<x>.lambda.qualifier): the named function's qualifiers, no other function",
      );
  }
  // Webhooks authenticate the map function by the HMAC it signs each request with (docs/reference/hooks.md#signatures):
  // the secret is generated here and read by the map function alone, which derives each MapController's key from it;
  // a receiver's operator is given only its controller's key (`outrigger hook-key`), never this secret.
  const hookSecret = new secretsmanager.Secret(scope, 'MapHookSigningSecret', {
    description:
      'What each MapController webhook signing key and each cluster forwarder key are derived from (HKDF); outrigger hook-key and forwarder-key print them',
    generateSecretString: { passwordLength: 64, excludePunctuation: true },
  });
  Validations.of(hookSecret).acknowledge({
    id: 'AwsSolutions-SMG4',
    reason:
      'The secret every MapController webhook key is derived from: rotation on a schedule would break verification until each receiver had its new key, so an operator rotates it with the receivers (docs/reference/hooks.md#signatures)',
  });
  // Where webhooks may go (docs/reference/hooks.md#where-webhooks-may-go): checked here, so a bad entry fails the synth.
  if (hooks.webhookAllow?.length) {
    parseWebhookAllowList(hooks.webhookAllow);
    map.addEnvironment('OUTRIGGER_WEBHOOK_ALLOW', JSON.stringify(hooks.webhookAllow));
  }
  // The router derives each cluster's forwarder key from the same secret, to verify the forwarder's envelope
  // signatures (docs/operations/security.md#events-are-triggers-not-state).
  const readers = [map, ...functions.filter((f) => f.events).map((f) => fns.get(f.name)!)];
  for (const fn of readers) {
    fn.addEnvironment('OUTRIGGER_HOOK_SECRET_ARN', hookSecret.secretArn);
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [hookSecret.secretArn] }));
  }
  output(
    scope,
    'MapHookSigningSecretArn',
    "The signing secret: outrigger hook-key derives each MapController's key from it, outrigger forwarder-key each cluster's forwarder key",
    hookSecret.secretArn,
  );
}

/** An entry of mapHookFunctions, checked: a function with no callers (the bare name of earlier versions) is refused. */
function boundHook(hook: unknown, i: number): BoundHookFunction {
  const given = hook as Partial<BoundHookFunction> | string | null;
  const name = typeof given === 'string' ? given : given && typeof given.function === 'string' ? given.function : `entry ${i}`;
  if (!given || typeof given !== 'object' || !Array.isArray(given.callers) || !given.function)
    throw new Error(
      `mapHookFunctions: ${name} names no callers: bind it to the definitions that may call it, as { "function": "${name}", "callers": [{ "cluster": "<id>", "kind": "MapController", "name": "<controller>" }] } (docs/reference/hooks.md#who-may-call-a-lambda-hook)`,
    );
  // The rules' fields, checked as the map function reads them.
  parseLambdaBindings([{ functionName: 'f', callers: given.callers }]);
  return given as BoundHookFunction;
}
