// Outrigger's single DynamoDB table. The CDK stack and the test setup both build the table from this
// definition, so keys, TTL and billing cannot drift apart.
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

export const TABLE = {
  /** `<cluster>#<kind>`: every item belongs to one cluster, so clusters never share a key. */
  partitionKey: 'pk',
  /** The item's name within its kind (a lease name, a StorageState resource, ...). */
  sortKey: 'sk',
  /** Epoch seconds after which DynamoDB may delete the item; set only on items that are safe to lose. */
  timeToLiveAttribute: 'ttl',
} as const;

export function createTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: TABLE.partitionKey, AttributeType: 'S' },
      { AttributeName: TABLE.sortKey, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: TABLE.partitionKey, KeyType: 'HASH' },
      { AttributeName: TABLE.sortKey, KeyType: 'RANGE' },
    ],
  };
}

export interface StateKey {
  cluster: string;
  /** What the item is: `lease`, `record/<kind>`, ... */
  kind: string;
  name: string;
}

const SEPARATOR = '#';

export function itemKey(key: StateKey): Record<string, { S: string }> {
  for (const [field, value] of Object.entries(key)) {
    if (!value) throw new Error(`state key: ${field} is empty`);
  }
  if (key.cluster.includes(SEPARATOR)) throw new Error(`state key: cluster id ${JSON.stringify(key.cluster)} must not contain '#'`);
  return {
    [TABLE.partitionKey]: { S: `${key.cluster}${SEPARATOR}${key.kind}` },
    [TABLE.sortKey]: { S: key.name },
  };
}
