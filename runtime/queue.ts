// The local runtime's stand-in for an SQS FIFO queue in front of one function: the same event shape and the
// same contract (batches of at most 10, deduplication ids, order within a message group, redelivery of the
// items the handler reports as failed, a dead-letter destination after maxReceiveCount receives). It is
// bounded: `enqueue` waits while the queue is full, which slows the watch source instead of growing memory.
import { randomUUID } from 'node:crypto';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { EnvelopeSink, QueueEntry } from '../forwarder/forwarder.ts';
import type { DeadLetterSink } from '../shared/lambda/dead-letter.ts';
import { RETRY_MAX_SECONDS, retryDelay, type Retry } from '../shared/lambda/retry.ts';

interface Message {
  id: string;
  body: string;
  groupId: string;
  dedupId: string;
  receiveCount: number;
  sentAt: number;
  notBefore: number;
}

export interface LocalQueueOptions {
  name: string;
  /** The eventSourceARN of its records (default `arn:aws:sqs:local:000000000000:<name>.fifo`): named as the deployment names its queue. */
  arn?: string;
  deliver: (event: SQSEvent) => Promise<SQSBatchResponse | void>;
  deadLetter: DeadLetterSink;
  maxReceiveCount?: number;
  batchSize?: number;
  capacity?: number;
  /** Deduplication window, as SQS FIFO's five minutes. */
  dedupWindowMs?: number;
  retryDelayMs?: number;
  onError?: (err: unknown) => void;
}

export class LocalQueue {
  readonly name: string;
  /** `bytes`: of the messages sent, as SQS would bill them (their bodies). */
  readonly stats = { sent: 0, bytes: 0, deduplicated: 0, delivered: 0, failedReceives: 0, deadLettered: 0, batches: 0 };
  private readonly opts: Required<Omit<LocalQueueOptions, 'onError' | 'arn'>> & Pick<LocalQueueOptions, 'onError'>;
  private readonly arn: string;
  private pending: Message[] = [];
  private readonly recentDedupIds = new Map<string, number>();
  /** Delays (ms) that failed messages asked for (a hook's Retry-After), by message id, until their redelivery. */
  private readonly asked = new Map<string, number>();
  private readonly waiters: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];
  private wake: (() => void) | undefined;
  private running = true;
  private busy = false;
  private readonly loop: Promise<void>;

  constructor(opts: LocalQueueOptions) {
    this.name = opts.name;
    this.arn = opts.arn ?? `arn:aws:sqs:local:000000000000:${opts.name}.fifo`;
    this.opts = { maxReceiveCount: 5, batchSize: 10, capacity: 10_000, dedupWindowMs: 5 * 60_000, retryDelayMs: 500, ...opts };
    this.loop = this.consume();
  }

  get depth(): number {
    return this.pending.length;
  }

  async enqueue(body: string, groupId: string, dedupId: string): Promise<void> {
    const now = Date.now();
    const seenAt = this.recentDedupIds.get(dedupId);
    if (seenAt !== undefined && now - seenAt < this.opts.dedupWindowMs) {
      this.stats.deduplicated += 1;
      return;
    }
    while (this.pending.length >= this.opts.capacity && this.running) await new Promise<void>((r) => this.waiters.push(r));
    this.recentDedupIds.set(dedupId, now);
    if (this.recentDedupIds.size > 4 * this.opts.capacity) this.pruneDedupIds(now);
    this.pending.push({ id: randomUUID(), body, groupId, dedupId, receiveCount: 0, sentAt: now, notBefore: 0 });
    this.stats.sent += 1;
    this.stats.bytes += Buffer.byteLength(body);
    this.wake?.();
  }

  /**
   * The handlers' retry (shared/lambda/retry.ts) for this queue's records: a delay a failed record asked for
   * replaces its backoff, as ChangeMessageVisibility does in AWS; other records keep the queue's own backoff.
   */
  retry(): Retry {
    return async (records, asked) => {
      for (const r of records) {
        const seconds = asked?.get(r.messageId);
        if (r.eventSourceARN === this.arn && seconds !== undefined) this.asked.set(r.messageId, seconds * 1000);
      }
    };
  }

  /**
   * ChangeMessageVisibility of a message this queue delivered (its receipt handle is its id), as a function in its
   * Lambda container sets a failed record's backoff (runtime/sqs-endpoint.ts): the delay replaces the queue's own.
   */
  changeVisibility(receiptHandle: string, seconds: number): void {
    this.asked.set(receiptHandle, seconds * 1000);
  }

  /** Resolves once nothing is pending or in flight. */
  async idle(): Promise<void> {
    if (this.pending.length === 0 && !this.busy) return;
    await new Promise<void>((r) => this.idleWaiters.push(r));
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    for (const w of this.waiters.splice(0)) w();
    await this.loop;
  }

  private pruneDedupIds(now: number): void {
    for (const [id, at] of this.recentDedupIds) if (now - at >= this.opts.dedupWindowMs) this.recentDedupIds.delete(id);
  }

  private takeBatch(now: number): Message[] {
    // FIFO: a group whose head is waiting to be retried blocks the rest of that group, not other groups.
    const blocked = new Set<string>();
    const batch: Message[] = [];
    const rest: Message[] = [];
    for (const m of this.pending) {
      if (batch.length < this.opts.batchSize && !blocked.has(m.groupId) && m.notBefore <= now) batch.push(m);
      else {
        blocked.add(m.groupId);
        rest.push(m);
      }
    }
    this.pending = rest;
    return batch;
  }

  private async consume(): Promise<void> {
    while (this.running) {
      const now = Date.now();
      const batch = this.takeBatch(now);
      if (batch.length === 0) {
        if (this.pending.length === 0) for (const w of this.idleWaiters.splice(0)) w();
        const nextDue = Math.min(...this.pending.map((m) => m.notBefore));
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          if (Number.isFinite(nextDue)) setTimeout(resolve, Math.max(1, nextDue - now));
        });
        this.wake = undefined;
        continue;
      }
      for (const w of this.waiters.splice(0)) w();
      this.busy = true;
      try {
        await this.deliver(batch);
      } finally {
        this.busy = false;
      }
    }
  }

  private async deliver(batch: Message[]): Promise<void> {
    for (const m of batch) m.receiveCount += 1;
    const event: SQSEvent = { Records: batch.map((m) => this.record(m)) };
    let failedIds: Set<string>;
    let reason: string;
    this.stats.batches += 1;
    try {
      const response = await this.opts.deliver(event);
      failedIds = new Set((response?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
      reason = 'the handler reported it as failed';
    } catch (err) {
      // A handler that throws fails its whole batch, as in Lambda.
      failedIds = new Set(batch.map((m) => m.id));
      reason = `the handler threw: ${err instanceof Error ? err.message : String(err)}`;
      this.opts.onError?.(err);
    }
    const retry: Message[] = [];
    for (const m of batch) {
      const askedMs = this.asked.get(m.id);
      this.asked.delete(m.id);
      if (!failedIds.has(m.id)) {
        this.stats.delivered += 1;
        continue;
      }
      this.stats.failedReceives += 1;
      if (m.receiveCount >= this.opts.maxReceiveCount) {
        this.stats.deadLettered += 1;
        await this.opts.deadLetter.send({
          body: m.body,
          reason: `received ${m.receiveCount} times without success; last: ${reason}`,
          source: this.name,
        });
      } else {
        // Backoff as in AWS (shared/lambda/retry.ts): doubling with each failure, from retryDelayMs, unless the
        // handler asked for a delay.
        retry.push({
          ...m,
          notBefore: Date.now() + (askedMs ?? retryDelay(m.receiveCount, this.opts.retryDelayMs, RETRY_MAX_SECONDS * 1000)),
        });
      }
    }
    // Failed messages go back in front of what arrived since, so a group's order is kept.
    this.pending = [...retry, ...this.pending];
  }

  private record(m: Message): SQSRecord {
    return {
      messageId: m.id,
      receiptHandle: m.id,
      body: m.body,
      attributes: {
        ApproximateReceiveCount: String(m.receiveCount),
        SentTimestamp: String(m.sentAt),
        SenderId: 'outrigger-local',
        ApproximateFirstReceiveTimestamp: String(m.sentAt),
        MessageGroupId: m.groupId,
        MessageDeduplicationId: m.dedupId,
        SequenceNumber: String(m.sentAt),
      },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: this.arn,
      awsRegion: 'local',
    };
  }
}

/** The forwarder's destination in the local runtime: this queue in place of the SQS events queue. */
export class LocalQueueSink implements EnvelopeSink {
  private readonly queue: LocalQueue;
  private readonly deadLetters: DeadLetterSink;
  constructor(queue: LocalQueue, deadLetters: DeadLetterSink) {
    this.queue = queue;
    this.deadLetters = deadLetters;
  }
  async sendBatch(entries: readonly QueueEntry[]): Promise<number[]> {
    for (const e of entries) await this.queue.enqueue(e.body, e.group, e.dedup);
    return [];
  }
  async deadLetter(body: string, reason: string): Promise<void> {
    await this.deadLetters.send({ body, reason, source: 'forwarder' });
  }
}
