// A lease with a fencing term. One holder at a time; a holder keeps it by renewing before it expires; anyone
// may take it over once it has expired or been released, and each takeover increments the term. Writes a
// leader makes are conditioned on (holder, term, unexpired) in the same transaction (see `fencedWrite`), so a
// deposed leader that wakes up late cannot overwrite its successor's decisions.
//
// Expiry compares the caller's clock with the stored deadline: clocks must agree to well within the lease
// duration. The term, not the clock, is what keeps a late write out.
//
// A holder's last word for the next one is a memo on the lease item, and, for what would make that item large,
// parts: small items of their own beside it, each written only when it changes, so that a take and a release
// are billed at the lease's size, not at what the holders remember (docs/design/history-sync.md#the-history-record).
import { createHash } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
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
  /**
   * The parts the last holder left beside the memo, by id, when they were asked for: undefined when they do not
   * add up to what that holder left (a deposed holder's late writes, parts expired before the lease item).
   */
  parts?: Record<string, unknown>;
  /** The parts as stored when the lease was taken with `parts` (JSON by id): what `release` writes its changes against. */
  stored?: Record<string, string>;
}

/** Options of `acquire`. */
export interface AcquireOptions {
  /**
   * Keep the item this long after each acquire and release, then let DynamoDB's TTL delete it: for a lease named
   * after something that may go for good. Only for items whose loss costs nothing but a cache (the memo).
   */
  keepSeconds?: number;
  /** Read the parts the last holder left (Lease.parts), in parallel with the take. */
  parts?: boolean;
}

export interface LeaseStoreOptions {
  client: DynamoDBClient;
  tableName: string;
  now?: () => number;
}

const LEASE_KIND = 'lease';
const PART_KIND = 'lease-part';

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

  private partKey(cluster: string, name: string, id: string) {
    return itemKey({ cluster, kind: PART_KIND, name: `${name}/${id}` });
  }

  /**
   * Takes the lease when it is free (never held, expired or released), with a new term; when `holder` already
   * holds it, extends it at the same term. Returns undefined while someone else holds it.
   */
  async acquire(cluster: string, name: string, holder: string, ttlMs: number, opts: AcquireOptions = {}): Promise<Lease | undefined> {
    if (!opts.parts) {
      const lease = await this.take(cluster, name, holder, ttlMs, opts);
      return lease && bare(lease);
    }
    const [lease, stored] = await Promise.all([this.take(cluster, name, holder, ttlMs, opts), this.storedParts(cluster, name)]);
    return lease && this.settle(lease, stored);
  }

  /** The lease taken with its parts: `stored` as read beside the take, or read now. */
  private async settle(lease: StoredLease, stored?: Record<string, string>): Promise<Lease> {
    const first = stored ?? (await this.storedParts(lease.cluster, lease.name));
    // Parts read before the last holder's release may have been read before it wrote them all: read once more.
    const settled = lease.partsDigest === undefined || partsDigest(first) === lease.partsDigest;
    return this.withParts(lease, settled ? first : await this.storedParts(lease.cluster, lease.name));
  }

  private async take(cluster: string, name: string, holder: string, ttlMs: number, opts: AcquireOptions): Promise<StoredLease | undefined> {
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
      return renewed && withKeep({ ...renewed, ...(current.partsDigest ? { partsDigest: current.partsDigest } : {}) }, opts.keepSeconds);
    }
  }

  /** `acquire`, polling briskly (with jitter) for up to `waitMs` while another holder has it. */
  // eslint-disable-next-line max-params -- acquire's parameters in acquire's order, plus how long to wait; its callers read alike
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
      // Parts are read beside the first take only: beside each take a busy lease refuses, the read would be wasted.
      const lease =
        attempt === 0 || !opts.parts
          ? await this.acquire(cluster, name, holder, ttlMs, opts)
          : await this.take(cluster, name, holder, ttlMs, opts).then((taken) => taken && this.settle(taken));
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
      return bare(toLease(lease.cluster, lease.name, out.Attributes));
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  /**
   * Gives the lease up so that the next acquirer takes it at once (with the next term). A `memo` is stored on
   * the lease item in the same conditional write, only if the lease was still held, and the next holder gets
   * it from `acquire`: a holder's last word for its successor costs no extra round trip on either side.
   * Without one, the previous memo stays. `parts` (of a lease taken with them) are written first, each that
   * changed since the take, and their digest goes on the lease item with the memo: a part written by a holder
   * whose release then fails leaves parts that do not add up, which the next holder takes for none.
   */
  async release(lease: Lease, memo?: unknown, parts?: Record<string, unknown>): Promise<boolean> {
    const keep = this.keep(lease.keepSeconds);
    const values: Record<string, AttributeValue> = { ':h': s(lease.holder), ':t': n(lease.term), ':zero': n(0), ...keep.values };
    if (memo !== undefined) values[':memo'] = s(JSON.stringify(memo));
    if (parts !== undefined) values[':pd'] = s(partsDigest(await this.writeParts(lease, parts)));
    const update = new UpdateItemCommand({
      TableName: this.tableName,
      Key: this.key(lease.cluster, lease.name),
      UpdateExpression: `SET expiresAt = :zero${memo === undefined ? '' : ', memo = :memo'}${parts === undefined ? '' : ', partsDigest = :pd'}${keep.set}`,
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

  /** Writes each part that changed since the lease was taken, and deletes each gone: the parts as now stored, by id. */
  private async writeParts(lease: Lease, parts: Record<string, unknown>): Promise<Record<string, string>> {
    if (!lease.stored) throw new Error(`lease ${lease.name}: parts are released only on a lease taken with them`);
    const next = Object.fromEntries(Object.entries(parts).map(([id, v]) => [id, JSON.stringify(v)]));
    const keep = this.keep(lease.keepSeconds);
    const ttl = keep.values[':ttl'];
    const writes = [
      ...Object.entries(next)
        .filter(([id, v]) => lease.stored![id] !== v)
        .map(([id, v]) =>
          this.client.send(
            new PutItemCommand({
              TableName: this.tableName,
              Item: {
                ...this.partKey(lease.cluster, lease.name, id),
                id: s(id),
                v: s(v),
                ...(ttl ? { [TABLE.timeToLiveAttribute]: ttl } : {}),
              },
            }),
          ),
        ),
      ...Object.keys(lease.stored)
        .filter((id) => !(id in next))
        .map((id) =>
          this.client.send(new DeleteItemCommand({ TableName: this.tableName, Key: this.partKey(lease.cluster, lease.name, id) })),
        ),
    ];
    await Promise.all(writes);
    return next;
  }

  /** The parts stored for the lease, as JSON by id (one consistent query). */
  private async storedParts(cluster: string, name: string): Promise<Record<string, string>> {
    const { pk, sk } = this.partKey(cluster, name, '');
    const parts: Record<string, string> = {};
    let start: Record<string, AttributeValue> | undefined;
    do {
      const out = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :prefix)',
          ExpressionAttributeNames: { '#pk': TABLE.partitionKey, '#sk': TABLE.sortKey },
          ExpressionAttributeValues: { ':pk': pk!, ':prefix': sk! },
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      for (const item of out.Items ?? []) if (item.id?.S !== undefined && item.v?.S !== undefined) parts[item.id.S] = item.v.S;
      start = out.LastEvaluatedKey;
    } while (start);
    return parts;
  }

  /** The lease with its parts: those stored, when they add up to the digest its last releaser left. */
  private withParts(lease: StoredLease, stored: Record<string, string>): Lease {
    const { partsDigest: digest, ...rest } = lease;
    const whole = digest !== undefined && partsDigest(stored) === digest;
    return {
      ...rest,
      stored,
      ...(whole ? { parts: Object.fromEntries(Object.entries(stored).map(([id, v]) => [id, JSON.parse(v) as unknown])) } : {}),
    };
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

  /** The lease as stored; with `parts`, the parts its last holder left (Lease.parts), read in parallel. */
  async get(cluster: string, name: string, opts: { parts?: boolean } = {}): Promise<Lease | undefined> {
    const [out, stored] = await Promise.all([
      this.client.send(new GetItemCommand({ TableName: this.tableName, Key: this.key(cluster, name), ConsistentRead: true })),
      opts.parts ? this.storedParts(cluster, name) : undefined,
    ]);
    if (!out.Item) return undefined;
    const lease = toLease(cluster, name, out.Item);
    return stored ? this.withParts(lease, stored) : bare(lease);
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

function withKeep(lease: StoredLease, keepSeconds: number | undefined): StoredLease {
  return keepSeconds === undefined ? lease : { ...lease, keepSeconds };
}

/** A lease as its item holds it: with the digest of the parts its last releaser left. */
type StoredLease = Lease & { partsDigest?: string };

function bare({ partsDigest: _, ...lease }: StoredLease): Lease {
  return lease;
}

/** What a set of parts adds up to (JSON by id), whatever the order they were listed in. */
function partsDigest(parts: Record<string, string>): string {
  const hash = createHash('sha256');
  for (const id of Object.keys(parts).sort()) hash.update(`${id}\u0000${parts[id]}\n`);
  return hash.digest('base64url').slice(0, 22);
}

function toLease(cluster: string, name: string, item: Record<string, AttributeValue> | undefined): StoredLease {
  if (!item) throw new Error(`lease ${name}: DynamoDB returned no item`);
  return {
    cluster,
    name,
    holder: item.holder?.S ?? '',
    term: Number(item.term?.N ?? 0),
    expiresAt: Number(item.expiresAt?.N ?? 0),
    ...(item.memo?.S ? { memo: JSON.parse(item.memo.S) as unknown } : {}),
    ...(item.partsDigest?.S ? { partsDigest: item.partsDigest.S } : {}),
  };
}
