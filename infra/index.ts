// The package entry `outrigger/infra` (package.json "exports"): the construct for a CDK app of one's own
// (docs/getting-started/deploy.md).
export { Outrigger, DEFAULT_FORWARDER, type OutriggerProps } from './outrigger.ts';
export { OutriggerCluster, CONTROLLERS_GROUP, MIGRATORS_GROUP, type ClusterAccessMode } from './cluster.ts';
export { OutriggerStack, type OutriggerStackProps } from './stack.ts';
export { deployableClusters } from './config.ts';
export type { ClusterConfig } from '../shared/clusters.ts';
