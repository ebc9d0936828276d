// A lease with a fencing term. One holder at a time; a holder keeps it by renewing before it expires; anyone
// may take it over once it has expired or been released, and each takeover increments the term. Writes a
// leader makes are conditioned on (holder, term, unexpired) in the same transaction (see `fencedWrite`), so a
// deposed leader that wakes up late cannot overwrite its successor's decisions.
//
// Expiry compares the caller's clock with the stored deadline: clocks must agree to well within the lease
// duration. The term, not the clock, is what keeps a late write out.
import {
  ConditionalCheckFailedException,
  GetItemCommand,
  TransactWriteItemsCommand,
  TransactionCanceledException,
  TransactionConflictException,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { LeaseLostError, VersionConflictError } from './errors.ts';
import { TABLE, itemKey } from './table.ts';

export interface Lease {
  cluster: string;
  name: string;
  holder: string;
  term: number;
  /** Epoch milliseconds. */
  expiresAt: number;
  /** What the last holder left for the next one at release (parsed JSON), if anything. */
  memo?: unknown;
  /**
   * Seconds the item is kept after this holder's last write (acquire, release), when it was taken with
   * `keepSeconds`: then DynamoDB's TTL deletes an item no one takes any more (a gone parent's history lease).
   */
  keepSeconds?: number;
}

/** Options of `acquire`. */
export interface AcquireOptions {
  /**
   * Keep the item this long after each acquire and release, then let DynamoDB's TTL delete it: for a lease named
   * after something that may go for good. Only for items whose loss costs nothing but a cache (the memo).
   */
  keepSeconds?: number;
}

export interface LeaseStoreOptions {
  client: DynamoDBClient;
  tableName: string;
  now?: () => number;
}

const LEASE_KIND = 'lease';

export class LeaseStore {
  private readonly client: DynamoDBClient;
  private readonly tableName: string;
  private readonly now: () => number;

  constructor(opts: LeaseStoreOptions) {
    this.client = opts.client;
    this.tableName = opts.tableName;
    this.now = opts.now ?? Date.now;
  }

  private key(cluster: string, name: string) {
    return itemKey({ cluster, kind: LEASE_KIND, name });
  }

  /**
   * Takes the lease when it is free (never held, expired or released), with a new term; when `holder` already
   * holds it, extends it at the same term. Returns undefined while someone else holds it.
   */
  async acquire(cluster: string, name: string, holder: string, ttlMs: number, opts: AcquireOptions = {}): Promise<Lease | undefined> {
    if (ttlMs <= 0) throw new Error(`lease ${name}: ttlMs must be positive, got ${ttlMs}`);
    const now = this.now();
    const keep = this.keep(opts.keepSeconds);
    try {
      const out = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: this.key(cluster, name),
          UpdateExpression: `SET holder = :h, expiresAt = :exp, term = if_not_exists(term, :zero) + :one${keep.set}`,
          ConditionExpression: 'attribute_not_exists(term) OR expiresAt <= :now',
          ExpressionAttributeValues: {
            ':h': s(holder),
            ':exp': n(now + ttlMs),
            ':zero': n(0),
            ':one': n(1),
            ':now': n(now),
            ...keep.values,
          },
          ...keep.names,
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return withKeep(toLease(cluster, name, out.Attributes), opts.keepSeconds);
    } catch (err) {
      // Another writer's transaction on the item (a release, say) is in flight: the lease is busy.
      if (err instanceof TransactionConflictException) return undefined;
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      const current = toLease(cluster, name, err.Item);
      if (current.holder !== holder) return undefined;
      const renewed = await this.renew(current, ttlMs);
      return renewed && withKeep(renewed, opts.keepSeconds);
    }
  }

  /** `acquire`, polling briskly (with jitter) for up to `waitMs` while another holder has it. */
  async acquireWithin(
    cluster: string,
    name: string,
    holder: string,
    ttlMs: number,
    waitMs: number,
    opts: AcquireOptions = {},
  ): Promise<Lease | undefined> {
    // Waiting is real time, even under a simulated lease clock.
    const deadline = Date.now() + waitMs;
    for (let attempt = 0; ; attempt += 1) {
      const lease = await this.acquire(cluster, name, holder, ttlMs, opts);
      if (lease || Date.now() > deadline) return lease;
      await new Promise((r) => setTimeout(r, Math.min(50, 2 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random())));
    }
  }

  /** Extends a lease this holder still has at this term; undefined when it was lost (expired or taken over). */
  async renew(lease: Lease, ttlMs: number): Promise<Lease | undefined> {
    const now = this.now();
    try {
      const out = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: this.key(lease.cluster, lease.name),
          UpdateExpression: 'SET expiresAt = :exp',
          ConditionExpression: 'holder = :h AND term = :t AND expiresAt > :now',
          ExpressionAttributeValues: { ':h': s(lease.holder), ':t': n(lease.term), ':exp': n(now + ttlMs), ':now': n(now) },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return toLease(lease.cluster, lease.name, out.Attributes);
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  /**
   * Gives the lease up so that the next acquirer takes it at once (with the next term). A `memo` is stored on
   * the lease item in the same conditional write, only if the lease was still held, and the next holder gets
   * it from `acquire`: a holder's last word for its successor costs no extra round trip on either side.
   * Without one, the previous memo stays.
   */
  async release(lease: Lease, memo?: unknown): Promise<boolean> {
    const keep = this.keep(lease.keepSeconds);
    const values: Record<string, AttributeValue> = { ':h': s(lease.holder), ':t': n(lease.term), ':zero': n(0), ...keep.values };
    if (memo !== undefined) values[':memo'] = s(JSON.stringify(memo));
    const update = new UpdateItemCommand({
      TableName: this.tableName,
      Key: this.key(lease.cluster, lease.name),
      UpdateExpression: `SET expiresAt = :zero${memo === undefined ? '' : ', memo = :memo'}${keep.set}`,
      ConditionExpression: 'holder = :h AND term = :t',
      ExpressionAttributeValues: values,
      ...keep.names,
    });
    // A concurrent acquirer's conditional update can conflict with a transaction on the item; retry a few times.
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.client.send(update);
        return true;
      } catch (err) {
        if (err instanceof ConditionalCheckFailedException) return false;
        if (!(err instanceof TransactionConflictException) || attempt >= 5) throw err;
        await new Promise((r) => setTimeout(r, 5 * attempt));
      }
    }
  }

  /** The update's part that sets the item's TTL attribute `keepSeconds` from now (epoch seconds), if any. */
  private keep(keepSeconds: number | undefined): {
    set: string;
    values: Record<string, AttributeValue>;
    names: { ExpressionAttributeNames?: Record<string, string> };
  } {
    if (keepSeconds === undefined) return { set: '', values: {}, names: {} };
    // `ttl` is one of DynamoDB's reserved words: named through a placeholder.
    return {
      set: ', #ttl = :ttl',
      values: { ':ttl': n(Math.floor(this.now() / 1000) + keepSeconds) },
      names: { ExpressionAttributeNames: { '#ttl': TABLE.timeToLiveAttribute } },
    };
  }

  /** True while `lease` has at least `marginMs` left by this process's clock: check before acting as holder. */
  stillHeld(lease: Lease, marginMs: number): boolean {
    return lease.expiresAt - marginMs > this.now();
  }

  async get(cluster: string, name: string): Promise<Lease | undefined> {
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.tableName, Key: this.key(cluster, name), ConsistentRead: true }),
    );
    return out.Item ? toLease(cluster, name, out.Item) : undefined;
  }

  /** The condition that proves `lease` is still held, for a transaction's first item. */
  fence(lease: Lease): TransactWriteItem {
    return {
      ConditionCheck: {
        TableName: this.tableName,
        Key: this.key(lease.cluster, lease.name),
        ConditionExpression: 'holder = :fh AND term = :ft AND expiresAt > :fnow',
        ExpressionAttributeValues: { ':fh': s(lease.holder), ':ft': n(lease.term), ':fnow': n(this.now()) },
      },
    };
  }

  /**
   * Writes `items` atomically if and only if `lease` is still held. A lost lease raises LeaseLostError; a
   * failed condition on one of the items raises VersionConflictError naming it.
   */
  async fencedWrite(
    lease: Lease,
    items: Array<{ item: TransactWriteItem; describe: string; expected: number | 'absent' | 'any' }>,
  ): Promise<void> {
    try {
      await this.client.send(new TransactWriteItemsCommand({ TransactItems: [this.fence(lease), ...items.map((i) => i.item)] }));
    } catch (err) {
      if (!(err instanceof TransactionCanceledException)) throw err;
      const reasons = err.CancellationReasons ?? [];
      if (reasons[0]?.Code === 'ConditionalCheckFailed') throw new LeaseLostError(lease.name, lease.term);
      const failed = reasons.findIndex((r, i) => i > 0 && r.Code === 'ConditionalCheckFailed');
      const item = items[failed - 1];
      if (item) throw new VersionConflictError(item.describe, item.expected);
      throw err;
    }
  }
}

function s(value: string): AttributeValue {
  return { S: value };
}

function n(value: number): AttributeValue {
  return { N: String(value) };
}

function withKeep(lease: Lease, keepSeconds: number | undefined): Lease {
  return keepSeconds === undefined ? lease : { ...lease, keepSeconds };
}

function toLease(cluster: string, name: string, item: Record<string, AttributeValue> | undefined): Lease {
  if (!item) throw new Error(`lease ${name}: DynamoDB returned no item`);
  return {
    cluster,
    name,
    holder: item.holder?.S ?? '',
    term: Number(item.term?.N ?? 0),
    expiresAt: Number(item.expiresAt?.N ?? 0),
    ...(item.memo?.S ? { memo: JSON.parse(item.memo.S) as unknown } : {}),
  };
}
