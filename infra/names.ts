// How the construct names what it makes: construct ids in PascalCase, and stack outputs under fixed names.
import { CfnOutput } from 'aws-cdk-lib';
import type { Construct } from 'constructs';

/** `FooBar` for `foo-bar`: a function's or cluster's part of construct ids and output names. */
export function pascal(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}

/**
 * A stack output named exactly `name`, wherever the construct sits in the tree: the docs, the forwarder's
 * manifests and scripts read outputs by these names (`<Cluster>EventsQueueUrl`), which a nested construct's
 * generated logical id (its path and a hash) would otherwise change. So one stack holds one Outrigger.
 */
export function output(scope: Construct, name: string, description: string, value: string): CfnOutput {
  const out = new CfnOutput(scope, name, { description, value });
  out.overrideLogicalId(name);
  return out;
}
