import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';

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
