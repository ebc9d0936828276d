// The estimate as `npm run bench:cost` and `outrigger cost` print it: dollars a month per service, and the counts
// each is billed on.
import { HOURS_PER_MONTH, type Estimate } from './model.ts';

const n = (v: number) => Math.round(v).toLocaleString('en-US');
const usd = (v: number) => `$${v.toFixed(2)}`;

export function formatEstimate(name: string, e: Estimate): string {
  const c = e.aws.counts;
  const f = e.fleet;
  const lambda = Object.entries(c.lambda)
    .map(([fn, l]) => `${fn} ${n(l.invocations)} (${n(l.gbSeconds)} GB-s)`)
    .join(', ');
  return [
    `${name}, ${e.region}: ${f.clusters} cluster(s); per cluster ${n(f.changesPerDay)} changes/day at ${f.replicas} replicas, ` +
      `${n(f.mapInputs)} map inputs (${n(f.mapInputChangesPerDay)} changes/day), ${n(f.crds)} CRDs; ` +
      `${f.polledQueuesPerCluster} polled queues each, ${f.memoryMb} MB functions; a 30-day month (${HOURS_PER_MONTH} h)`,
    `  Lambda      ${usd(e.aws.usd.lambda).padStart(10)}  invocations: ${lambda}`,
    `  SQS         ${usd(e.aws.usd.sqs).padStart(10)}  requests: send ${n(c.sqs.send)}, receive ${n(c.sqs.receive)}, delete ${n(c.sqs.delete)}, change visibility ${n(c.sqs.changeVisibility)}, idle polls ${n(c.sqs.idleReceive)}`,
    `  DynamoDB    ${usd(e.aws.usd.dynamodb).padStart(10)}  read units ${n(c.dynamodb.readUnits)}, write units ${n(c.dynamodb.writeUnits)}`,
    `  EventBridge ${usd(e.aws.usd.eventbridge).padStart(10)}  scheduled events ${n(c.scheduledEvents)}`,
    `  AWS total   ${usd(e.aws.usd.total).padStart(10)}`,
    `  with the forwarders (2 pods a cluster): ${usd(e.outrigger.fargate)} on Fargate, ${usd(e.outrigger.node)} as node shares`,
    `  in-cluster (${e.inClusterPods} pod${e.inClusterPods === 1 ? '' : 's'} a cluster):${' '.repeat(e.inClusterPods === 1 ? 11 : 10)}${usd(e.inCluster.fargate)} on Fargate, ${usd(e.inCluster.node)} as node shares`,
    `  Outrigger / in-cluster: ${e.ratio.fargate}× on Fargate, ${e.ratio.node}× as node shares`,
  ].join('\n');
}
