// The forwarder's memory under large objects (docs/operations/forwarder.md#memory): objects with large
// annotations created in one namespace, then the forwarder started as a process of its own with the deployed
// heap limit, its peak resident memory sampled from /proc while every event it sends is received from the
// queue. Shared by test/integration/forwarder-memory.test.ts and bench/forwarder-memory.ts.
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import pLimit from 'p-limit';
import { parseEnvelope } from '../../shared/envelope/index.ts';
import { Resources, type KubeClient } from '../../shared/kube/index.ts';
import { startForwarder } from './forwarder.ts';

/** `count` ControllerRevisions in `namespace`, each with one annotation of `bytes` bytes. */
export async function createAnnotated(kube: KubeClient, namespace: string, count: number, bytes: number): Promise<void> {
  const blob = 'x'.repeat(bytes);
  const limit = pLimit(16);
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      limit(() =>
        kube.create(Resources.controllerRevisions, {
          apiVersion: 'apps/v1',
          kind: 'ControllerRevision',
          metadata: { name: `big-${i}`, namespace, annotations: { 'example.com/blob': blob } },
          data: {},
          revision: 1,
        }),
      ),
    ),
  );
}

export interface MemoryRun {
  /** Distinct ControllerRevisions whose `added` event was received from the queue. */
  delivered: number;
  /** The process's peak resident set (VmHWM), in MiB. */
  peakRssMiB: number;
  /** How it ended before every event was received (a crash: `code 134`, `signal SIGKILL`), if it did. */
  crashed: string | undefined;
  ms: number;
  log: string;
}

/**
 * Starts the forwarder with `env` and receives from `queue` until `count` objects were delivered, the forwarder
 * exited, or `timeoutMs` passed; then stops it.
 */
export async function forwardAll(opts: {
  env: Record<string, string>;
  queue: { sqs: SQSClient; url: string };
  count: number;
  timeoutMs: number;
}): Promise<MemoryRun> {
  const started = Date.now();
  const fwd = startForwarder(opts.env);
  let ended: string | undefined;
  void fwd.exited.then((code) => (ended = code === null ? `signal ${fwd.child.signalCode}` : `code ${code}`));
  let peakKiB = 0;
  const sampling = (async () => {
    while (ended === undefined) {
      const status = await readFile(`/proc/${fwd.child.pid}/status`, 'utf8').catch(() => '');
      const hwm = /VmHWM:\s+(\d+) kB/.exec(status);
      if (hwm) peakKiB = Math.max(peakKiB, Number(hwm[1]));
      await sleep(100);
    }
  })();
  const names = new Set<string>();
  const deadline = Date.now() + opts.timeoutMs;
  const receiver = async () => {
    while (names.size < opts.count && ended === undefined && Date.now() < deadline) {
      const out = await opts.queue.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: opts.queue.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      const messages = out.Messages ?? [];
      for (const m of messages) {
        const envelope = parseEnvelope(m.Body ?? '');
        // Only the objects made here: the namespace holds others (kube-root-ca.crt, when another test's
        // controller makes ConfigMaps watched).
        const { kind, metadata } = envelope.data.object;
        if (envelope.type.endsWith('.added') && kind === 'ControllerRevision') names.add(metadata.name ?? '');
      }
      if (messages.length)
        await opts.queue.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: opts.queue.url,
            Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
          }),
        );
    }
  };
  await Promise.all([receiver(), receiver(), receiver()]);
  const ms = Date.now() - started;
  const crashed = ended;
  if (ended === undefined) {
    fwd.child.kill('SIGKILL');
    await fwd.exited;
  }
  await sampling;
  return { delivered: names.size, peakRssMiB: Math.round(peakKiB / 1024), crashed, ms, log: fwd.log() };
}
