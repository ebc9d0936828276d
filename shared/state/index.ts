// DynamoDB state for Outrigger: leases with fencing terms and compare-and-set records, in one table.
import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { LeaseStore } from './lease.ts';
import { RecordStore } from './records.ts';
import { TABLE, createTableInput } from './table.ts';

export { LeaseLostError, VersionConflictError } from './errors.ts';
export { LeaseStore, type AcquireOptions, type Lease } from './lease.ts';
export { RecordStore, type Expected, type VersionedRecord } from './records.ts';
export { TABLE, createTableInput, itemKey, type StateKey } from './table.ts';

export interface State {
  client: DynamoDBClient;
  tableName: string;
  leases: LeaseStore;
  records: RecordStore;
}

export interface StateOptions {
  tableName: string;
  /** DynamoDB Local's URL; unset in AWS. */
  endpoint?: string | undefined;
  region?: string | undefined;
  now?: () => number;
}

export function openState(opts: StateOptions): State {
  const client = new DynamoDBClient({
    ...(opts.region ? { region: opts.region } : {}),
    ...(opts.endpoint
      ? {
          endpoint: opts.endpoint,
          region: opts.region ?? 'us-east-1',
          // DynamoDB Local accepts any signature; it still needs one.
          credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
        }
      : {}),
  });
  const leases = new LeaseStore({ client, tableName: opts.tableName, ...(opts.now ? { now: opts.now } : {}) });
  const records = new RecordStore({ client, tableName: opts.tableName, leases });
  return { client, tableName: opts.tableName, leases, records };
}

/**
 * Creates the table from the shared definition where it does not exist (DynamoDB Local, tests), with its TTL
 * attribute enabled as the stack enables it (infra/outrigger.ts).
 */
export async function ensureTable(state: State): Promise<void> {
  try {
    await state.client.send(new CreateTableCommand(createTableInput(state.tableName)));
  } catch (err) {
    if (!(err instanceof ResourceInUseException)) throw err;
  }
  await state.client.send(new DescribeTableCommand({ TableName: state.tableName }));
  const ttl = await state.client.send(new DescribeTimeToLiveCommand({ TableName: state.tableName }));
  if (ttl.TimeToLiveDescription?.TimeToLiveStatus !== 'ENABLED')
    await state.client.send(
      new UpdateTimeToLiveCommand({
        TableName: state.tableName,
        TimeToLiveSpecification: { AttributeName: TABLE.timeToLiveAttribute, Enabled: true },
      }),
    );
}
