// The price table the cost estimate reads (docs/operations/cost.md#prices): each price with the page it was read
// from and the day, for us-east-1 and eu-west-1. AWS's own pricing pages could not be reached from the machine that
// wrote this table (only a search index of public pages), so each figure comes from the page named, which states
// it; `checked: false` marks a figure no reachable page stated for that region.

export interface Price {
  /** Dollars per `unit`. */
  usd: number;
  unit: string;
  source: string;
  /** The day the figure was read (UTC). */
  read: string;
  /** False where no reachable page stated the figure for this region: it is the us-east-1 figure, assumed equal. */
  checked: boolean;
}

export interface RegionPrices {
  region: string;
  lambdaRequests: Price;
  lambdaGbSeconds: Price;
  sqsFifoRequests: Price;
  dynamodbWriteUnits: Price;
  dynamodbReadUnits: Price;
  /** EventBridge rules on a schedule: events of an AWS service (aws.events), which EventBridge does not bill. */
  scheduledEvents: Price;
  fargateVcpuHours: Price;
  fargateGbHours: Price;
  /** A general purpose node (m7g.large: 2 vCPU, 8 GiB), for a pod's share of one. */
  nodeHours: Price & { vcpu: number; memoryGiB: number; instanceType: string };
}

const READ = '2026-11-27';
const LAMBDA = 'https://cloudchipr.com/blog/aws-lambda-pricing (us-east-1, x86; the same rates in git.mcrn.ar lambda-13-cost.md)';
const SQS =
  'https://cloudburn.io/blog/amazon-sqs-pricing (us-east-1, March 2026: FIFO $0.50 per million, each 64 KB of payload one request)';
const DYNAMODB = 'https://airbyte.com/data-engineering-resources/dynamodb-pricing (us-east-1, after the November 2024 on-demand price cut)';
const EVENTS = 'https://www.wring.co/blog/aws-eventbridge-pricing-guide (AWS service events: free)';
const FARGATE = 'https://www.vantage.sh/blog/fargate-pricing (us-east-1, Linux/x86)';
const NODE =
  'https://www.factualminds.com/blog/amazon-ec2-on-demand-pricing-instance-families-2026/ (us-east-1, June 2026, Linux m7g.large)';

const p = (usd: number, unit: string, source: string, checked = true): Price => ({ usd, unit, source, read: READ, checked });

export const US_EAST_1: RegionPrices = {
  region: 'us-east-1',
  lambdaRequests: p(0.2, 'million requests', LAMBDA),
  lambdaGbSeconds: p(0.0000166667, 'GB-second', LAMBDA),
  sqsFifoRequests: p(0.5, 'million requests', SQS),
  dynamodbWriteUnits: p(0.625, 'million write request units', DYNAMODB),
  dynamodbReadUnits: p(0.125, 'million read request units', DYNAMODB),
  scheduledEvents: p(0, 'million events', EVENTS),
  fargateVcpuHours: p(0.04048, 'vCPU-hour', FARGATE),
  fargateGbHours: p(0.004445, 'GB-hour', FARGATE),
  nodeHours: { ...p(0.0816, 'instance-hour', NODE), vcpu: 2, memoryGiB: 8, instanceType: 'm7g.large' },
};

const EU =
  'https://engineering-ed7.pages.dev/docs/architecture/aws/services/dynamodb (eu-west-1 on-demand before the November 2024 cut: $1.4135 and $0.283 per million; halved here as the cut halved us-east-1)';
const SAME = ' (no reachable page states eu-west-1: the us-east-1 figure, assumed equal)';

export const EU_WEST_1: RegionPrices = {
  region: 'eu-west-1',
  lambdaRequests: p(0.2, 'million requests', LAMBDA + SAME, false),
  lambdaGbSeconds: p(0.0000166667, 'GB-second', LAMBDA + SAME, false),
  sqsFifoRequests: p(0.5, 'million requests', SQS + SAME, false),
  dynamodbWriteUnits: p(0.70675, 'million write request units', EU),
  dynamodbReadUnits: p(0.1415, 'million read request units', EU),
  scheduledEvents: p(0, 'million events', EVENTS),
  fargateVcpuHours: p(0.04048, 'vCPU-hour', FARGATE + SAME, false),
  fargateGbHours: p(0.004445, 'GB-hour', FARGATE + SAME, false),
  nodeHours: { ...p(0.0816, 'instance-hour', NODE + SAME, false), vcpu: 2, memoryGiB: 8, instanceType: 'm7g.large' },
};

export const PRICES: Readonly<Record<string, RegionPrices>> = { 'us-east-1': US_EAST_1, 'eu-west-1': EU_WEST_1 };

export function pricesFor(region: string): RegionPrices {
  const prices = PRICES[region];
  if (!prices)
    throw new Error(`no prices for region ${region} (the table has ${Object.keys(PRICES).join(', ')}): add them to shared/cost/prices.ts`);
  return prices;
}
