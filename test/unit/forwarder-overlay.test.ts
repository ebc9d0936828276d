// The forwarder's generated overlay (scripts/forwarder-overlay.ts): outputs found by the cluster's PascalCase
// name, with or without a construct's prefix and hash; the region from the queue URL; images by tag or digest;
// the cluster's storage settings carried, the rest of its entry not; the Helm chart's values hold the same settings.
import { load } from 'js-yaml';
import { findOutput, forwarderHelmValues, forwarderOverlay, pascal, queueRegion } from '../../scripts/forwarder-overlay.ts';
import { parseClusters } from '../../shared/clusters.ts';

const eks = { kind: 'eks', server: 'https://X.gr7.eu-west-1.eks.amazonaws.com', caData: 'Q0E=', clusterName: 'prod', region: 'eu-west-1' };
const queue = (name: string) => `https://sqs.eu-west-1.amazonaws.com/123456789012/Outrigger-${name}.fifo`;

test('outputs are found by the PascalCase id, exactly, with a hash suffix, or under a construct prefix when only one matches', () => {
  expect(pascal('prod-eu')).toBe('ProdEu');
  expect(pascal('prod-1')).toBe('Prod1');
  expect(findOutput({ S: { ProdEuEventsQueueUrl: 'a', EuEventsQueueUrl: 'b' } }, 'EuEventsQueueUrl')).toBe('b');
  expect(findOutput({ S: { OutriggerProdEventsQueueUrlA1B2C3D4: 'a' } }, 'ProdEventsQueueUrl')).toBe('a');
  expect(() => findOutput({ S: { ProdEuEventsQueueUrl: 'a', XEuEventsQueueUrl: 'b' } }, 'EuEventsQueueUrl')).toThrow(
    /several outputs match EuEventsQueueUrl/,
  );
  expect(findOutput({ S: {} }, 'ProdEventsQueueUrl')).toBeUndefined();
  expect(queueRegion(queue('prod-events'))).toBe('eu-west-1');
  expect(queueRegion('https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q.fifo')).toBe('cn-north-1');
  expect(queueRegion('http://127.0.0.1:9324/000000000000/q.fifo')).toBeUndefined();
});

test('the overlay carries the cluster id, queues, region, image and storage settings, and refuses what it lacks', () => {
  const clusters = parseClusters(
    JSON.stringify([
      { id: 'prod', access: eks, storage: { enabled: false } },
      { id: 'other', access: eks },
    ]),
  );
  const outputs = {
    Outrigger: {
      ProdEventsQueueUrl: queue('prod-events'),
      ProdEventsDeadLetterQueueUrl: queue('prod-events-dlq'),
      ForwarderImageUri: '123456789012.dkr.ecr.eu-west-1.amazonaws.com/fwd@sha256:abc',
    },
  };
  const files = forwarderOverlay({ cluster: 'prod', clusters, outputs, base: '../../base' });
  const env = Object.fromEntries(
    files['forwarder.env']!.trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  expect(env).toEqual({
    OUTRIGGER_CLUSTER_ID: 'prod',
    OUTRIGGER_EVENT_QUEUE_URL: queue('prod-events'),
    OUTRIGGER_DEAD_LETTER_QUEUE_URL: queue('prod-events-dlq'),
    OUTRIGGER_CLUSTERS: JSON.stringify([
      { id: 'prod', access: { kind: 'kubeconfig' }, storage: { enabled: false, migrations: 'outrigger' } },
    ]),
    AWS_REGION: 'eu-west-1',
  });
  // What the forwarder is given parses as the functions' configuration does.
  expect(parseClusters(env.OUTRIGGER_CLUSTERS!)[0]!.storage?.enabled).toBe(false);
  const kustomization = load(files['kustomization.yaml']!) as Record<string, unknown>;
  expect(kustomization).toMatchObject({
    resources: ['../../base'],
    images: [{ name: 'outrigger-forwarder', newName: '123456789012.dkr.ecr.eu-west-1.amazonaws.com/fwd', digest: 'sha256:abc' }],
    configMapGenerator: [{ name: 'outrigger-forwarder', behavior: 'merge', envs: ['forwarder.env'] }],
  });
  const tagged = load(
    forwarderOverlay({ cluster: 'prod', clusters, outputs, image: 'registry:5000/fwd:1.2', base: 'b' })['kustomization.yaml']!,
  ) as { images: unknown[] };
  expect(tagged.images).toEqual([{ name: 'outrigger-forwarder', newName: 'registry:5000/fwd', newTag: '1.2' }]);
  const untagged = load(
    forwarderOverlay({ cluster: 'prod', clusters, outputs, image: 'registry:5000/fwd', base: 'b' })['kustomization.yaml']!,
  ) as { images: unknown[] };
  expect(untagged.images).toEqual([{ name: 'outrigger-forwarder', newName: 'registry:5000/fwd' }]);

  // Another namespace: the bindings' ServiceAccount subjects follow it (kustomize's namespace leaves them).
  const moved = load(forwarderOverlay({ cluster: 'prod', clusters, outputs, base: 'b', namespace: 'ops' })['kustomization.yaml']!) as {
    namespace: string;
    patches: Array<{ target: { kind: string }; patch: string }>;
  };
  expect(moved.namespace).toBe('ops');
  expect(moved.patches.map((p) => [p.target.kind, JSON.parse(p.patch) as unknown])).toEqual([
    ['ClusterRoleBinding', [{ op: 'replace', path: '/subjects/0/namespace', value: 'ops' }]],
    ['RoleBinding', [{ op: 'replace', path: '/subjects/0/namespace', value: 'ops' }]],
  ]);

  expect(() => forwarderOverlay({ cluster: 'nope', clusters, outputs, base: 'b' })).toThrow(/has no cluster nope \(it names prod, other\)/);
  expect(() => forwarderOverlay({ cluster: 'other', clusters, outputs, base: 'b' })).toThrow(
    /no events queue for cluster other: pass --outputs with OtherEventsQueueUrl/,
  );
  expect(() =>
    forwarderOverlay({
      cluster: 'prod',
      clusters,
      outputs: { S: { ProdEventsQueueUrl: 'q', ProdEventsDeadLetterQueueUrl: 'd' } },
      base: 'b',
    }),
  ).toThrow(/no forwarder image/);
});

test("the Helm chart's values hold the overlay's settings, and refuse what it refuses", () => {
  const clusters = parseClusters(JSON.stringify([{ id: 'prod', access: eks, storage: { migrations: 'in-tree' } }]));
  const outputs = {
    Outrigger: {
      ProdEventsQueueUrl: queue('prod-events'),
      ProdEventsDeadLetterQueueUrl: queue('prod-events-dlq'),
      ForwarderImageUri: '123456789012.dkr.ecr.eu-west-1.amazonaws.com/fwd@sha256:abc',
    },
  };
  expect(load(forwarderHelmValues({ cluster: 'prod', clusters, outputs, namespace: 'ops' }))).toEqual({
    clusterId: 'prod',
    eventsQueueUrl: queue('prod-events'),
    deadLetterQueueUrl: queue('prod-events-dlq'),
    region: 'eu-west-1',
    storage: { enabled: true, migrations: 'in-tree' },
    image: { repository: '123456789012.dkr.ecr.eu-west-1.amazonaws.com/fwd', digest: 'sha256:abc' },
    namespace: 'ops',
  });
  expect(load(forwarderHelmValues({ cluster: 'prod', clusters, outputs, image: 'registry:5000/fwd:1.2' }))).toMatchObject({
    image: { repository: 'registry:5000/fwd', tag: '1.2' },
  });
  expect(() => forwarderHelmValues({ cluster: 'prod', clusters, outputs: { S: {} } })).toThrow(/no events queue for cluster prod/);
});

// The settings that decide what the forwarder watches reach its OUTRIGGER_CLUSTERS and the chart's values alike:
// the served controllers' kinds only, and none of the Metacontroller APIs' with them off.
test.each([
  ['controllerSelector', { controllerSelector: 'example.com/engine=outrigger' }],
  ['metacontroller', { metacontroller: { enabled: false } }],
])("the cluster's %s reaches the forwarder, so it watches what the router routes", (_, setting) => {
  const clusters = parseClusters(JSON.stringify([{ id: 'prod', access: eks, ...setting }]));
  const input = {
    cluster: 'prod',
    clusters,
    eventsQueueUrl: queue('prod-events'),
    deadLetterQueueUrl: queue('prod-events-dlq'),
    image: 'registry.example/fwd:1',
  };
  const env = forwarderOverlay({ ...input, base: '../../base' })['forwarder.env']!;
  const entry = env
    .split('\n')
    .find((l) => l.startsWith('OUTRIGGER_CLUSTERS='))!
    .slice('OUTRIGGER_CLUSTERS='.length);
  expect(parseClusters(entry)[0]).toMatchObject(setting);
  expect(load(forwarderHelmValues(input))).toMatchObject(setting);
});
