// The repository's stack: one Outrigger construct (infra/outrigger.ts) and nothing else. Its construct id is
// `Default`, which CDK leaves out of logical ids, so the construct's own resources (the state table, the functions)
// keep the logical ids a stack made before the construct existed; each cluster's moved into its construct
// (docs/operations/runbook.md#a-stack-deployed-before-the-construct).
import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { Outrigger, type OutriggerProps } from './outrigger.ts';

export { MAX_RECEIVE_COUNT, type QueuePair } from './queues.ts';
export { CLUSTERS_FILE_IN_LAYER, FUNCTION_ENVIRONMENT, TARGETS_PER_RULE } from './functions.ts';
export { EXAMPLE_HOOKS } from './hooks.ts';
export { RUNTIME } from './bundling.ts';

export type OutriggerStackProps = StackProps & OutriggerProps;

export class OutriggerStack extends Stack {
  readonly outrigger: Outrigger;

  constructor(scope: Construct, id: string, props: OutriggerStackProps) {
    super(scope, id, props);
    this.outrigger = new Outrigger(this, 'Default', props);
  }
}
