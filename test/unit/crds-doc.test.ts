// docs/reference/crds.md names every field the CRDs in cluster/crds/ declare, so a field added to a schema cannot go
// undocumented (docs/contributing/conventions.md#generated-reference).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { projectRoot } from '../../local/paths.ts';

interface Schema {
  properties?: Record<string, Schema>;
  items?: Schema;
}
interface Crd {
  kind: string;
  spec: { names: { kind: string }; versions: Array<{ storage: boolean; schema: { openAPIV3Schema: Schema } }> };
}

/** Every field path of a schema: `spec.outputResources[].updateStrategy.method`. */
function paths(schema: Schema, prefix = ''): string[] {
  const own = Object.entries(schema.properties ?? {}).flatMap(([name, child]) => {
    const path = prefix ? `${prefix}.${name}` : name;
    return [path, ...paths(child, path)];
  });
  return schema.items ? [...own, ...paths(schema.items, `${prefix}[]`)] : own;
}

test('docs/reference/crds.md names every field of every CRD in cluster/crds/', () => {
  const page = readFileSync(join(projectRoot, 'docs/reference/crds.md'), 'utf8');
  const dir = join(projectRoot, 'cluster/crds');
  const crds = readdirSync(dir).flatMap((f) => loadAll(readFileSync(join(dir, f), 'utf8')) as Crd[]);
  expect(crds.map((c) => c.spec.names.kind).sort()).toEqual([
    'CompositeController',
    'DecoratorController',
    'MapController',
    'RevisionPolicy',
    'StorageState',
    'StorageVersionMigration',
  ]);
  const missing = crds.flatMap((crd) => {
    const stored = crd.spec.versions.find((v) => v.storage)!;
    // The hooks of a kind share one shape, which the page names once as spec.hooks.<hook>.
    const named = (path: string) =>
      page.includes(`\`${path}\``) ||
      page.includes(
        `\`${path.replace(/^spec\.hooks\.(map|tombstone|finalize|sync|customize|preUpdateChild|postUpdateChild)\./, 'spec.hooks.<hook>.')}\``,
      );
    return paths(stored.schema.openAPIV3Schema)
      .filter((path) => path !== 'status' || crd.spec.names.kind === 'MapController')
      .filter((path) => !named(path))
      .map((path) => `${crd.spec.names.kind}: ${path}`);
  });
  expect(missing).toEqual([]);
});
