// `<kind>/<name>` resolved through discovery (cli/resolve.ts, docs/reference/cli.md#resolving-kindname) while
// group versions come and go: one that does not answer is skipped and named, one removed since /apis listed it
// is skipped; a write to a custom resource found while some did not answer is refused.
import { resolveResourceArg, unambiguous } from '../../cli/resolve.ts';
import { KubeError } from '../../shared/kube/index.ts';
import { FakeKube } from '../fakes/kube.ts';

function cluster(failing: Record<string, KubeError>): FakeKube {
  const kube = new FakeKube();
  kube.served.push(
    { group: 'energy.example', version: 'v1', resource: 'turbines', kind: 'Turbine', namespaced: true },
    { group: 'down.example', version: 'v1', resource: 'gauges', kind: 'Gauge', namespaced: true },
    { group: 'gone.example', version: 'v1', resource: 'dials', kind: 'Dial', namespaced: true },
  );
  kube.beforeRequest = (verb, r) => {
    const err = verb === 'discovery' ? failing[r.resource] : undefined;
    if (err) throw err;
  };
  return kube;
}
const unavailable = () => new KubeError('Transient', '503 Transient: service unavailable', { status: 503 });
const notFound = () => new KubeError('NotFound', '404 NotFound: 404 page not found', { status: 404 });

test('a group version that does not answer is skipped and named; a read goes on', async () => {
  const kube = cluster({ '/apis/down.example/v1': unavailable() });
  const resolved = await resolveResourceArg(kube, 'turbine/t1');
  expect(resolved).toMatchObject({ resource: { group: 'energy.example', resource: 'turbines' }, name: 't1', unread: ['down.example/v1'] });
  expect(() => unambiguous(resolved, 'turbine/t1')).toThrow('name it as turbines.energy.example/t1');
  // Named with its group, no other group is read.
  expect(unambiguous(await resolveResourceArg(kube, 'turbines.energy.example/t1'), 'x')).toMatchObject({ unread: [] });
});

test('a group version removed between the group list and its read is skipped, as one that never was', async () => {
  const kube = cluster({ '/apis/gone.example/v1': notFound() });
  const resolved = await resolveResourceArg(kube, 'turbine/t1');
  expect(resolved).toMatchObject({ resource: { group: 'energy.example' }, unread: [] });
  expect(unambiguous(resolved, 'turbine/t1')).toBe(resolved);
});

test('a built-in kind is found whatever the other groups answer; any other failure is an error', async () => {
  expect(await resolveResourceArg(cluster({ '/apis/down.example/v1': unavailable() }), 'statefulset/web')).toMatchObject({
    resource: { group: 'apps', resource: 'statefulsets' },
  });
  const forbidden = new KubeError('Forbidden', '403 Forbidden', { status: 403 });
  await expect(resolveResourceArg(cluster({ '/apis/down.example/v1': forbidden }), 'turbine/t1')).rejects.toThrow('403 Forbidden');
});
