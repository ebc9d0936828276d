import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { KubeError } from '../kube/errors.ts';

/** Outrigger's CloudWatch metrics (embedded metric format, written to the function's log): namespace and service. */
export const METRICS_NAMESPACE = 'Outrigger';
export const METRICS_SERVICE = 'outrigger';

/**
 * Publishes counts for one cluster at once, each as its own EMF document with the dimensions the stack's alarms
 * name (service and cluster), so one invocation can speak for several clusters.
 */
export function publishCounts(cluster: string, counts: Record<string, number>): void {
  const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: METRICS_SERVICE });
  for (const [name, value] of Object.entries(counts)) {
    const single = metrics.singleMetric();
    single.addDimension('cluster', cluster);
    single.addMetric(name, MetricUnit.Count, value);
  }
}

type Unit = (typeof MetricUnit)[keyof typeof MetricUnit];

/** Outrigger's domain metrics (docs/reference/metrics-and-alarms.md): counts and durations, named as its table names them. */
export type DomainMetric =
  | 'RevisionsCreated'
  | 'Rollbacks'
  | 'RevisionsTruncated'
  | 'SyncsFailed'
  | 'HookCalls'
  | 'HookFailures'
  | 'HookLatency'
  | 'ObjectsMigrated'
  | 'StoragePolls'
  | 'EventsReceived'
  | 'EventsDeadLettered'
  | 'EventsRetried'
  | 'SyncRequestsSent'
  | 'RoutesRefused'
  | 'ForwarderSilentSeconds'
  | 'ClusterUnreachable';

/**
 * One invocation's domain metrics, kept until `flush` writes them: one EMF document per cluster and dimension
 * set (a batch of 10 records makes one log line, not ten). Dimensions are few and bounded (a reason is an
 * error kind, never a message), so each is a CloudWatch metric an alarm can name.
 */
export class MetricsRecorder {
  private readonly stored = new Map<
    string,
    { dimensions: Record<string, string>; values: Array<{ name: DomainMetric; unit: Unit; value: number }> }
  >();

  count(cluster: string, name: DomainMetric, value = 1, dimensions: Record<string, string> = {}): void {
    this.add(cluster, name, MetricUnit.Count, value, dimensions);
  }

  milliseconds(cluster: string, name: DomainMetric, value: number, dimensions: Record<string, string> = {}): void {
    this.add(cluster, name, MetricUnit.Milliseconds, value, dimensions);
  }

  seconds(cluster: string, name: DomainMetric, value: number, dimensions: Record<string, string> = {}): void {
    this.add(cluster, name, MetricUnit.Seconds, value, dimensions);
  }

  /** Writes what was recorded (to the function's log, as EMF) and forgets it. */
  flush(): void {
    for (const { dimensions, values } of this.stored.values()) {
      const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: METRICS_SERVICE });
      metrics.addDimensions(dimensions);
      for (const v of values) metrics.addMetric(v.name, v.unit, v.value);
      metrics.publishStoredMetrics();
    }
    this.stored.clear();
  }

  private add(cluster: string, name: DomainMetric, unit: Unit, value: number, extra: Record<string, string>): void {
    const dimensions = { cluster, ...extra };
    const key = JSON.stringify(Object.entries(dimensions).sort());
    let entry = this.stored.get(key);
    if (!entry) this.stored.set(key, (entry = { dimensions, values: [] }));
    entry.values.push({ name, unit, value });
  }
}

/** A failure's reason as a metric dimension: the Kubernetes error's kind, or the error's class. */
export function failureReason(err: unknown): string {
  if (err instanceof KubeError) return err.kind;
  return err instanceof Error ? err.name : 'Error';
}
