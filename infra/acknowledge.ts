// Rules of cdk-nag's AwsSolutions pack that the construct breaks on purpose, acknowledged where the resource is
// made, each with its reason (Validations.of(...).acknowledge: recorded in the construct's metadata, which cdk-nag
// reads; the construct does not depend on cdk-nag). test/unit/cdk-nag.test.ts runs the pack.
import { Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/** Acknowledges that `resource`'s policy names `resource` with a wildcard (AwsSolutions-IAM5), for `reason`. */
export function acknowledgeWildcard(scope: IConstruct, resource: string, reason: string): void {
  Validations.of(scope).acknowledge({ id: `AwsSolutions-IAM5[Resource::${flat(Stack.of(scope).resolve(resource))}]`, reason });
}

/**
 * A resolved value as cdk-nag names it in a finding: strings as they are, Fn::Join joined, a Ref as `<Name>`, a
 * GetAtt as `<Name.Attribute>`.
 */
function flat(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as { Ref?: string; 'Fn::GetAtt'?: [string, string]; 'Fn::Join'?: [string, unknown[]] };
  if (v.Ref !== undefined) return `<${v.Ref}>`;
  if (v['Fn::GetAtt']) return `<${v['Fn::GetAtt'][0]}.${v['Fn::GetAtt'][1]}>`;
  if (v['Fn::Join']) return v['Fn::Join'][1].map(flat).join(v['Fn::Join'][0]);
  return JSON.stringify(value);
}
