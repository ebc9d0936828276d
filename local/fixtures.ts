// Objects the benchmarks and tests make on the test bed. A StatefulSet with no replicas: nothing on the bed
// schedules pods, and its template (the target state history keeps) is all that matters.
import type { KubeObject } from '../shared/kube/index.ts';

export function statefulSet(name: string, namespace: string, image: string, app = name): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, namespace },
    spec: {
      serviceName: name,
      replicas: 0,
      selector: { matchLabels: { app } },
      template: { metadata: { labels: { app } }, spec: { containers: [{ name: 'c', image }] } },
    },
  };
}
