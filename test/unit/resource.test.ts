import fc from 'fast-check';
import { apiVersionOf, gvr, parseApiVersion, resourcePath } from '../../shared/kube/index.ts';

describe('REST paths by group/version/resource', () => {
  test.each([
    [gvr('', 'v1', 'namespaces'), {}, '/api/v1/namespaces'],
    [gvr('', 'v1', 'configmaps'), { namespace: 'a', name: 'b' }, '/api/v1/namespaces/a/configmaps/b'],
    [gvr('apps', 'v1', 'controllerrevisions'), { namespace: 'ns' }, '/apis/apps/v1/namespaces/ns/controllerrevisions'],
    [
      gvr('apps', 'v1', 'statefulsets'),
      { namespace: 'ns', name: 'web', subresource: 'status' },
      '/apis/apps/v1/namespaces/ns/statefulsets/web/status',
    ],
    [gvr('migration.k8s.io', 'v1alpha1', 'storagestates'), { name: 'pods' }, '/apis/migration.k8s.io/v1alpha1/storagestates/pods'],
  ])('%j %j', (r, opts, path) => {
    expect(resourcePath(r, opts)).toBe(path);
  });

  test('an empty name is refused rather than addressing the collection', () => {
    expect(() => resourcePath(gvr('', 'v1', 'pods'), { name: '' })).toThrow('an object of pods needs a name');
  });

  test('apiVersion splits and joins back', () => {
    const segment = fc.stringMatching(/^[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?$/);
    fc.assert(
      fc.property(fc.option(segment, { nil: '' }), fc.stringMatching(/^v[1-9][a-z0-9]{0,8}$/), (group, version) => {
        const apiVersion = apiVersionOf({ group, version });
        expect(parseApiVersion(apiVersion)).toEqual({ group, version });
      }),
    );
  });
});
