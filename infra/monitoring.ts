// Alarms (all to one SNS topic) and the dashboard: what an operator watches (docs/reference/metrics-and-alarms.md).
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { METRICS_NAMESPACE, METRICS_SERVICE } from '../shared/lambda/metrics.ts';
import type { QueuePair } from './queues.ts';

/** Where every alarm goes, and every alarm made so far (the dashboard shows them all). */
export class Alarms {
  readonly all: cloudwatch.Alarm[] = [];
  readonly topic: sns.ITopic;
  constructor(topic: sns.ITopic) {
    this.topic = topic;
  }

  // eslint-disable-next-line max-params -- the alarm's own fields, one call per alarm at ten call sites that read as a table; an object would only name them twice
  add(
    scope: Construct,
    id: string,
    description: string,
    metric: cloudwatch.IMetric,
    threshold: number,
    comparisonOperator: cloudwatch.ComparisonOperator,
  ): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(scope, id, {
      alarmDescription: description,
      metric,
      threshold,
      comparisonOperator,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    alarm.addAlarmAction(new cwActions.SnsAction(this.topic));
    this.all.push(alarm);
    return alarm;
  }
}

/** What the alarms and the dashboard watch: a dead-letter queue's depth, and a queue's oldest message's age. */
export function deadLetterMetric(deadLetter: sqs.IQueue, label?: string): cloudwatch.Metric {
  return deadLetter.metricApproximateNumberOfMessagesVisible({
    period: Duration.minutes(1),
    statistic: 'Maximum',
    ...(label ? { label } : {}),
  });
}

export function oldestMessageMetric(pair: QueuePair, label?: string): cloudwatch.Metric {
  return pair.queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(5), statistic: 'Maximum', ...(label ? { label } : {}) });
}

export interface DashboardProps {
  alarms: Alarms;
  functions: ReadonlyMap<string, lambda.Function>;
  /** Per cluster id, its queue pairs, each named by what it holds. */
  clusters: ReadonlyMap<string, Array<[string, QueuePair]>>;
  ingestDeadLetter: sqs.IQueue;
}

/** Alarms and functions on top, then a row per cluster: a graph widget shows at most 100 metrics, an alarm widget 100 alarms. */
export function addDashboard(scope: Construct, id: string, props: DashboardProps): cloudwatch.Dashboard {
  const fns = [...props.functions];
  return new cloudwatch.Dashboard(scope, id, {
    widgets: [
      [new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: props.alarms.all, width: 24 })],
      [
        new cloudwatch.GraphWidget({
          title: 'Function errors',
          width: 8,
          left: fns.map(([name, fn]) => fn.metricErrors({ label: name, period: Duration.minutes(5), statistic: 'Sum' })),
        }),
        new cloudwatch.GraphWidget({
          title: 'Invocations',
          width: 8,
          left: fns.map(([name, fn]) => fn.metricInvocations({ label: name, period: Duration.minutes(5), statistic: 'Sum' })),
        }),
        new cloudwatch.GraphWidget({
          title: 'Duration p99 (ms)',
          width: 8,
          left: fns.map(([name, fn]) => fn.metricDuration({ label: name, period: Duration.minutes(5), statistic: 'p99' })),
        }),
      ],
      ...[...props.clusters].map(([cluster, pairs]) => [
        new cloudwatch.GraphWidget({
          title: `${cluster}: dead letters (messages visible)`,
          width: 8,
          left: pairs.map(([name, p]) => deadLetterMetric(p.deadLetter, name)),
        }),
        new cloudwatch.GraphWidget({
          title: `${cluster}: oldest message age (s)`,
          width: 8,
          left: pairs.map(([name, p]) => oldestMessageMetric(p, name)),
        }),
        new cloudwatch.GraphWidget({
          title: `${cluster}: events and syncs`,
          width: 8,
          left: DOMAIN_COUNTS.map((name) => domainMetric(cluster, name)),
          right: [syncsFailed(cluster)],
        }),
      ]),
      [
        new cloudwatch.GraphWidget({
          title: 'Ingest: refused requests (dead letters visible)',
          width: 24,
          left: [deadLetterMetric(props.ingestDeadLetter, 'ingest')],
        }),
      ],
    ],
  });
}

/** The domain counts each cluster's row graphs (docs/reference/metrics-and-alarms.md lists them all). */
const DOMAIN_COUNTS = ['EventsReceived', 'SyncRequestsSent', 'RevisionsCreated', 'RevisionsTruncated', 'ObjectsMigrated', 'HookCalls'];

function domainMetric(cluster: string, metricName: string): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: { service: METRICS_SERVICE, cluster },
    statistic: 'Sum',
    period: Duration.minutes(5),
    label: metricName,
  });
}

/** Failed syncs of every function and reason (dimensions of their own), summed for the cluster. */
function syncsFailed(cluster: string): cloudwatch.MathExpression {
  return new cloudwatch.MathExpression({
    expression: `SUM(SEARCH('{${METRICS_NAMESPACE},service,cluster,function,reason} MetricName="SyncsFailed" cluster="${cluster}"', 'Sum', 300))`,
    label: 'SyncsFailed',
    period: Duration.minutes(5),
  });
}
