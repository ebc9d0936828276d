// The forwarder's counters in Prometheus' text exposition format (no client library: a few gauges and counters).
import type { ForwarderStats } from './forwarder.ts';

const HELP: Record<keyof ForwarderStats, [string, 'counter' | 'gauge']> = {
  events: ['Watch events received', 'counter'],
  sent: ['Envelopes accepted by SQS', 'counter'],
  batches: ['SendMessageBatch calls that got an answer', 'counter'],
  sendFailures: ['Envelopes SQS did not take on a try (they are retried)', 'counter'],
  deadLettered: ['Events too large for SQS even when trimmed, sent to the dead-letter queue', 'counter'],
  trimmed: ['Envelopes trimmed (managed fields, old object) to fit SQS', 'counter'],
  statusOnly: ['Status-only changes of objects watched as metadata only, not sent', 'counter'],
  unreadStatus: ["Parents' status changes no controller of theirs reads, not sent", 'counter'],
  buffered: ['Envelopes waiting to be sent', 'gauge'],
  maxBuffered: ['Most envelopes waiting at once since start', 'gauge'],
  watches: ['Resources watched', 'gauge'],
  synced: ['Resources whose first list completed', 'gauge'],
};

export function metricsText(stats: ForwarderStats): string {
  return (Object.keys(HELP) as Array<keyof ForwarderStats>)
    .map((k) => {
      const name = `outrigger_forwarder_${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}${HELP[k][1] === 'counter' ? '_total' : ''}`;
      return `# HELP ${name} ${HELP[k][0]}\n# TYPE ${name} ${HELP[k][1]}\n${name} ${stats[k]}\n`;
    })
    .join('');
}
