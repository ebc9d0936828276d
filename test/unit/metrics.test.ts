// Domain metrics as CloudWatch reads them (docs/reference/metrics-and-alarms.md): embedded metric format documents on stdout, one
// per cluster and dimension set, with the dimensions the stack's alarms name.
import { failureReason, MetricsRecorder } from '../../shared/lambda/metrics.ts';
import { KubeError } from '../../shared/kube/index.ts';
import { emfOf as captured } from '../testbed/emf.ts';

describe('MetricsRecorder', () => {
  test('one document per cluster and dimension set, values of a name together, nothing before flush', async () => {
    const m = new MetricsRecorder();
    const early = await captured(() => {
      m.count('prod', 'RevisionsCreated');
      m.count('prod', 'RevisionsCreated');
      m.count('prod', 'SyncsFailed', 1, { function: 'history', reason: 'Forbidden' });
      m.count('dev', 'RevisionsTruncated', 3);
      m.milliseconds('prod', 'HookLatency', 12.5);
    });
    expect(early).toEqual([]);
    const docs = await captured(() => m.flush());
    expect(docs).toHaveLength(3);
    const prod = docs.find((d) => d.cluster === 'prod' && !('reason' in d))!;
    expect(prod._aws.CloudWatchMetrics[0]!.Namespace).toBe('Outrigger');
    expect(prod.RevisionsCreated).toEqual([1, 1]);
    expect(prod.HookLatency).toBe(12.5);
    expect(prod._aws.CloudWatchMetrics[0]!.Metrics).toEqual(
      expect.arrayContaining([
        { Name: 'HookLatency', Unit: 'Milliseconds' },
        { Name: 'RevisionsCreated', Unit: 'Count' },
      ]),
    );
    const failed = docs.find((d) => d.reason === 'Forbidden')!;
    expect(failed).toMatchObject({ cluster: 'prod', function: 'history', SyncsFailed: 1, service: 'outrigger' });
    expect(docs.find((d) => d.cluster === 'dev')).toMatchObject({ RevisionsTruncated: 3 });
    expect(failed._aws.CloudWatchMetrics[0]!.Dimensions).toEqual([['service', 'cluster', 'function', 'reason']]);
    // Flushed once: the next flush writes nothing.
    expect(await captured(() => m.flush())).toEqual([]);
  });

  test("a failure's reason is a bounded word: the Kubernetes error's kind, or the error's class, never its message", () => {
    expect(failureReason(new KubeError('Forbidden', 'pods is forbidden: User "x" cannot list'))).toBe('Forbidden');
    expect(failureReason(new TypeError('boom at 0x1234'))).toBe('TypeError');
    expect(failureReason('a string')).toBe('Error');
  });
});
