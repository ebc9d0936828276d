// Compare-and-set records: each item carries a version; a write names the version it read (or 'absent' for
// a new record) and fails with VersionConflictError when someone wrote in between. With a lease, the write
// is also fenced on it (one transaction), which is how a leader's decisions stay its own.
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { VersionConflictError } from './errors.ts';
import type { Lease, LeaseStore } from './lease.ts';
import { TABLE, itemKey, type StateKey } from './table.ts';

export interface VersionedRecord<T> {
  key: StateKey;
  value: T;
  version: number;
}

/** The version a write expects: a number, `absent` for a new record, or `any` for a cache that needs no check. */
export type Expected = number | 'absent' | 'any';

export interface RecordStoreOptions {
  client: DynamoDBClient;
  tableName: string;
  leases: LeaseStore;
}

export class RecordStore {
  private readonly client: DynamoDBClient;
  private readonly tableName: string;
  private readonly leases: LeaseStore;

  constructor(opts: RecordStoreOptions) {
    this.client = opts.client;
    this.tableName = opts.tableName;
    this.leases = opts.leases;
  }

  async get<T>(key: StateKey): Promise<VersionedRecord<T> | undefined> {
    const out = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: itemKey(key), ConsistentRead: true }));
    if (!out.Item) return undefined;
    return { key, value: JSON.parse(out.Item.value?.S ?? 'null') as T, version: Number(out.Item.version?.N ?? 0) };
  }

  /** Writes `value` as the next version if the record is at `expected`; with `fence`, only while it is held. */
  async put<T>(
    key: StateKey,
    value: T,
    expected: Expected,
    opts: { fence?: Lease; ttlSeconds?: number } = {},
  ): Promise<VersionedRecord<T>> {
    const write = this.putWrite(key, value, expected, opts.ttlSeconds);
    if (opts.fence) {
      await this.leases.fencedWrite(opts.fence, [write]);
    } else {
      try {
        await this.client.send(new PutItemCommand(write.item.Put!));
      } catch (err) {
        if (err instanceof ConditionalCheckFailedException) throw new VersionConflictError(write.describe, expected);
        throw err;
      }
    }
    return { key, value, version: nextVersion(expected) };
  }

  async delete(key: StateKey, expected: number, opts: { fence?: Lease } = {}): Promise<void> {
    const describe = describeKey(key);
    const del = {
      TableName: this.tableName,
      Key: itemKey(key),
      ConditionExpression: 'version = :v',
      ExpressionAttributeValues: { ':v': { N: String(expected) } },
    };
    if (opts.fence) {
      await this.leases.fencedWrite(opts.fence, [{ item: { Delete: del }, describe, expected }]);
      return;
    }
    try {
      await this.client.send(new DeleteItemCommand(del));
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) throw new VersionConflictError(describe, expected);
      throw err;
    }
  }

  /**
   * Adds one to a counter record and returns the new count: an atomic update, so concurrent writers never lose
   * an increment (for epochs: "something changed since you last looked").
   */
  async increment(key: StateKey): Promise<number> {
    const out = await this.client.send(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: itemKey(key),
        UpdateExpression: 'ADD #c :one',
        ExpressionAttributeNames: { '#c': 'counter' },
        ExpressionAttributeValues: { ':one': { N: '1' } },
        ReturnValues: 'UPDATED_NEW',
      }),
    );
    return Number(out.Attributes?.counter?.N ?? 0);
  }

  /** A counter's value; 0 when it was never incremented. */
  async counter(key: StateKey): Promise<number> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.tableName,
        Key: itemKey(key),
        ConsistentRead: true,
        ProjectionExpression: '#c',
        ExpressionAttributeNames: { '#c': 'counter' },
      }),
    );
    return Number(out.Item?.counter?.N ?? 0);
  }

  /** The conditional put as a transaction item, for callers that write several records at once. */
  putWrite<T>(
    key: StateKey,
    value: T,
    expected: Expected,
    ttlSeconds?: number,
  ): { item: TransactWriteItem; describe: string; expected: Expected } {
    const item: Record<string, AttributeValue> = {
      ...itemKey(key),
      value: { S: JSON.stringify(value) },
      version: { N: String(nextVersion(expected)) },
    };
    if (ttlSeconds !== undefined) item[TABLE.timeToLiveAttribute] = { N: String(Math.floor(Date.now() / 1000) + ttlSeconds) };
    const condition =
      expected === 'any'
        ? {}
        : expected === 'absent'
          ? { ConditionExpression: `attribute_not_exists(${TABLE.partitionKey})` }
          : { ConditionExpression: 'version = :v', ExpressionAttributeValues: { ':v': { N: String(expected) } } };
    return { item: { Put: { TableName: this.tableName, Item: item, ...condition } }, describe: describeKey(key), expected };
  }
}

function nextVersion(expected: Expected): number {
  return typeof expected === 'number' ? expected + 1 : 1;
}

function describeKey(key: StateKey): string {
  return `${key.cluster}/${key.kind}/${key.name}`;
}
