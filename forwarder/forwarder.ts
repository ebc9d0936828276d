// The in-cluster forwarder: watches what the installed controllers need (re-read as policies and
// MapControllers change, no restart), turns each watch event into Outrigger's CloudEvents envelope and sends
// it to the SQS FIFO events queue in batches, grouped per owning controller, deduplicated per (uid,
// resourceVersion, type).
//
// At least once: an envelope leaves the buffer only when SQS has accepted it, and what SQS accepted is
// checkpointed (a compact index, per uid, every second) to a state file or ConfigMaps in the forwarder's
// namespace (forwarder/checkpoint.ts). A restarted forwarder, or a new pod, diffs its first
// list against that index, so a change or deletion made while it was down, or sent but not acknowledged, is
// sent again. (An object acknowledged less than a second before a kill, then deleted while the forwarder was
// down, is the one change that can go unsent; an object created and deleted while it was down leaves nothing.)
// Memory is bounded by budgets, not by what is watched (docs/operations/forwarder.md#memory): when `maxBuffered`
// envelopes or `maxBufferedBytes` wait, the watch callbacks wait, and the watch streams stop being read (HTTP
// flow control holds the rest at the apiserver); of each watched object only a skeleton is kept
// (forwarder/skeleton.ts), and relists read pages of `pageBytes`.
/* eslint-disable max-lines -- the Forwarder class alone is some 340 lines whose methods share its buffer, watches and checkpoint state; the one separable part, the SQS sink (about 30), would leave it over 400 */
import { setTimeout as sleep } from 'node:timers/promises';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import {
  deduplicationId,
  makeEnvelope,
  MAX_ENVELOPE_BYTES,
  messageGroupId,
  type Envelope,
  type NewEnvelope,
} from '../shared/envelope/index.ts';
import { signEnvelope } from '../shared/envelope/signature.ts';
import { SqsDeadLetterSink } from '../shared/lambda/dead-letter.ts';
import { BATCH_BYTES, BATCH_ENTRIES } from '../shared/lambda/sqs.ts';
import type { Log } from '../shared/log.ts';
import { FileCheckpoint, type CheckpointStore } from './checkpoint.ts';
import {
  apiVersionOf,
  gvrString,
  isNamespaced,
  resolveResource,
  runWatchSource,
  type GVR,
  type KubeClient,
  type KubeObject,
  type SourceEvent,
} from '../shared/kube/index.ts';
import { routingOnly, statusOnly, unreadStatusChange, watchedAsMetadata } from './metadata.ts';
import { kept, skeletonOf } from './skeleton.ts';

/** One envelope for the events queue. */
export interface QueueEntry {
  body: string;
  group: string;
  dedup: string;
}

/** Where envelopes go: the SQS FIFO events queue, or the local runtime's queue in front of the router. */
export interface EnvelopeSink {
  /** Sends up to 10 entries; answers the indexes of those not taken (to be sent again). */
  sendBatch(entries: readonly QueueEntry[]): Promise<number[]>;
  /** An event that can never be sent (too large), with its reason. */
  deadLetter(body: string, reason: string): Promise<void>;
}

export class SqsEnvelopeSink implements EnvelopeSink {
  lastError: string | undefined;
  private readonly sqs: SQSClient;
  private readonly queueUrl: string;
  private readonly deadLetterQueueUrl: string | undefined;
  constructor(sqs: SQSClient, queueUrl: string, deadLetterQueueUrl?: string) {
    this.sqs = sqs;
    this.queueUrl = queueUrl;
    this.deadLetterQueueUrl = deadLetterQueueUrl;
  }
  async sendBatch(entries: readonly QueueEntry[]): Promise<number[]> {
    const out = await this.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: this.queueUrl,
        Entries: entries.map((e, i) => ({ Id: String(i), MessageBody: e.body, MessageGroupId: e.group, MessageDeduplicationId: e.dedup })),
      }),
    );
    this.lastError = out.Failed?.length ? out.Failed.map((f) => `${f.Code ?? ''}: ${f.Message ?? ''}`).join('; ') : undefined;
    return (out.Failed ?? []).map((f) => Number(f.Id));
  }
  async deadLetter(body: string, reason: string): Promise<void> {
    if (this.deadLetterQueueUrl) await new SqsDeadLetterSink(this.deadLetterQueueUrl, this.sqs).send({ body, reason, source: 'forwarder' });
  }
}

export interface ForwarderOptions {
  cluster: string;
  kube: KubeClient;
  sink: EnvelopeSink;
  /** The envelopes' `source` attribute. */
  source?: string;
  /** What to watch; called again every `refreshMs` (new policies add resources, deleted ones take them away). */
  resources: () => Promise<GVR[]>;
  /**
   * The resources whose events carry whole objects (the controllers' parents and the definitions); every other
   * watched resource is watched as metadata only, and its status-only changes are not sent (forwarder/metadata.ts).
   * Without it every resource is sent whole, Secrets excepted.
   */
  wholeObjects?: () => Promise<GVR[]>;
  /**
   * Of the resources watched as metadata only, those whose status-only changes are sent all the same (a
   * CompositeController's children: docs/controllers/compositecontroller.md#how-a-parent-is-synced).
   */
  statusChanges?: () => Promise<GVR[]>;
  /**
   * Of the parents watched whole, those whose controllers all read only these fields of their status: a change to
   * their status that leaves these alone is not sent (forwarder/metadata.ts#unreadStatusChange).
   */
  statusReads?: () => Promise<Array<{ resource: GVR; paths: readonly string[] }>>;
  /**
   * Events of these resources (RevisionPolicies, MapControllers) change what is watched: each is followed at
   * once by `forget` (the definitions are read afresh) and a refresh, not only on the timer.
   */
  definitions?: readonly GVR[];
  forget?: () => void;
  /** Watch namespaced resources in this namespace only. */
  namespace?: string | undefined;
  /** A checkpoint file (or `checkpoint`, a store of any kind). */
  stateFile?: string | undefined;
  checkpoint?: CheckpointStore | undefined;
  refreshMs?: number;
  maxBuffered?: number;
  /** Bytes of envelopes held in memory at most (default 16 MiB); one envelope is always let through. */
  maxBufferedBytes?: number;
  /** A relist's page size in bytes (default 4 MiB). */
  pageBytes?: number;
  checkpointMs?: number;
  log?: Log;
  /**
   * This cluster's forwarder key (`outrigger forwarder-key`): each envelope is signed with it, so that history
   * may take its object for the parent's state and skip reading the parent. Without it envelopes go unsigned,
   * and are triggers only (docs/operations/security.md#events-are-triggers-not-state).
   */
  key?: string | undefined;
}

interface Pending {
  body: string;
  group: string;
  dedup: string;
  bytes: number;
  uid: string;
  gvr: string;
  type: string;
  skeleton: KubeObject;
}

/** One watched resource: how it is watched, and its watch. */
interface Watched {
  /** gvrString of the resource. */
  id: string;
  resource: GVR;
  /** Watched as metadata only (forwarder/metadata.ts). */
  asMetadata: boolean;
  /** A definition kind: its events change what is watched. */
  isDefinition: boolean;
  /** This watch's own stop, so that a resource no definition needs any longer stops being watched. */
  stop: AbortController;
  /** It has listed once. */
  synced: boolean;
  /** Its status-only changes are sent (`statusChanges`), as of the last refresh. */
  sendsStatus: boolean;
  /** A parent's status is read at these paths only (`statusReads`), as of the last refresh. */
  statusReads: readonly string[] | undefined;
  run: Promise<void>;
}

/** What the definitions need watched, as read at one refresh. */
interface WatchPlan {
  resources: GVR[];
  asMetadata(id: string): boolean;
  /** The watch goes on as it is: its resource is wanted, in the form it is watched in. */
  keeps(w: Watched): boolean;
  wanted(id: string): boolean;
  statusChanges: ReadonlySet<string>;
  statusReads: ReadonlyMap<string, readonly string[]>;
  definitions: ReadonlySet<string>;
}

/** A watch's event filters, as its controllers read now. */
function tune(w: Watched, plan: WatchPlan): void {
  w.sendsStatus = plan.statusChanges.has(w.id);
  w.statusReads = plan.statusReads.get(w.id);
}

export interface ForwarderStats {
  events: number;
  sent: number;
  batches: number;
  sendFailures: number;
  deadLettered: number;
  trimmed: number;
  /** Modifications of objects watched as metadata only that changed only their status: not sent. */
  statusOnly: number;
  /** Modifications of parents that changed only status fields no controller of theirs reads: not sent. */
  unreadStatus: number;
  buffered: number;
  maxBuffered: number;
  watches: number;
  synced: number;
}

export class Forwarder {
  lastSendError: string | undefined;
  private readonly counts = {
    events: 0,
    sent: 0,
    batches: 0,
    sendFailures: 0,
    deadLettered: 0,
    trimmed: 0,
    statusOnly: 0,
    unreadStatus: 0,
    maxBuffered: 0,
  };
  private readonly opts: ForwarderOptions;
  private readonly buffer: Pending[] = [];
  private bufferedBytes = 0;
  private readonly waiters: Array<() => void> = [];
  private wakeSender: (() => void) | undefined;
  private readonly abort = new AbortController();
  /** One record per resource watched now: a resource no definition needs any longer is dropped with its record. */
  private readonly watched = new Map<string, Watched>();
  private refreshing: Promise<void> = Promise.resolve();
  private refreshQueued = false;
  /**
   * What SQS has accepted, per resource, per uid: the checkpoint. Apart from the records, as it outlives a watch
   * restarted in another form and is loaded before any watch starts.
   */
  private readonly acked = new Map<string, Map<string, KubeObject>>();
  private sender: Promise<void> | undefined;
  private inFlight = false;
  private dirty = false;
  private timers: NodeJS.Timeout[] = [];
  private readonly store: CheckpointStore | undefined;
  private saving: Promise<void> | undefined;
  private readonly log: Log;

  constructor(opts: ForwarderOptions) {
    this.opts = opts;
    this.log = opts.log ?? (() => undefined);
    this.store = opts.checkpoint ?? (opts.stateFile ? new FileCheckpoint(opts.stateFile) : undefined);
  }

  async start(): Promise<void> {
    if (this.store) await this.loadCheckpoint(this.store);
    this.sender = this.sendLoop();
    await this.refresh();
    this.timers.push(
      setInterval(
        () => void this.refresh().catch((err: unknown) => this.log('warn', 'refreshing watches failed', { error: String(err) })),
        this.opts.refreshMs ?? 10_000,
      ),
    );
    if (this.store) this.timers.push(setInterval(() => this.checkpointOnce(), this.opts.checkpointMs ?? 1_000));
  }

  /** Resolves once every resource watched now has listed once. */
  async synced(): Promise<void> {
    while (this.syncedCount() < this.watched.size) await sleep(20);
  }

  /** Every watch has listed once, and the queue takes what is sent. */
  healthy(): boolean {
    return this.syncedCount() === this.watched.size && this.watched.size > 0 && this.lastSendError === undefined;
  }

  /** Waits until nothing is buffered (tests, and a graceful stop). */
  async drained(): Promise<void> {
    while (this.buffer.length > 0 || this.inFlight) await sleep(20);
  }

  async stop(opts: { flush?: boolean } = {}): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    if (opts.flush) await this.drained();
    this.abort.abort();
    this.wakeSender?.();
    for (const w of this.waiters.splice(0)) w();
    await Promise.allSettled([...[...this.watched.values()].map((w) => w.run), this.sender]);
    if (this.store) {
      await this.saving;
      await this.checkpoint();
    }
  }

  get stats(): ForwarderStats {
    return { ...this.counts, buffered: this.buffer.length, watches: this.watched.size, synced: this.syncedCount() };
  }

  private syncedCount(): number {
    let n = 0;
    for (const w of this.watched.values()) if (w.synced) n += 1;
    return n;
  }

  /** Refreshes run one after another, so a timer's and a definition's never decide on different reads at once. */
  private refresh(): Promise<void> {
    const next = this.refreshing.then(() => this.refreshOnce());
    this.refreshing = next.catch(() => undefined);
    return next;
  }

  private async refreshOnce(): Promise<void> {
    // What the definitions need watched now, and in which form.
    const plan = await this.planWatches();
    // Each watch that goes on filters its events by what its controllers read now.
    for (const w of this.watched.values()) tune(w, plan);
    // A resource no definition needs, or needed in another form, stops being watched.
    for (const w of [...this.watched.values()]) if (!plan.keeps(w)) await this.stopWatch(w, plan);
    // Each resource wanted and not watched starts being watched, from the index it has.
    for (const resource of plan.resources) if (!this.watched.has(gvrString(resource))) this.startWatch(resource, plan);
  }

  /** The definitions' answers, read once per refresh. */
  private async planWatches(): Promise<WatchPlan> {
    const resources = await this.opts.resources();
    const wanted = new Set(resources.map(gvrString));
    const whole = this.opts.wholeObjects ? new Set((await this.opts.wholeObjects()).map(gvrString)) : undefined;
    const metadataOnly = new Map(resources.map((r) => [gvrString(r), watchedAsMetadata(r, whole)]));
    const statusChanges = new Set(((await this.opts.statusChanges?.()) ?? []).map(gvrString));
    const statusReads = new Map(((await this.opts.statusReads?.()) ?? []).map((r) => [gvrString(r.resource), r.paths]));
    const definitions = new Set((this.opts.definitions ?? []).map(gvrString));
    return {
      resources,
      asMetadata: (id) => metadataOnly.get(id) ?? false,
      keeps: (w) => wanted.has(w.id) && metadataOnly.get(w.id) === w.asMetadata,
      wanted: (id) => wanted.has(id),
      statusChanges,
      statusReads,
      definitions,
    };
  }

  /**
   * A resource no definition needs any longer (its last policy deleted, or found bad) is watched no more, and its
   * index goes: should it be wanted again, every object is sent again, as for a new kind. A resource that became a
   * parent, or stopped being one, is watched again in its new form, from the index it has.
   */
  private async stopWatch(w: Watched, plan: WatchPlan): Promise<void> {
    const reshaped = plan.wanted(w.id);
    w.stop.abort();
    this.watched.delete(w.id);
    if (!reshaped) this.acked.delete(w.id);
    this.dirty = true;
    this.log(
      'info',
      reshaped ? "watch restarted: its objects are now sent as a parent's or a child's" : 'watch stopped: no definition needs it',
      { resource: w.id },
    );
    await w.run.catch(() => undefined);
  }

  private startWatch(resource: GVR, plan: WatchPlan): void {
    const id = gvrString(resource);
    const acked = this.acked.get(id) ?? new Map<string, KubeObject>();
    this.acked.set(id, acked);
    const w: Watched = {
      id,
      resource,
      asMetadata: plan.asMetadata(id),
      isDefinition: plan.definitions.has(id),
      stop: new AbortController(),
      synced: false,
      sendsStatus: false,
      statusReads: undefined,
      run: Promise.resolve(),
    };
    tune(w, plan);
    this.log('info', 'watching', { resource: id, ...(w.asMetadata ? { metadataOnly: true } : {}) });
    this.watched.set(id, w);
    w.run = this.watch(w, acked);
  }

  /** Lists and watches one resource until it is stopped (its record's own stop, or the forwarder's). */
  private async watch(w: Watched, acked: Map<string, KubeObject>): Promise<void> {
    const { kube } = this.opts;
    const namespace = this.opts.namespace && (await isNamespaced(kube, w.resource)) ? this.opts.namespace : undefined;
    const apiVersion = apiVersionOf(w.resource);
    const type = w.asMetadata ? { apiVersion, kind: (await resolveResource(kube, apiVersion, w.resource.resource)).kind } : undefined;
    await runWatchSource({
      client: kube,
      resource: w.resource,
      namespace,
      signal: AbortSignal.any([this.abort.signal, w.stop.signal]),
      metadataOnly: type,
      known: acked,
      keep: (o) => kept(o, !w.asMetadata),
      ...(this.opts.pageBytes ? { pageBytes: this.opts.pageBytes } : {}),
      onSynced: () => {
        if (!w.stop.signal.aborted) w.synced = true;
      },
      onError: (err) => this.log('warn', 'watch failed; retrying with backoff', { resource: w.id, error: String(err) }),
      onEvent: (e) => this.onEvent(w, e),
    });
  }

  /** One watch event: sent unless it changed only what no controller reads; a definition's also refreshes the watches. */
  private async onEvent(w: Watched, e: SourceEvent): Promise<void> {
    if (w.stop.signal.aborted) return;
    if (w.asMetadata && e.type === 'modified' && !w.sendsStatus && statusOnly(e.oldObject, e.object)) {
      this.counts.statusOnly += 1;
      return;
    }
    const reads = w.asMetadata || w.sendsStatus ? undefined : w.statusReads;
    if (reads && e.type === 'modified' && unreadStatusChange(e.oldObject, e.object, reads)) {
      this.counts.unreadStatus += 1;
      return;
    }
    await this.enqueue(w.id, w.asMetadata ? routingOnly(e) : e);
    if (w.isDefinition) this.definitionChanged();
  }

  /** A definition's event (after it is queued, so it goes ahead of its kind's first events): watch what it needs now. */
  private definitionChanged(): void {
    // One refresh waiting is enough for any number of events (a first list of many policies): it reads afresh
    // when it starts.
    if (this.abort.signal.aborted || this.refreshQueued) return;
    this.refreshQueued = true;
    const next = this.refreshing.then(() => {
      this.refreshQueued = false;
      this.opts.forget?.();
      return this.refreshOnce();
    });
    this.refreshing = next.catch((err: unknown) => this.log('warn', 'refreshing watches failed', { error: String(err) }));
  }

  private async enqueue(gvr: string, e: SourceEvent): Promise<void> {
    this.counts.events += 1;
    if (this.abort.signal.aborted) return;
    const pending = await this.toPending(gvr, e);
    if (!pending) return;
    const limit = this.opts.maxBuffered ?? 1_000;
    const bytes = this.opts.maxBufferedBytes ?? 16 * 1024 * 1024;
    while (
      (this.buffer.length >= limit || (this.buffer.length > 0 && this.bufferedBytes + pending.bytes > bytes)) &&
      !this.abort.signal.aborted
    )
      await new Promise<void>((r) => this.waiters.push(r));
    if (this.abort.signal.aborted) return;
    this.buffer.push(pending);
    this.bufferedBytes += pending.bytes;
    this.counts.maxBuffered = Math.max(this.counts.maxBuffered, this.buffer.length);
    this.wakeSender?.();
  }

  /** An envelope, signed when the forwarder has its cluster's key. */
  private envelope(e: NewEnvelope): Envelope {
    const envelope = makeEnvelope(e);
    return this.opts.key ? signEnvelope(this.opts.key, envelope) : envelope;
  }

  /** The envelope, trimmed to SQS's limit (managed fields, then the old object, carry nothing consumers need). */
  private async toPending(gvr: string, e: SourceEvent): Promise<Pending | undefined> {
    const source = this.opts.source ?? `outrigger://${this.opts.cluster}/forwarder`;
    let envelope: Envelope;
    try {
      envelope = this.envelope({ cluster: this.opts.cluster, type: e.type, object: e.object, oldObject: e.oldObject, source });
    } catch (err) {
      // An object Kubernetes allows but the envelope's bounds do not (an RBAC name such as system:foo): it goes to
      // the dead letters with the reason, and the watch goes on with the next event.
      await this.deadLetter(
        JSON.stringify({ type: e.type, object: skeletonOf(e.object) }),
        `cannot be sent as an event: ${err instanceof Error ? err.message : String(err)}`,
      );
      return undefined;
    }
    let body = JSON.stringify(envelope);
    if (Buffer.byteLength(body) > MAX_ENVELOPE_BYTES) {
      this.counts.trimmed += 1;
      const trim = (o: KubeObject | undefined) => (o ? { ...o, metadata: { ...o.metadata, managedFields: undefined } } : undefined);
      envelope = this.envelope({ cluster: this.opts.cluster, type: e.type, object: trim(e.object)!, oldObject: trim(e.oldObject), source });
      body = JSON.stringify(envelope);
      if (Buffer.byteLength(body) > MAX_ENVELOPE_BYTES) {
        envelope = this.envelope({ cluster: this.opts.cluster, type: e.type, object: trim(e.object)!, source });
        body = JSON.stringify(envelope);
      }
    }
    const skeleton = skeletonOf(e.object);
    if (Buffer.byteLength(body) > MAX_ENVELOPE_BYTES) {
      await this.deadLetter(
        body,
        `event for ${envelope.subject ?? '?'} is ${Buffer.byteLength(body)} bytes even without managed fields and the old object, over SQS's ${MAX_ENVELOPE_BYTES}`,
      );
      return undefined;
    }
    return {
      body,
      group: messageGroupId(envelope),
      dedup: deduplicationId(envelope, 'forwarder'),
      bytes: Buffer.byteLength(body),
      uid: e.object.metadata.uid ?? '',
      gvr,
      type: e.type,
      skeleton,
    };
  }

  private async deadLetter(body: string, reason: string): Promise<void> {
    this.counts.deadLettered += 1;
    this.log('error', 'event dead-lettered', { reason });
    await this.opts.sink.deadLetter(body, reason);
  }

  private async sendLoop(): Promise<void> {
    let backoff = 200;
    while (!this.abort.signal.aborted || this.buffer.length > 0) {
      if (this.buffer.length === 0) {
        if (this.abort.signal.aborted) return;
        await new Promise<void>((r) => (this.wakeSender = r));
        this.wakeSender = undefined;
        continue;
      }
      const batch: Pending[] = [];
      let bytes = 0;
      for (const p of this.buffer) {
        if (batch.length === BATCH_ENTRIES || bytes + p.bytes > BATCH_BYTES) break;
        batch.push(p);
        bytes += p.bytes;
      }
      this.inFlight = true;
      try {
        const failed = new Set(await this.opts.sink.sendBatch(batch));
        this.counts.batches += 1;
        // Accepted entries leave the buffer; failed ones stay at its head and go again.
        const keep = batch.filter((_, i) => failed.has(i));
        for (const [i, p] of batch.entries()) if (!failed.has(i)) this.acknowledge(p);
        this.buffer.splice(0, batch.length, ...keep);
        this.bufferedBytes = this.buffer.reduce((n, p) => n + p.bytes, 0);
        this.counts.sent += batch.length - keep.length;
        if (keep.length) {
          this.counts.sendFailures += keep.length;
          this.lastSendError = `${keep.length} of ${batch.length} not taken`;
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 30_000);
        } else {
          this.lastSendError = undefined;
          backoff = 200;
        }
      } catch (err) {
        this.counts.sendFailures += batch.length;
        this.lastSendError = String(err);
        this.log('warn', 'sending to SQS failed; retrying with backoff', { error: String(err), backoffMs: backoff });
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 30_000);
      } finally {
        this.inFlight = false;
      }
      // Every waiting callback looks again at what room there is now.
      for (const wake of this.waiters.splice(0)) wake();
    }
  }

  private acknowledge(p: Pending): void {
    const acked = this.acked.get(p.gvr);
    if (!acked) return;
    this.dirty = true;
    if (p.type === 'deleted') acked.delete(p.uid);
    else if (!isOlder(p.skeleton, acked.get(p.uid))) acked.set(p.uid, p.skeleton);
  }

  /**
   * The timer's write: one at a time, so that a slow one (a large index, a busy apiserver) is never overtaken by
   * the next tick's, which could leave the older index written last.
   */
  private checkpointOnce(): void {
    if (this.saving) return;
    this.saving = this.checkpoint()
      .catch((err: unknown) => this.log('warn', 'checkpoint failed', { error: String(err) }))
      .finally(() => (this.saving = undefined));
  }

  private async checkpoint(): Promise<void> {
    if (!this.store || !this.dirty) return;
    this.dirty = false;
    const data = Object.fromEntries([...this.acked].map(([gvr, byUid]) => [gvr, [...byUid.values()]]));
    try {
      await this.store.save(JSON.stringify({ cluster: this.opts.cluster, resources: data }));
    } catch (err) {
      // Written again at the next tick.
      this.dirty = true;
      throw err;
    }
  }

  private async loadCheckpoint(store: CheckpointStore): Promise<void> {
    const text = await store.load();
    if (!text) return;
    try {
      const parsed = JSON.parse(text) as { cluster?: string; resources?: Record<string, KubeObject[]> };
      if (parsed.cluster !== this.opts.cluster) return; // another cluster's checkpoint is no use here
      for (const [gvr, objects] of Object.entries(parsed.resources ?? {}))
        this.acked.set(gvr, new Map(objects.map((o) => [o.metadata.uid ?? '', o])));
      this.log('info', 'checkpoint loaded', {
        from: store.where,
        resources: this.acked.size,
        objects: [...this.acked.values()].reduce((n, m) => n + m.size, 0),
      });
    } catch (err) {
      this.log('warn', 'checkpoint unreadable; every object will be sent again', { error: String(err) });
    }
  }
}

/** resourceVersions are opaque, but etcd's are integers: an ack that arrives after a newer one is ignored. */
function isOlder(next: KubeObject, current: KubeObject | undefined): boolean {
  const a = next.metadata.resourceVersion ?? '';
  const b = current?.metadata.resourceVersion ?? '';
  return /^\d+$/.test(a) && /^\d+$/.test(b) && BigInt(a) < BigInt(b);
}
